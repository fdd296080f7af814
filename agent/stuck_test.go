package agent

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"herd/agent/tools"
	"herd/models"
)

// stuckTool blocks every call until unblock is closed, ignoring its
// context, as a read of a FIFO would; entered receives one value per call.
type stuckTool struct {
	entered chan struct{}
	unblock chan struct{}
	// release lets every call go; it is safe to call more than once.
	release func()
}

func newStuckTool() *stuckTool {
	s := &stuckTool{entered: make(chan struct{}, 8), unblock: make(chan struct{})}
	s.release = sync.OnceFunc(func() { close(s.unblock) })
	return s
}

func (s *stuckTool) Spec() tools.Spec {
	return tools.Schema{}.Spec("stuck", "Blocks until the test lets it go.")
}

func (s *stuckTool) Run(context.Context, tools.Env, json.RawMessage) (string, error) {
	s.entered <- struct{}{}
	<-s.unblock
	return "late result", nil
}

// callsStuck is a lead (or subagent) that calls the stuck tool once, then
// answers.
func callsStuck(ctx context.Context, req Request) (Response, error) {
	if usedTurns(req) == 0 {
		return reply("", nil, ToolCall{ID: "s1", Name: "stuck", Args: []byte(`{}`)}), nil
	}
	return reply("finished", nil), nil
}

// stopWithin stops the run and fails t unless it has ended — run.end
// written, the thread free — within the cancel grace and a second of
// slack.
func stopWithin(t *testing.T, h *harness, runID string, grace time.Duration) {
	t.Helper()
	stopped := time.Now()
	if err := h.rt.Cancel(h.thread, runID); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace+time.Second)
	defer cancel()
	if err := h.rt.Wait(ctx, h.thread); err != nil {
		t.Fatalf("the run had not ended %v after the stop (cancel grace %v)", time.Since(stopped), grace)
	}
	if r := h.runRow(runID); r == nil || r.Status != models.RunCancelled {
		t.Fatalf("run row %+v, want cancelled", r)
	}
}

// TestStopEndsRunWithStuckTool: a lead's tool that ignores its context
// cannot hold the run: a Stop ends it within subagents.cancel_grace_seconds,
// the thread takes a new run, the stuck call is counted until the tool
// returns and Shutdown waits for it (the harness's goleak check).
func TestStopEndsRunWithStuckTool(t *testing.T) {
	stuck := newStuckTool()
	h := newHarness(t, harnessConfig{tools: append(tools.Workspace(), stuck), models: []*Model{model("m", split(callsStuck, nil))}})
	t.Cleanup(stuck.release) // before the harness's: Shutdown waits for the tool
	st := h.start("go")
	<-stuck.entered
	stopWithin(t, h, st.RunID, 2*time.Second)

	var tm *models.Message
	for _, m := range h.messages() {
		if m.Type == TypeTool && m.ToolCallID == "s1" {
			tm = &m
		}
	}
	if tm == nil || !strings.Contains(tm.Content, "did not stop within 2 s") {
		t.Errorf("the stuck call's ToolMessage = %+v, want the abandonment explained", tm)
	}
	if n := h.rt.Stats().Abandoned; n != 1 {
		t.Errorf("Abandoned = %d, want 1 while the tool blocks", n)
	}
	next := h.start("again")
	<-stuck.entered
	stopWithin(t, h, next.RunID, 2*time.Second)

	stuck.release()
	awaitStat(t, h.rt, "the abandoned calls to return", func(s Stats) bool { return s.Abandoned == 0 })
}

