// Package event owns the vocabulary of live frames: the closed set of
// ephemeral frame values a run, the titler and the settings publish, and
// their encoding between instances (Decode). The agent, the hub and the
// cluster read it without importing one another; it imports nothing of
// herd but models' usage row.
//
// A new frame kind is one type here and one line in decoders; the hub
// sends any frame as its JSON (a frame's fields are its wire data,
// docs/API.md), the cluster forwards any frame as its type and JSON.
package event

import (
	"encoding/json"
	"fmt"

	"herd/models"
)

// Frame types on the wire (docs/API.md).
const (
	TypeDelta        = "ai_delta"
	TypeReasoning    = "ai_reasoning_delta"
	TypeTaskProgress = "task_progress"
	TypeToolProgress = "tool_progress"
	TypeToolLog      = "tool_log"
	TypeRenamed      = "thread.renamed"
	TypeTitleUsage   = "usage.title"
	TypeSettings     = "settings"
)

// Frame is one ephemeral frame: never persisted, sent to a thread's live
// clients (Settings: to every client). The set is closed: only this
// package's types implement it.
type Frame interface {
	// FrameType is the frame's type on the wire.
	FrameType() string
	frame()
}

// Delta is text of an AI message being written, appended to what came
// before it; with Reset, the whole text so far, replacing what came
// before (a run resumed mid-answer says where its answer stands).
type Delta struct {
	MessageID string `json:"message_id"`
	Text      string `json:"text"`
	Reset     bool   `json:"reset,omitempty"`
}

// Reasoning is the model's reasoning for an AI message being written,
// apart from its text.
type Reasoning struct {
	MessageID string `json:"message_id"`
	Text      string `json:"text"`
}

// TaskProgress is a subagent's running tool's progress, for its card's
// status line; it replaces the line before it.
type TaskProgress struct {
	TaskID string `json:"task_id"`
	Text   string `json:"text"`
}

// ToolProgress is the progress of one of the lead's own tool calls,
// shown next to the call; it replaces the progress before it.
type ToolProgress struct {
	CallID string `json:"tool_call_id"`
	Text   string `json:"text"`
}

// ToolLog carries new log lines of a running call: of task TaskID, or
// the lead's own when TaskID is empty. (Fields in the order of their
// keys, as the frame's map had them.)
type ToolLog struct {
	Lines  []LogLine `json:"lines"`
	TaskID string    `json:"task_id"`
	CallID string    `json:"tool_call_id"`
}

// LogLine is one log message of a tool call.
type LogLine struct {
	Level string `json:"level"`
	Text  string `json:"text"`
}

// Renamed is a thread's new title.
type Renamed struct {
	Title string `json:"title"`
}

// TitleUsage is the usage of the call that named a thread; the hub
// frames it as a usage report, under the token gate.
type TitleUsage struct {
	Call models.UsageEntry `json:"call"`
}

// Settings tells every page the token switch (the settings'
// token_usage_enabled); it goes to every client of every thread.
type Settings struct {
	TokenUsage bool `json:"token_usage_enabled"`
}

func (Delta) FrameType() string        { return TypeDelta }
func (Reasoning) FrameType() string    { return TypeReasoning }
func (TaskProgress) FrameType() string { return TypeTaskProgress }
func (ToolProgress) FrameType() string { return TypeToolProgress }
func (ToolLog) FrameType() string      { return TypeToolLog }
func (Renamed) FrameType() string      { return TypeRenamed }
func (TitleUsage) FrameType() string   { return TypeTitleUsage }
func (Settings) FrameType() string     { return TypeSettings }

func (Delta) frame()        {}
func (Reasoning) frame()    {}
func (TaskProgress) frame() {}
func (ToolProgress) frame() {}
func (ToolLog) frame()      {}
func (Renamed) frame()      {}
func (TitleUsage) frame()   {}
func (Settings) frame()     {}

// decoders reads each frame type from its JSON: the closed set.
var decoders = map[string]func([]byte) (Frame, error){
	TypeDelta:        decode[Delta],
	TypeReasoning:    decode[Reasoning],
	TypeTaskProgress: decode[TaskProgress],
	TypeToolProgress: decode[ToolProgress],
	TypeToolLog:      decode[ToolLog],
	TypeRenamed:      decode[Renamed],
	TypeTitleUsage:   decode[TitleUsage],
	TypeSettings:     decode[Settings],
}

// ErrUnknown is Decode's answer for a type outside the set.
var ErrUnknown = fmt.Errorf("event: not a frame type")

// Decode reads a frame of type typ from its JSON, as another instance
// encoded it; a type outside the set is ErrUnknown.
func Decode(typ string, data []byte) (Frame, error) {
	d, ok := decoders[typ]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknown, typ)
	}
	return d(data)
}

func decode[F Frame](data []byte) (Frame, error) {
	var f F
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("event: %s: %w", f.FrameType(), err)
	}
	return f, nil
}
