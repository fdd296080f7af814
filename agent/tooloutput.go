package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"herd/agent/event"
	"herd/agent/tools"
)

// ToolOutput is what a tool call shows the user beside its result text:
// the images it returned and its last log lines. The model reads only the
// text. A subagent's tool step carries it as "output"; a ToolMessage of
// the lead's as additional_kwargs.tool_output (docs/API.md).
type ToolOutput struct {
	Images []ToolImage `json:"images,omitempty"`
	Logs   []ToolLog   `json:"logs,omitempty"`
	// LogsDropped counts the earlier log lines not kept (maxToolLogs).
	LogsDropped int `json:"logs_dropped,omitempty"`
}

// ToolImage is one image of a call: kept (ID names its file), or left
// out with the reason (Omitted).
type ToolImage struct {
	ID       string `json:"id,omitempty"`
	MIMEType string `json:"mime_type"`
	Bytes    int    `json:"bytes"`
	Omitted  string `json:"omitted,omitempty"`
}

// ToolLog is one log message of a call.
type ToolLog = event.LogLine

// Bounds of what one call keeps.
const (
	maxToolLogs      = 50  // the last lines of a call's log
	maxToolLogText   = 500 // runes of one line
	maxToolImages    = 8   // images of one call, kept or not
	toolFrameEvery   = 100 * time.Millisecond
	maxToolLogsFrame = 20 // lines of one live frame; the rest wait for the next
)

// callOutput gathers one tool call's output while it runs and shows it
// live, at most one progress and one log frame per toolFrameEvery: a tool
// that reports progress a thousand times a second costs ten frames.
type callOutput struct {
	threadID string
	images   *ToolImages
	log      *slog.Logger
	progress func(text string)     // nil: progress is not shown
	logs     func(lines []ToolLog) // nil: logs are not shown live

	mu      sync.Mutex
	out     ToolOutput
	last    time.Time   // when the latest frames went out
	text    string      // progress not sent yet
	hasText bool        // text is pending
	pending []ToolLog   // log lines not sent yet
	timer   *time.Timer // armed to send what is pending
	fire    sync.WaitGroup
	closed  bool
}

// env is the tool's Env for a call of userID's run runID, with this
// call's progress, log and images.
func (c *callOutput) env(workspace, userID, runID string) tools.Env {
	env := tools.Env{Workspace: workspace, User: userID, Run: runID, Log: c.addLog, Image: c.addImage}
	if c.progress != nil {
		env.Progress = c.addProgress
	}
	return env
}

func (c *callOutput) addProgress(text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.text, c.hasText = text, true
	c.schedule()
}

func (c *callOutput) addLog(level, text string) {
	line := ToolLog{Level: cutRunes(strings.TrimSpace(level), 16), Text: cutRunes(strings.ToValidUTF8(text, "?"), maxToolLogText)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.out.Logs = append(c.out.Logs, line)
	if over := len(c.out.Logs) - maxToolLogs; over > 0 {
		c.out.Logs = append(c.out.Logs[:0:0], c.out.Logs[over:]...)
		c.out.LogsDropped += over
	}
	if c.logs != nil {
		c.pending = append(c.pending, line)
		if over := len(c.pending) - maxToolLogs; over > 0 {
			c.pending = c.pending[over:]
		}
		c.schedule()
	}
}

func (c *callOutput) addImage(mimeType string, data []byte) {
	c.mu.Lock()
	n, closed := len(c.out.Images), c.closed
	c.mu.Unlock()
	if closed {
		return // an abandoned call that went on
	}
	img := ToolImage{MIMEType: cutRunes(mimeType, 100), Bytes: len(data)}
	switch {
	case n >= maxToolImages:
		img.Omitted = "over the limit of images per call"
	case c.images == nil:
		img.Omitted = "this server keeps no tool images"
	default:
		kept, err := c.images.Put(c.threadID, mimeType, data)
		if err != nil {
			c.log.Warn("tool image not kept", "err", err)
			kept.Omitted = imageNote(err)
		}
		img = kept
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.out.Images) < maxToolImages+1 {
		c.out.Images = append(c.out.Images, img)
	}
}

// schedule sends what is pending now, or arms the timer for when the
// interval since the last frames has passed. Called with mu held.
func (c *callOutput) schedule() {
	if c.timer != nil {
		return
	}
	if wait := toolFrameEvery - time.Since(c.last); wait > 0 {
		c.fire.Add(1)
		c.timer = time.AfterFunc(wait, c.tick)
		return
	}
	c.send()
	if len(c.pending) > 0 {
		c.schedule()
	}
}

func (c *callOutput) tick() {
	defer c.fire.Done()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer = nil
	if c.closed {
		return
	}
	c.send()
	if len(c.pending) > 0 {
		c.schedule()
	}
}

// send shows the latest progress and the pending log lines, at most
// maxToolLogsFrame of them; the rest wait for the next frame. Called with
// mu held: publishers never block.
func (c *callOutput) send() {
	c.last = time.Now()
	if c.hasText && c.progress != nil {
		c.progress(c.text)
	}
	c.hasText = false
	n := min(len(c.pending), maxToolLogsFrame)
	if n > 0 && c.logs != nil {
		c.logs(c.pending[:n:n])
	}
	c.pending = c.pending[n:]
}

// finish ends the call's live frames, sending what is still pending (the
// final progress is always shown), and returns what the call showed, nil
// when nothing.
func (c *callOutput) finish() *ToolOutput {
	c.mu.Lock()
	c.closed = true
	if c.timer != nil && c.timer.Stop() {
		c.fire.Done()
	}
	c.timer = nil
	for c.hasText || len(c.pending) > 0 {
		c.send()
	}
	out := c.out
	c.mu.Unlock()
	c.fire.Wait()
	if len(out.Images) == 0 && len(out.Logs) == 0 {
		return nil
	}
	return &out
}

// cutRunes keeps the first n runes of s, marking a cut with an ellipsis.
func cutRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// validate checks an output read back or received: bounded, and every
// kept image named as ToolImages names them.
func (o *ToolOutput) validate() error {
	if len(o.Images) > maxToolImages+1 || len(o.Logs) > maxToolLogs || o.LogsDropped < 0 {
		return errors.New("want a bounded tool output")
	}
	for i, img := range o.Images {
		if img.ID != "" && !toolImageName.MatchString(img.ID) {
			return fmt.Errorf("images: %d: bad id %q", i, img.ID)
		}
		if (img.ID == "") == (img.Omitted == "") {
			return fmt.Errorf("images: %d: want an id or why it was omitted", i)
		}
	}
	return nil
}
