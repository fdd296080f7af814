package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"herd/models"
)

// RecoveryStore is what crash recovery reads; models.Store implements it.
type RecoveryStore interface {
	RunningRuns(ctx context.Context) ([]models.Run, error)
	Messages(ctx context.Context, threadID string) ([]models.Message, error)
	Events(ctx context.Context, threadID string, f models.EventFilter) ([]models.RunEvent, bool, error)
}

// interruptedByRestart is the error of everything a restart closed;
// interruptedInstanceLost of what failover closed for a dead instance.
const (
	interruptedByRestart    = "interrupted: server restarted"
	interruptedInstanceLost = "interrupted: instance lost"
)

// restartNotice is what the thread says of a run a restart closed;
// instanceLostNotice of one failover closed.
const (
	restartNotice      = "The server restarted before this answer was finished."
	instanceLostNotice = "The server running this answer stopped before it was finished."
)

// Recover closes what a crash left open (docs/DESIGN.md §11): every subagent still
// queued or running gets a failed subagent.end and a ToolMessage, every
// tool call without a result gets one, and every running run fails — so a
// reload never shows a card spinning forever. Call it at start, before
// serving. It returns how many runs it closed. (With runs.resume on,
// Continue resumes them instead.)
func (rt *Runtime) Recover(ctx context.Context, st RecoveryStore) (int, error) {
	runs, err := st.RunningRuns(ctx)
	if err != nil {
		return 0, err
	}
	return rt.closeRuns(ctx, st, runs, ResumeRestart, "")
}

// Failover closes runs of a dead instance exactly as Recover closes a
// crash's (docs/DESIGN.md §14), with the error "interrupted: instance
// lost": one terminal per open task, a result for every open tool call,
// the usage the tasks reported kept. The caller has made this instance
// their owner (models.Store.TakeOrphanRuns), so no other instance closes
// them too. It returns how many it closed before any error.
func (rt *Runtime) Failover(ctx context.Context, st RecoveryStore, runs []models.Run) (int, error) {
	return rt.closeRuns(ctx, st, runs, ResumeFailover, "")
}

// closeRuns closes runs as interrupted by cause (ResumeRestart,
// ResumeFailover), saying why when there is more to say; it returns how
// many it closed before any error.
func (rt *Runtime) closeRuns(ctx context.Context, st RecoveryStore, runs []models.Run, cause, why string) (int, error) {
	for i, r := range runs {
		if err := rt.closeRun(ctx, st, r, cause, why); err != nil {
			return i, err
		}
	}
	return len(runs), nil
}

// closeRun closes one run as interrupted by cause, with why if given.
func (rt *Runtime) closeRun(ctx context.Context, st RecoveryStore, r models.Run, cause, why string) error {
	reason, notice := interruptedByRestart, restartNotice
	if cause == ResumeFailover {
		reason, notice = interruptedInstanceLost, instanceLostNotice
	}
	if why != "" {
		reason += " (" + why + ")"
	}
	if err := rt.recoverRun(ctx, st, r, reason, notice); err != nil {
		return fmt.Errorf("agent: close run %s: %w", r.ID, err)
	}
	rt.log.Warn("closed an interrupted run", "cause", cause, "reason", reason, "thread", r.ThreadID, "run", r.ID, "instance", r.InstanceID)
	return nil
}

func (rt *Runtime) recoverRun(ctx context.Context, st RecoveryStore, r models.Run, reason, notice string) error {
	events, _, err := st.Events(ctx, r.ThreadID, models.EventFilter{RunID: r.ID, Category: categorySubagent})
	if err != nil {
		return err
	}
	var recs []models.Record
	closed := map[string]bool{}
	open, _ := taskStates(events)
	for _, t := range open {
		end := TaskEnd{
			TaskRef: TaskRef{TaskID: t.intro.TaskID, ExecutionID: t.intro.ExecutionID, RunID: r.ID, Version: t.version + 1},
			Status:  StatusFailed, Error: reason, ModelName: t.intro.ModelName, Usage: t.usage,
		}
		ev, err := eventRecord(r.ThreadID, end.TaskID, end)
		if err != nil {
			return err
		}
		msg, err := rt.interruptedToolMessage(r, end.TaskID, ToolTask, Outcome{Status: StatusFailed, Error: reason, ModelName: end.ModelName, Usage: end.Usage})
		if err != nil {
			return err
		}
		recs = append(recs, ev, msg)
		closed[end.TaskID] = true
	}

	msgs, err := st.Messages(ctx, r.ThreadID)
	if err != nil {
		return err
	}
	for _, c := range unanswered(msgs, r.ID) {
		if closed[c.ID] {
			continue
		}
		msg, err := rt.interruptedToolMessage(r, c.ID, c.Name, Outcome{Status: StatusFailed, Error: reason})
		if err != nil {
			return err
		}
		recs = append(recs, msg)
	}

	now := rt.now().UTC()
	end, err := eventRecord(r.ThreadID, "", RunEnd{RunID: r.ID, Status: models.RunFailed, Error: reason, Notice: notice})
	if err != nil {
		return err
	}
	run := r
	run.Status, run.Error, run.EndedAt = models.RunFailed, reason, &now
	recs = append(recs, models.Record{Run: &run}, end)
	return rt.journal.Write(ctx, recs...)
}

