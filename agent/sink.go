package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"herd/agent/event"
	"herd/agent/tools"
	"herd/models"
)

// runSink is where a run and its task executions write: events, a task's
// end with its ToolMessage, ledger rows, a tool call's live output. It is
// given what that needs (the run's ids, the journal, the publisher, the
// image store), not the run, so an execution (taskSink) reaches no
// further than this file, and no loop of files runs from the executor
// back to the lead (runEnv.newSink builds it).
type runSink struct {
	threadID, runID string
	userID          string // the thread's owner, whom the run's ledger rows bill
	journal         Journal
	shared          func() context.Context // runEnv.persistShared
	newID           func() string
	pub             Publisher
	images          *ToolImages
	baseLog         *slog.Logger
	log             atomic.Pointer[slog.Logger] // logger(), built once
	// watch sees what the run's tool calls change in its workspace.
	watch *workspaceWatch

	mu    sync.Mutex
	usage map[string]*models.UsageEntry // every LLM call of the run, by call id; never changed
	// base is the run's calls before a restart, from the ledger (a
	// resumed run, agent/resume.go).
	base models.UsageReport
}

// Journal persists what runs produce, in order; models.Writer implements
// it. Write returns once the records are committed (and broadcast);
// Enqueue returns once they are queued.
type Journal interface {
	Write(ctx context.Context, recs ...models.Record) error
	Enqueue(ctx context.Context, recs ...models.Record) error
}

// Publisher streams what is not persisted: the text of the AI message
// being written and apart from it the model's reasoning, tool calls'
// progress and log lines, each one frame of event's closed set. The
// server's hub implements it (through the cluster when there is one); it
// must not block.
type Publisher interface {
	Publish(threadID, runID string, f event.Frame)
}

// logger is the run's logger; every task call asks for it (run.scope).
func (s *runSink) logger() *slog.Logger {
	if l := s.log.Load(); l != nil {
		return l
	}
	l := s.baseLog.With("thread", s.threadID, "run", s.runID)
	s.log.Store(l)
	return l
}

// emit validates and queues one event of task taskID for the writer
// (taskSink), even after the run was stopped; with records that go in
// its commit (a checkpoint piece, emitKept).
func (s *runSink) emit(taskID string, ev Event, with ...models.Record) {
	recs := s.records(taskID, ev, with...)
	if recs == nil {
		return
	}
	if err := s.journal.Enqueue(s.shared(), recs...); err != nil {
		s.logger().Error("persist event", "type", ev.EventType(), "task", taskID, "err", err)
	}
}

// records is one event of task taskID with the records of its commit,
// validated; nil, logged, when the contract refuses it.
func (s *runSink) records(taskID string, ev Event, with ...models.Record) []models.Record {
	rec, err := eventRecord(s.threadID, taskID, ev)
	if err != nil {
		s.logger().Error("event rejected at the producer", "type", ev.EventType(), "task", taskID, "err", err)
		return nil
	}
	return append([]models.Record{rec}, with...)
}

// persist writes one message of the run, even after the run was stopped,
// with what goes in its commit: the ledger row of the call that made it
// (keepUsage), a checkpoint piece (leadPiece).
func (s *runSink) persist(m *models.Message, with ...models.Record) error {
	m.ThreadID, m.RunID = s.threadID, s.runID
	return s.journal.Write(s.shared(), append([]models.Record{{Message: m}}, with...)...)
}

// deliver persists a task's end and its ToolMessage in one commit
// (taskSink): the end is what a card shows, the message what the lead and
// a reload read, and one commit instead of two halves the writer's work
// on the task tool's hand-off (docs/PERFORMANCE.md).
func (s *runSink) deliver(end TaskEnd, o Outcome, before ...models.Record) {
	content, kwargs := s.taskOutcome(end.TaskID, o)
	recs := make([]models.Record, 0, len(before)+2)
	recs = append(recs, before...)
	if ev, err := eventRecord(s.threadID, end.TaskID, end); err != nil {
		s.logger().Error("event rejected at the producer", "type", end.EventType(), "task", end.TaskID, "err", err)
	} else {
		recs = append(recs, ev)
	}
	recs = append(recs, models.Record{Message: s.taskMessage(end.TaskID, content, kwargs, o)})
	err := s.journal.Write(s.shared(), recs...)
	switch {
	case errors.Is(err, models.ErrPending):
		// Kept: the writer commits it when the database takes it, and
		// logs the fault (and any record it finally loses) itself.
		s.logger().Debug("task end still queued; it commits when the database takes it", "task", end.TaskID, "err", err)
	case err != nil:
		s.logger().Error("persist task end: the task's end and its ToolMessage were not kept", "task", end.TaskID, "err", err)
	}
}

