package agent

// ProgressPublisher is the optional side of a Publisher that shows a
// subagent's running tool's progress live on its card ("search: 3 of
// 10"). Progress is never persisted: a step is written per tool call,
// not per tick.
type ProgressPublisher interface {
	Progress(threadID, runID, taskID, text string)
}

// outputSink is the optional side of a taskSink that shows a subagent's
// tool calls live and keeps their images.
type outputSink interface {
	callOutput(taskID, callID string) *callOutput
}

// callOutput gathers one tool call's output for the page: live, the
// progress of the lead's own call next to it (ToolPublisher), of a
// subagent's on its card (ProgressPublisher), and every call's log lines;
// kept, its images and last log lines. taskID is empty for the lead's.
func (r *run) callOutput(taskID, callID string) *callOutput {
	c := &callOutput{threadID: r.threadID, images: r.env.images, log: r.logger().With("tool_call", callID)}
	tp, live := r.env.pub.(ToolPublisher)
	if live {
		c.logs = func(lines []ToolLog) { tp.ToolLog(r.threadID, r.id, taskID, callID, lines) }
	}
	switch p, ok := r.env.pub.(ProgressPublisher); {
	case taskID == "" && live:
		c.progress = func(text string) { tp.ToolProgress(r.threadID, r.id, callID, text) }
	case taskID != "" && ok:
		c.progress = func(text string) { p.Progress(r.threadID, r.id, taskID, text) }
	}
	return c
}