// unanswered lists the tool calls of run runID that have no result, so
// that recovery gives each one and the lead's history stays valid for the
// next run. Providers reuse tool-call ids across runs (call_0), so a call
// is answered only by a result of its own run.
func unanswered(msgs []models.Message, runID string) []ToolCall {
	answered := map[string]bool{}
	for _, m := range msgs {
		if m.Type == TypeTool {
			answered[callKey(m.RunID, m.ToolCallID)] = true
		}
	}
	var out []ToolCall
	for _, m := range msgs {
		if m.RunID != runID || m.Type != TypeAI || len(m.ToolCalls) == 0 {
			continue
		}
		var calls []ToolCall
		if json.Unmarshal(m.ToolCalls, &calls) != nil {
			continue
		}
		for _, c := range calls {
			if !answered[callKey(runID, c.ID)] {
				out = append(out, c)
			}
		}
	}
	return out
}

// openState is a task of an interrupted run that has not ended: what
// closing it (recoverRun) or resuming it (executor.resume) needs.
type openState struct {
	intro     TaskIntro
	started   bool
	startedAt time.Time // its first start: its timeout runs from there
	version   int64
	steps     int64
	usage     *TokenUsage
	history   []Message // its checkpoint (resume only): prompt, then its messages
}

// taskStates lists, in dispatch order, the tasks among events that queued
// or started and have no end, and counts every task dispatched.
func taskStates(events []models.RunEvent) (open []*openState, dispatched int) {
	byTask := map[string]*openState{}
	ended := map[string]bool{}
	var order []string
	for i := range events {
		ev, err := PayloadOf(&events[i])
		if err != nil {
			continue
		}
		te, ok := ev.(taskEvent)
		if !ok {
			continue
		}
		id := events[i].TaskID
		t := byTask[id]
		if t == nil {
			t = &openState{}
			byTask[id] = t
			order = append(order, id)
		}
		t.version = max(t.version, te.task().Version)
		if u := te.usage(); u != nil {
			t.usage = u
		}
		switch p := ev.(type) {
		case TaskQueued:
			t.intro = p.TaskIntro
		case TaskStarted:
			if !t.started {
				t.startedAt = events[i].CreatedAt
			}
			t.intro, t.started = p.TaskIntro, true
		case TaskStep:
			t.steps = max(t.steps, p.MessageIndex)
		case TaskEnd:
			ended[id] = true
		}
	}
	for _, id := range order {
		if t := byTask[id]; t.intro.TaskID != "" && !ended[id] {
			open = append(open, t)
		}
	}
	return open, len(order)
}

// interruptedToolMessage is the result of a tool call a restart cut off:
// a task call gets the status metadata of a failed subagent.
func (rt *Runtime) interruptedToolMessage(r models.Run, callID, name string, o Outcome) (models.Record, error) {
	m := &models.Message{ID: rt.newID(), ThreadID: r.ThreadID, RunID: r.ID, Type: TypeTool, ToolCallID: callID, Name: name}
	if name != ToolTask {
		m.Content = "Error: " + o.Error
		return models.Record{Message: m}, nil
	}
	content, kwargs, err := o.toolMessage()
	if err != nil {
		return models.Record{}, err
	}
	m.Content, m.AdditionalKwargs, m.ModelName = content, models.MustJSON(kwargs), o.ModelName
	return models.Record{Message: m}, nil
}
