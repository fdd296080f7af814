package agent

import (
	"encoding/json"
	"slices"

	"herd/models"
)

// checkpointFormat is the version of a checkpoint piece's body
// (models.Checkpoint): a JSON array of Message, appended in order to the
// subagent's conversation after its system prompt. Format 2 adds the
// lead's streamed pieces (typeStreamed). A herd resumes only the formats
// it knows (knownFormat).
const checkpointFormat = 2

func knownFormat(f int64) bool { return f == 1 || f == 2 }

// typeStreamed is the type of a lead's piece that keeps a batch of an
// answer being streamed: its message's id, the text and the reasoning
// (streamedPiece). A run resumed before that message was saved continues
// the answer from them (run.converse).
const typeStreamed = "ai_streamed"

// streamedPiece is a piece's element as read back: a Message, or with
// typeStreamed a batch of a streamed answer.
type streamedPiece struct {
	Message
	ID        string `json:"id,omitempty"`
	Reasoning string `json:"reasoning,omitempty"`
}

// keepStreamed commits a batch of the lead's answer msgID as it streams
// (answerStream), before it is shown.
func (s *runSink) keepStreamed(msgID, text, reasoning string) error {
	rec, err := s.piece("", []streamedPiece{{Message: Message{Type: typeStreamed, Content: text}, ID: msgID, Reasoning: reasoning}})
	if err != nil {
		return err
	}
	return s.journal.Write(s.shared(), rec)
}

// piece is a checkpoint piece of task taskID ("" for the lead) of this
// run: elems, encoded in checkpointFormat.
func (s *runSink) piece(taskID string, elems any) (models.Record, error) {
	body, err := json.Marshal(elems)
	if err != nil {
		return models.Record{}, err
	}
	return models.Record{Checkpoint: models.NewCheckpoint(s.threadID, s.runID, taskID, checkpointFormat, body)}, nil
}

// openAnswer is the lead's answer a restart cut off while it streamed:
// what its pieces kept, which the page showed.
type openAnswer struct{ id, text, reasoning string }

// cutAnswer is the last answer of pieces, the lead's, that was streamed
// and never saved (no message in saved has its id), if any.
func cutAnswer(pieces []streamedPiece, saved func(id string) bool) *openAnswer {
	var a *openAnswer
	for _, p := range pieces {
		if p.Type != typeStreamed {
			continue
		}
		if a == nil || a.id != p.ID {
			a = &openAnswer{id: p.ID}
		}
		a.text += p.Content
		a.reasoning += p.Reasoning
	}
	if a == nil || saved(a.id) {
		return nil
	}
	return a
}

// emitKept is emit with msgs, what the event's step adds to the task's
// exact history (its prompt, an AI message whole with its tool calls and
// signed reasoning, a tool result whole), queued in the same Writer job
// so that the step and its piece commit together (docs/DESIGN.md §11).
func (s *runSink) emitKept(taskID string, ev Event, msgs []Message, usage *models.UsageEntry) {
	rec, err := s.piece(taskID, msgs)
	if err != nil {
		s.logger().Error("checkpoint", "type", ev.EventType(), "task", taskID, "err", err)
		return
	}
	with := []models.Record{rec}
	if usage != nil {
		with = append(with, usageRecord(usage))
	}
	s.emit(taskID, ev, with...)
}

// answerRecords is what commits with a lead's AI message: the ledger row
// of the call that made it and, for a turn of tool use whose reasoning the
// provider signed, the checkpoint piece that keeps that reasoning (the
// thread's messages never hold it, docs/DESIGN.md §3): a run resumed in
// that turn sends it back as it came (keepThinking).
func (s *runSink) answerRecords(used *models.UsageEntry, ai Message) []models.Record {
	recs := []models.Record{usageRecord(used)}
	if len(ai.Thinking) == 0 || len(ai.ToolCalls) == 0 {
		return recs
	}
	rec, err := s.piece("", []Message{ai})
	if err != nil {
		s.logger().Error("checkpoint", "err", err)
		return recs
	}
	return append(recs, rec)
}

// keepThinking gives the last AI message of msgs the signed reasoning of
// kept, the lead's last AI message as its checkpoint kept it, when they
// are the same message (the same tool calls).
func keepThinking(msgs []Message, kept Message) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Type != TypeAI {
			continue
		}
		if slices.EqualFunc(msgs[i].ToolCalls, kept.ToolCalls, func(a, b ToolCall) bool { return a.ID == b.ID && a.Name == b.Name }) {
			msgs[i].Thinking = kept.Thinking
		}
		return
	}
}
