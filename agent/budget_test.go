package agent

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"herd/agent/tools"
	"herd/models"
)

// TestResumedRunKeepsItsBudget: a run resumed after a restart is given
// its user's budget as the ledger has it then (Options.BudgetOf), which
// holds its calls before the restart: they are counted once, and the run
// stops with stop reason budget when the rest reaches the limit.
func TestResumedRunKeepsItsBudget(t *testing.T) {
	ls := func(id string) Response {
		return reply("", &Usage{InputTokens: 250, OutputTokens: 50, TotalTokens: 300}, ToolCall{ID: id, Name: "ls", Args: json.RawMessage(`{"path":"."}`)})
	}
	first := llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
		if usedTurns(req) == 0 {
			r := ls("c1")
			r.Usage = &Usage{InputTokens: 500, OutputTokens: 100, TotalTokens: 600}
			return r, nil
		}
		<-ctx.Done() // in flight when the process stops
		return Response{}, ctx.Err()
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("gpt", first)}})
	h.start("look")
	h.until("the tool's result", func(recs []models.Record) bool {
		return slices.ContainsFunc(recs, func(r models.Record) bool { return r.Message != nil && r.Message.Type == TypeTool })
	})
	if _, err := h.rt.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	second := llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
		calls.Add(1)
		return ls("c" + string(rune('2'+calls.Load()))), nil // never a final answer
	})
	resets := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	rt, err := New(Options{Models: []*Model{model("gpt", second)}, Subagents: defaultSubagents(), Lead: LeadConfig{MaxTurns: 10},
		WorkspaceRoot: t.TempDir(), Tools: tools.Workspace(), Journal: h.writer, History: h.store, Claims: h.store,
		Resume: ResumeConfig{Enabled: true, MaxResumes: 3},
		BudgetOf: func(_ context.Context, userID string) (Budget, error) {
			// The ledger holds the first call's 600 tokens.
			return Budget{Limit: 1000, Used: 600, ResetsAt: resets}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	runs, err := h.store.RunningRuns(context.Background())
	if err != nil || len(runs) != 1 {
		t.Fatalf("running runs %v, %v", runs, err)
	}
	if resumed, _, err := rt.Continue(context.Background(), h.store, runs, ResumeRestart); err != nil || resumed != 1 {
		t.Fatalf("resumed %d, %v", resumed, err)
	}
	if err := rt.Wait(context.Background(), h.thread); err != nil {
		t.Fatal(err)
	}
	// 600 before the restart, then 300 a call: 900 leaves room for one
	// more call, 1,200 none.
	if n := calls.Load(); n != 2 {
		t.Errorf("%d calls after the restart, want 2", n)
	}
	if end := h.runEndOf(runs[0].ID); end.StopReason != stopBudget || end.Notice != BudgetNotice(resets) {
		t.Errorf("run end %+v, want stopped by the budget", end)
	}
}