// taskOutcome is a task's ToolMessage content and metadata; an outcome
// outside the status contract is a bug, and reads as an internal failure
// rather than a lost result.
func (s *runSink) taskOutcome(taskID string, o Outcome) (string, taskKwargs) {
	content, kwargs, err := o.toolMessage()
	if err != nil {
		s.logger().Error("task outcome outside the contract", "task", taskID, "err", err)
		content, kwargs, _ = internalFailure(err).toolMessage()
	}
	return content, kwargs
}

// taskContent is taskOutcome's content alone, for the lead once the
// metadata is persisted.
func (s *runSink) taskContent(taskID string, o Outcome) string {
	content, err := o.toolContent()
	if err != nil {
		s.logger().Error("task outcome outside the contract", "task", taskID, "err", err)
		content, _ = internalFailure(err).toolContent()
	}
	return content
}

// internalFailure is the outcome that stands for one outside the contract.
func internalFailure(err error) Outcome {
	return Outcome{Status: StatusFailed, Error: "internal error: " + err.Error()}
}

func (s *runSink) taskMessage(taskID, content string, kwargs taskKwargs, o Outcome) *models.Message {
	return &models.Message{
		ID: s.newID(), ThreadID: s.threadID, RunID: s.runID, Type: TypeTool, Content: content,
		ToolCallID: taskID, Name: ToolTask, AdditionalKwargs: models.MustJSON(kwargs), ModelName: o.ModelName,
	}
}

// keepUsage keeps an LLM call for the run's totals and returns its
// ledger row (once, by call id), usage reported or not (taskSink; the
// lead's own calls have no task); model is the herd model that made it.
// The caller writes the row in the commit of what the call produced (the
// lead's answer, a step and its checkpoint), so that a kill leaves both or
// neither: a resume makes again a call whose answer is not kept, and
// counts it lost, never twice (docs/DESIGN.md §11).
func (s *runSink) keepUsage(taskID, model string, resp Response) *models.UsageEntry {
	e := ledgerEntry(s.owner(), s.runID, taskID, model, resp)
	s.mu.Lock()
	s.usage[e.CallID] = e
	s.mu.Unlock()
	return e
}

// owner is whom the run's ledger rows bill, under which thread.
func (s *runSink) owner() owner { return owner{s.threadID, s.userID} }

// usageRecord is e's ledger record: the writer stamps its own copy, and
// callers keep reading e.
func usageRecord(e *models.UsageEntry) models.Record {
	row := *e
	return models.Record{Usage: &row}
}

// writeUsage writes e to the ledger on its own: a call whose step is not
// written (its task ended meanwhile) or whose answer could not be.
func (s *runSink) writeUsage(e *models.UsageEntry) {
	if err := s.journal.Enqueue(s.shared(), usageRecord(e)); err != nil {
		s.logger().Error("record usage", "call", e.CallID, "err", err)
	}
}

// recordLost records a model call a restart cut off (lostCall): in the
// ledger once, and in the run's totals.
func (s *runSink) recordLost(e *models.UsageEntry) {
	s.mu.Lock()
	s.usage[e.CallID] = e
	s.mu.Unlock()
	s.writeUsage(e)
}

// totals aggregates the run's calls as the ledger would.
func (s *runSink) totals() models.UsageReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	rep := models.UsageReport{ByModel: map[string]models.UsageTotals{}}
	rep.Merge(s.base)
	for _, e := range s.usage {
		e.Count(&rep)
	}
	return rep
}

// callOutput gathers one tool call's output for the page: live, the
// progress of the lead's own call next to it (event.ToolProgress), of a
// subagent's on its card (event.TaskProgress), and every call's log lines;
// kept, its images and last log lines. taskID is empty for the lead's.
func (s *runSink) callOutput(taskID, callID string) *callOutput {
	c := &callOutput{threadID: s.threadID, images: s.images, log: s.logger().With("tool_call", callID)}
	pub, threadID, runID := s.pub, s.threadID, s.runID
	c.logs = func(lines []ToolLog) {
		pub.Publish(threadID, runID, event.ToolLog{Lines: lines, TaskID: taskID, CallID: callID})
	}
	if taskID == "" {
		c.progress = func(text string) { pub.Publish(threadID, runID, event.ToolProgress{CallID: callID, Text: text}) }
	} else {
		c.progress = func(text string) { pub.Publish(threadID, runID, event.TaskProgress{TaskID: taskID, Text: text}) }
	}
	return c
}

// watchCall watches one tool call of task taskID ("" for the lead's) in
// workspace dir (taskSink); what it changed is committed as one
// workspace.changed event, queued before the call's step or result, so a
// card's files and the Files panel follow the thread log (agent/changes.go).
func (s *runSink) watchCall(ctx context.Context, taskID, dir string, t tools.Tool, args json.RawMessage) func() {
	if dir == "" {
		return func() {}
	}
	end := s.watch.begin(ctx, dir, t, args)
	return func() {
		cs := end()
		if len(cs) == 0 {
			return
		}
		for i := range cs {
			cs[i].TaskID = taskID
		}
		s.emit(taskID, WorkspaceChanged{RunID: s.runID, Changes: cs})
	}
}
