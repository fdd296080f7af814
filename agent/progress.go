package agent

// ProgressPublisher is the optional side of a Publisher that shows a
// subagent's running tool's progress live on its card ("search: 3 of
// 10"). Progress is never persisted: a step is written per tool call,
// not per tick.
type ProgressPublisher interface {
	Progress(threadID, runID, taskID, text string)
}

// progressSink is the optional side of a taskSink that takes a running
// tool's progress.
type progressSink interface {
	progress(taskID, text string)
}

func (r *run) progress(taskID, text string) {
	if p, ok := r.env.pub.(ProgressPublisher); ok {
		p.Progress(r.threadID, r.id, taskID, text)
	}
}
