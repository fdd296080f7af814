package agent

import "encoding/json"

// The data of each live frame, built from an event's payload by its Frame
// method. Live frames and replays both go through it, so a replay is
// indistinguishable from having been there (docs/DESIGN.md §7).

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

type runningFrame struct {
	TaskRef
	MessageIndex int64      `json:"message_index"`
	ModelName    string     `json:"model_name,omitempty"`
	Step         stepFrame  `json:"step"`
	Usage        frameUsage `json:"usage,omitzero"`
}

// stepFrame is a step with an AI step's text rendered, so the card shows
// it as Markdown; a tool's output stays text.
type stepFrame struct {
	StepBody
	TextHTML string `json:"text_html,omitempty"`
}

// endFrame is a TaskEnd with every field it has, except those whose
// presence depends on the status: its own fields of the same JSON names are
// shallower, so they hide the payload's (encoding/json's dominance rule),
// and a field added to TaskEnd reaches the frame by itself.
type endFrame struct {
	TaskEnd
	Status          string     `json:"status,omitempty"` // timed-out frames tell which layer
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

// Frame of a task's wait for its model is its payload.
func (e TaskWait) Frame(FrameOptions) (string, any) { return frameTaskWaiting, e }

// Frame of the lead's wait for its model is its payload.
func (e RunWait) Frame(FrameOptions) (string, any) { return eventRunWait, e }

// Frame of a run's resumption is its payload.
func (e RunResumed) Frame(FrameOptions) (string, any) { return eventRunResumed, e }

// Frame of a run's start is its payload.
func (e RunStart) Frame(FrameOptions) (string, any) { return eventRunStart, e }

// Frame of a run's end is its payload, without the totals when redacted.
func (e RunEnd) Frame(o FrameOptions) (string, any) {
	if o.Redact {
		e.Usage = nil
	}
	return eventRunEnd, e
}

// Frame of a step nests the step's body under "step", an AI step's text
// also rendered as text_html.
func (e TaskStep) Frame(o FrameOptions) (string, any) {
	step := stepFrame{StepBody: e.StepBody}
	if e.Kind == stepAI && e.Text != "" && o.HTML != nil {
		step.TextHTML = o.HTML(e.Text)
	}
	return frameTaskRunning, runningFrame{
		TaskRef: e.TaskRef, MessageIndex: e.MessageIndex, ModelName: e.ModelName,
		Step: step, Usage: frameUsage{u: e.Usage, hide: o.Redact},
	}
}

// StepTextHTML is what a stored event's content adds to a client's copy
// (the events API), as its frame does: an AI step's text rendered by html;
// "" for any other step or event.
func StepTextHTML(eventType string, content map[string]any, html func(string) string) string {
	text, _ := content["text"].(string)
	if eventType != eventSubagentStep || content["kind"] != stepAI || text == "" {
		return ""
	}
	return html(text)
}

// Frame of a task's end is task_completed with the result, task_timed_out
// with the status and error, or task_failed/task_cancelled with the error.
// Only a capped run (completed or failed) carries a stop reason.
func (e TaskEnd) Frame(o FrameOptions) (string, any) {
	f := endFrame{TaskEnd: e, Usage: frameUsage{u: e.Usage, hide: o.Redact}}
	if e.Status == StatusCompleted || e.Status == StatusFailed {
		f.StopReason = e.StopReason
	}
	var typ string
	switch e.Status {
	case StatusCompleted:
		f.Result, f.ResultTruncated = &e.Result, e.ResultTruncated
		if e.Result != "" && o.HTML != nil {
			f.ResultHTML = o.HTML(e.Result)
		}
		return frameTaskCompleted, f
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
