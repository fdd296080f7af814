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

// Interrupted is the error of everything a restart closed.
const Interrupted = "interrupted: server restarted"

// Recover closes what a crash left open (SPEC §4.7): every subagent still
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
		if err := rt.recoverRun(ctx, st, r); err != nil {
			return 0, fmt.Errorf("agent: recover run %s: %w", r.ID, err)
		}
		rt.log.Warn("closed a run interrupted by a restart", "thread", r.ThreadID, "run", r.ID)
	}
	return len(runs), nil
}

func (rt *Runtime) recoverRun(ctx context.Context, st RecoveryStore, r models.Run) error {
	events, _, err := st.Events(ctx, r.ThreadID, models.EventFilter{RunID: r.ID, Category: CategorySubagent})
	if err != nil {
		return err
	}
	type open struct {
		start   map[string]any
		last    map[string]any
		ended   bool
		version int64
	}
	tasks := map[string]*open{}
	var order []string
	for _, e := range events {
		c, err := DecodeContent(e.Content)
		if err != nil {
			continue
		}
		t := tasks[e.TaskID]
		if t == nil {
			t = &open{}
			tasks[e.TaskID] = t
			order = append(order, e.TaskID)
		}
		if v, ok := wholeNumber(c["version"]); ok && v > t.version {
			t.version = v
		}
		switch e.EventType {
		case EventSubagentQueued, EventSubagentStart:
			t.start = c
		case EventSubagentEnd:
			t.ended = true
		}
		t.last = c
	}

	var recs []models.Record
	closed := map[string]bool{}
	for _, id := range order {
		t := tasks[id]
		if t.ended || t.start == nil {
			continue
		}
		content := map[string]any{
			"task_id": id, "execution_id": t.start["execution_id"], "run_id": r.ID,
			"version": t.version + 1, "status": StatusFailed, "error": Interrupted,
		}
		model, _ := t.start["model_name"].(string)
		if model != "" {
			content["model_name"] = model
		}
		usage := NormalizeUsage(t.last["usage"])
		if usage != nil {
			content["usage"] = usage.asMap()
		}
		ev, err := eventRecord(r.ThreadID, r.ID, id, EventSubagentEnd, content)
		if err != nil {
			return err
		}
		recs = append(recs, ev)
		closed[id] = true
		msg, err := rt.interruptedToolMessage(r, id, ToolTask, Outcome{Status: StatusFailed, Error: Interrupted, ModelName: model, Usage: usage})
		if err != nil {
			return err
		}
		recs = append(recs, msg)
	}

	// Every tool call of the run without a result gets one, so the lead's
	// history stays valid for the next run.
	msgs, err := st.Messages(ctx, r.ThreadID)
	if err != nil {
		return err
	}
	answered := map[string]bool{}
	for _, m := range msgs {
		if m.Type == TypeTool {
			answered[m.ToolCallID] = true
		}
	}
	for _, m := range msgs {
		if m.RunID != r.ID || m.Type != TypeAI || len(m.ToolCalls) == 0 {
			continue
		}
		var calls []ToolCall
		if json.Unmarshal(m.ToolCalls, &calls) != nil {
			continue
		}
		for _, c := range calls {
			if answered[c.ID] || closed[c.ID] {
				continue
			}
			msg, err := rt.interruptedToolMessage(r, c.ID, c.Name, Outcome{Status: StatusFailed, Error: Interrupted})
			if err != nil {
				return err
			}
			recs = append(recs, msg)
		}
	}

	now := rt.now().UTC()
	end, err := eventRecord(r.ThreadID, r.ID, "", EventRunEnd, map[string]any{"run_id": r.ID, "status": models.RunFailed, "error": Interrupted})
	if err != nil {
		return err
	}
	run := r
	run.Status, run.Error, run.EndedAt = models.RunFailed, Interrupted, &now
	recs = append(recs, models.Record{Run: &run}, end)
	return rt.journal.Write(ctx, recs...)
}

// interruptedToolMessage is the result of a tool call a restart cut off:
// a task call gets the status metadata of a failed subagent.
func (rt *Runtime) interruptedToolMessage(r models.Run, callID, name string, o Outcome) (models.Record, error) {
	m := &models.Message{ID: rt.newID(), ThreadID: r.ThreadID, RunID: r.ID, Type: TypeTool, ToolCallID: callID, Name: name}
	if name != ToolTask {
		m.Content = "Error: " + Interrupted
		return models.Record{Message: m}, nil
	}
	content, kwargs, err := o.ToolMessage()
	if err != nil {
		return models.Record{}, err
	}
	m.Content, m.AdditionalKwargs, m.ModelName = content, models.MustJSON(kwargs), o.ModelName
	return models.Record{Message: m}, nil
}
