package agent

import "encoding/json"

// The data of each live frame, built from an event's payload by its Frame
// method. Live frames and replays both go through it, so a replay is
// indistinguishable from having been there (docs/DESIGN.md §Events).

// frameUsage is a usage snapshot on a frame: null while none was reported,
// left out entirely when the token gate redacts it.
type frameUsage struct {
	u    *TokenUsage
	hide bool
}

func (f frameUsage) IsZero() bool { return f.hide }

func (f frameUsage) MarshalJSON() ([]byte, error) {
	if f.u == nil {
		return []byte("null"), nil
	}
	return json.Marshal(*f.u)
}

type stepFrame struct {
	Kind      string     `json:"kind"`
	Text      string     `json:"text"`
	Truncated bool       `json:"truncated"`
	ToolCalls []StepCall `json:"tool_calls,omitempty"`
	ToolName  string     `json:"tool_name,omitempty"`
}

type runningFrame struct {
	TaskRef
	MessageIndex int64      `json:"message_index"`
	ModelName    string     `json:"model_name,omitempty"`
	Step         stepFrame  `json:"step"`
	Usage        frameUsage `json:"usage,omitzero"`
}

type endFrame struct {
	TaskRef
	Status          string     `json:"status,omitempty"` // timed-out frames tell which layer
	ModelName       string     `json:"model_name,omitempty"`
	StopReason      string     `json:"stop_reason,omitempty"`
	Usage           frameUsage `json:"usage,omitzero"`
	Result          *string    `json:"result,omitempty"`
	ResultTruncated bool       `json:"result_truncated,omitempty"`
	ResultHTML      string     `json:"result_html,omitempty"`
	Error           *string    `json:"error,omitempty"`
	ErrorTruncated  bool       `json:"error_truncated,omitempty"`
}

// Frame of a queued or started task is its payload as persisted.
func (e TaskQueued) Frame(FrameOptions) (string, any)  { return frameTaskQueued, e }
func (e TaskStarted) Frame(FrameOptions) (string, any) { return frameTaskStarted, e }

// Frame of a run's start is its payload.
func (e RunStart) Frame(FrameOptions) (string, any) { return eventRunStart, e }

// Frame of a run's end is its payload, without the totals when redacted.
func (e RunEnd) Frame(o FrameOptions) (string, any) {
	if o.Redact {
		e.Usage = nil
	}
	return eventRunEnd, e
}

// Frame of a step nests the step's shape under "step".
func (e TaskStep) Frame(o FrameOptions) (string, any) {
	return frameTaskRunning, runningFrame{
		TaskRef: e.TaskRef, MessageIndex: e.MessageIndex, ModelName: e.ModelName,
		Step:  stepFrame{Kind: e.Kind, Text: e.Text, Truncated: e.Truncated, ToolCalls: e.ToolCalls, ToolName: e.ToolName},
		Usage: frameUsage{u: e.Usage, hide: o.Redact},
	}
}

// Frame of a task's end is task_completed with the result, task_timed_out
// with the status and error, or task_failed/task_cancelled with the error.
// Only a capped run (completed or failed) carries a stop reason.
func (e TaskEnd) Frame(o FrameOptions) (string, any) {
	f := endFrame{TaskRef: e.TaskRef, ModelName: e.ModelName, Usage: frameUsage{u: e.Usage, hide: o.Redact}}
	if e.Status == StatusCompleted || e.Status == StatusFailed {
		f.StopReason = e.StopReason
	}
	var typ string
	switch e.Status {
	case StatusCompleted:
		typ = frameTaskCompleted
		f.Result, f.ResultTruncated = &e.Result, e.ResultTruncated
		if e.Result != "" && o.HTML != nil {
			f.ResultHTML = o.HTML(e.Result)
		}
		return typ, f
	case StatusTimedOut, StatusPollingTimedOut:
		typ, f.Status = frameTaskTimedOut, e.Status
	case StatusCancelled:
		typ = frameTaskCancelled
	default:
		typ = frameTaskFailed
	}
	f.Error, f.ErrorTruncated = &e.Error, e.ErrorTruncated
	return typ, f
}

// frameTypeOf returns the live frame type of a persisted event type; a
// subagent.end's frame type depends on its status.
func frameTypeOf(eventType, status string) string {
	switch eventType {
	case eventSubagentQueued:
		return frameTaskQueued
	case eventSubagentStart:
		return frameTaskStarted
	case eventSubagentStep:
		return frameTaskRunning
	case eventSubagentEnd:
		typ, _ := TaskEnd{Status: status}.Frame(FrameOptions{})
		return typ
	}
	return eventType
}
