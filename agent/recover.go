package agent

import (
	"context"
	"encoding/json"
	"fmt"

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
// serving. It returns how many runs it closed.
func (rt *Runtime) Recover(ctx context.Context, st RecoveryStore) (int, error) {
	runs, err := st.RunningRuns(ctx)
	if err != nil {
		return 0, err
	}
	for _, r := range runs {
		if err := rt.recoverRun(ctx, st, r, interruptedByRestart, restartNotice); err != nil {
			return 0, fmt.Errorf("agent: recover run %s: %w", r.ID, err)
		}
		rt.log.Warn("closed a run interrupted by a restart", "thread", r.ThreadID, "run", r.ID)
	}
	return len(runs), nil
}

// Failover closes runs of a dead instance exactly as Recover closes a
// crash's (docs/DESIGN.md §14), with the error "interrupted: instance
// lost": one terminal per open task, a result for every open tool call,
// the usage the tasks reported kept. The caller has made this instance
// their owner (models.Store.TakeOrphanRuns), so no other instance closes
// them too. It returns how many it closed before any error.
func (rt *Runtime) Failover(ctx context.Context, st RecoveryStore, runs []models.Run) (int, error) {
	for i, r := range runs {
		if err := rt.recoverRun(ctx, st, r, interruptedInstanceLost, instanceLostNotice); err != nil {
			return i, fmt.Errorf("agent: fail over run %s: %w", r.ID, err)
		}
		rt.log.Warn("closed a run of a lost instance", "thread", r.ThreadID, "run", r.ID, "instance", r.InstanceID)
	}
	return len(runs), nil
}

func (rt *Runtime) recoverRun(ctx context.Context, st RecoveryStore, r models.Run, reason, notice string) error {
	events, _, err := st.Events(ctx, r.ThreadID, models.EventFilter{RunID: r.ID, Category: categorySubagent})
	if err != nil {
		return err
	}
	var recs []models.Record
	closed := map[string]bool{}
	for _, t := range openTasks(events) {
		end := TaskEnd{
			TaskRef: TaskRef{TaskID: t.start.TaskID, ExecutionID: t.start.ExecutionID, RunID: r.ID, Version: t.version + 1},
			Status:  StatusFailed, Error: reason, ModelName: t.start.ModelName, Usage: t.usage,
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

// openTask is a task of an interrupted run that never ended.
type openTask struct {
	start   TaskIntro
	version int64
	usage   *TokenUsage
}

// openTasks lists, in dispatch order, the tasks among events that started
// (or queued) and have no end, with their last version and usage.
func openTasks(events []models.RunEvent) []openTask {
	type state struct {
		openTask
		started, ended bool
	}
	byTask := map[string]*state{}
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
			t = &state{}
			byTask[id] = t
			order = append(order, id)
		}
		t.version = max(t.version, te.task().Version)
		t.usage = te.usage()
		switch p := ev.(type) {
		case TaskQueued:
			t.start, t.started = p.TaskIntro, true
		case TaskStarted:
			t.start, t.started = p.TaskIntro, true
		case TaskEnd:
			t.ended = true
		}
	}
	var out []openTask
	for _, id := range order {
		if t := byTask[id]; t.started && !t.ended {
			out = append(out, t.openTask)
		}
	}
	return out
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
