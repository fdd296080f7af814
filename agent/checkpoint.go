package agent

import (
	"encoding/json"

	"herd/models"
)

// checkpointFormat is the version of a checkpoint piece's body
// (models.Checkpoint): a JSON array of Message, appended in order to the
// subagent's conversation after its system prompt. A herd resumes only
// the formats it knows.
const checkpointFormat = 1

// emitKept is emit with msgs, what the event's step adds to the task's
// exact history (its prompt, an AI message whole with its tool calls and
// signed reasoning, a tool result whole), queued in the same Writer job
// so that the step and its piece commit together (docs/DESIGN.md §11).
func (s *runSink) emitKept(taskID string, ev Event, msgs []Message, usage *models.UsageEntry) {
	body, err := json.Marshal(msgs)
	if err != nil {
		s.logger().Error("checkpoint", "type", ev.EventType(), "task", taskID, "err", err)
		return
	}
	with := []models.Record{{Checkpoint: models.NewCheckpoint(s.threadID, s.runID, taskID, checkpointFormat, body)}}
	if usage != nil {
		with = append(with, usageRecord(usage))
	}
	s.emit(taskID, ev, with...)
}
