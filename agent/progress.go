package agent

import "herd/agent/event"

// callOutput gathers one tool call's output for the page: live, the
// progress of the lead's own call next to it (event.ToolProgress), of a
// subagent's on its card (event.TaskProgress), and every call's log lines;
// kept, its images and last log lines. taskID is empty for the lead's.
func (r *run) callOutput(taskID, callID string) *callOutput {
	c := &callOutput{threadID: r.threadID, images: r.env.images, log: r.logger().With("tool_call", callID)}
	pub := r.env.pub
	c.logs = func(lines []ToolLog) {
		pub.Publish(r.threadID, r.id, event.ToolLog{Lines: lines, TaskID: taskID, CallID: callID})
	}
	if taskID == "" {
		c.progress = func(text string) { pub.Publish(r.threadID, r.id, event.ToolProgress{CallID: callID, Text: text}) }
	} else {
		c.progress = func(text string) { pub.Publish(r.threadID, r.id, event.TaskProgress{TaskID: taskID, Text: text}) }
	}
	return c
}