// TestStopEndsRunWithStuckSubagentTool: a subagent's stuck tool neither
// holds the run nor its running slot: with max_running 1 the next run's
// subagent starts after the Stop.
func TestStopEndsRunWithStuckSubagentTool(t *testing.T) {
	stuck := newStuckTool()
	cfg := defaultSubagents()
	cfg.MaxRunning = 1
	h := newHarness(t, harnessConfig{subagents: cfg, tools: append(tools.Workspace(), stuck), models: []*Model{model("m", split(
		leadThen(taskCall("t1", "stuck work", SubagentGeneral)),
		callsStuck,
	))}})
	t.Cleanup(stuck.release)
	st := h.start("go")
	<-stuck.entered
	stopWithin(t, h, st.RunID, 2*time.Second)
	if md := metadata(t, h.toolMessages()["t1"]); md.Status != StatusCancelled {
		t.Errorf("the subagent ended %s, want cancelled", md.Status)
	}
	// The slot is free again: the next run's subagent starts.
	next := h.start("go")
	<-stuck.entered
	stopWithin(t, h, next.RunID, 2*time.Second)
	if n := h.rt.Stats().Abandoned; n != 2 {
		t.Errorf("Abandoned = %d, want 2", n)
	}
}

func (h *harness) messages() []models.Message {
	h.t.Helper()
	msgs, err := h.store.Messages(context.Background(), h.thread)
	if err != nil {
		h.t.Fatal(err)
	}
	return msgs
}

// TestStopEndsRunWithStuckModel: a provider that ignores the Stop is
// abandoned after the cancel grace like a stuck tool; what it streamed
// is kept.
func TestStopEndsRunWithStuckModel(t *testing.T) {
	entered, unblock := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(unblock) })
	h := newHarness(t, harnessConfig{models: []*Model{model("m", llmFunc(func(_ context.Context, _ Request, d func(string)) (Response, error) {
		d("Partial answer")
		close(entered)
		<-unblock
		d(" streamed after the stop")
		return reply("late", nil), nil
	}))}})
	t.Cleanup(release)
	st := h.start("go")
	<-entered
	stopWithin(t, h, st.RunID, 2*time.Second)
	msgs := h.messages()
	if last := msgs[len(msgs)-1]; last.Type != TypeAI || last.Content != "Partial answer" {
		t.Errorf("last message %+v, want the partial answer kept", last)
	}
	release()
	awaitStat(t, h.rt, "the abandoned model call to return", func(s Stats) bool { return s.Abandoned == 0 })
}

// TestStopFreesSlotOfStuckSubagentModel: a subagent whose provider
// ignores the Stop neither holds the run nor its running slot.
func TestStopFreesSlotOfStuckSubagentModel(t *testing.T) {
	entered, unblock := make(chan struct{}, 4), make(chan struct{})
	release := sync.OnceFunc(func() { close(unblock) })
	cfg := defaultSubagents()
	cfg.MaxRunning = 1
	h := newHarness(t, harnessConfig{subagents: cfg, models: []*Model{model("m", split(
		leadThen(taskCall("t1", "stuck model", SubagentGeneral)),
		func(context.Context, Request) (Response, error) {
			entered <- struct{}{}
			<-unblock
			return reply("late", nil), nil
		},
	))}})
	t.Cleanup(release)
	st := h.start("go")
	<-entered
	stopWithin(t, h, st.RunID, 2*time.Second)
	next := h.start("go")
	<-entered // the slot was handed on
	stopWithin(t, h, next.RunID, 2*time.Second)
	if n := h.rt.Stats().Abandoned; n != 2 {
		t.Errorf("Abandoned = %d, want 2", n)
	}
}

// TestProviderPanicIsContained: a provider that panics fails its call,
// the lead's or a subagent's, not the process.
func TestProviderPanicIsContained(t *testing.T) {
	h := newHarness(t, harnessConfig{models: []*Model{model("m", split(
		leadThen(taskCall("t1", "panics", SubagentGeneral)),
		func(context.Context, Request) (Response, error) { panic("kaboom") },
	))}})
	h.run("go")
	if md := metadata(t, h.toolMessages()["t1"]); md.Status != StatusFailed || !strings.Contains(md.Error, "failed internally") {
		t.Errorf("subagent %+v, want failed internally", md)
	}
	h2 := newHarness(t, harnessConfig{models: []*Model{model("m", llmFunc(func(context.Context, Request, func(string)) (Response, error) { panic("kaboom") }))}})
	st := h2.run("go")
	if r := h2.runRow(st.RunID); r.Status != models.RunFailed || !strings.Contains(r.Error, "failed internally") {
		t.Errorf("run %+v, want failed internally", r)
	}
}
