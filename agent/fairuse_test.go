package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"herd/models"
)

// awaitStat waits (briefly polling the gauge, as a scraper would) until
// cond holds of the runtime's Stats, failing t after 10 s.
func awaitStat(t *testing.T, rt *Runtime, what string, cond func(Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond(rt.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; stats %+v", what, rt.Stats())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// gatedSubagents is a provider whose lead delegates n tasks for a message
// "<user> <n>" and whose subagents report their prompt on started, then
// block until a value arrives on gate (or their context ends).
func gatedSubagents(started chan<- string, gate <-chan struct{}) Provider {
	return llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
		if isLead(req) {
			if usedTurns(req) > 0 {
				return reply("summary", nil), nil
			}
			var user string
			var n int
			fmt.Sscanf(lastHuman(req), "%s %d", &user, &n)
			calls := make([]ToolCall, n)
			for i := range calls {
				calls[i] = taskCall(fmt.Sprintf("%s-%d", user, i), fmt.Sprintf("%s-%d", user, i), SubagentGeneral)
			}
			return reply("delegating", nil, calls...), nil
		}
		started <- strings.TrimPrefix(lastHuman(req), "do ")
		select {
		case <-gate:
			return reply("done", nil), nil
		case <-ctx.Done():
			return Response{}, ctx.Err()
		}
	})
}

// newThread makes a thread of user in h's store.
func (h *harness) newThread(user string) string {
	h.t.Helper()
	th, err := h.store.CreateThread(context.Background(), user, "t")
	if err != nil {
		h.t.Fatal(err)
	}
	return th.ID
}

func (h *harness) startIn(threadID, user, content string) Started {
	h.t.Helper()
	st, err := h.rt.Start(context.Background(), StartRequest{ThreadID: threadID, UserID: user, Content: content, Commands: true})
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

func (h *harness) waitThread(threadID string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.rt.Wait(ctx, threadID); err != nil {
		h.t.Fatalf("run did not end: %v", err)
	}
}

func receive(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return ""
	}
}

// TestFairAdmissionAcrossUsers: alice's 32 subagents fill every slot and
// queue; bob's one subagent, queued behind all of them, starts on the
// very next slot that frees (docs/DESIGN.md §5, admission).
func TestFairAdmissionAcrossUsers(t *testing.T) {
	cfg := defaultSubagents()
	cfg.MaxRunning, cfg.MaxRunningPerUser = 4, 4
	cfg.MaxConcurrentPerResponse, cfg.MaxTotalPerRun = 32, 32
	started, gate := make(chan string, 64), make(chan struct{})
	h := newHarness(t, harnessConfig{subagents: cfg, models: []*Model{model("m", gatedSubagents(started, gate))}})

	alice, bob := h.newThread("alice"), h.newThread("bob")
	h.startIn(alice, "alice", "alice 32")
	for range 4 {
		receive(t, started, "alice's first four subagents")
	}
	awaitStat(t, h.rt, "alice's 28 queued", func(s Stats) bool { return s.Queued == 28 })
	h.startIn(bob, "bob", "bob 1")
	awaitStat(t, h.rt, "bob's subagent queued", func(s Stats) bool { return s.Queued == 29 })

	gate <- struct{}{} // one of alice's finishes
	if got := receive(t, started, "the subagent after one release"); got != "bob-0" {
		t.Fatalf("the first slot released went to %s, want bob-0", got)
	}
	close(gate)
	for range 28 {
		if got := receive(t, started, "alice's queued subagents"); !strings.HasPrefix(got, "alice-") {
			t.Fatalf("started %s, want alice's", got)
		}
	}
	h.waitThread(alice)
	h.waitThread(bob)
	if q := h.rt.Stats().Queued; q != 0 {
		t.Errorf("queued = %d after both runs, want 0", q)
	}
}

// TestPerUserSubagentCap: at the default caps alice's 32 subagents hold at
// most subagents.max_running_per_user slots, so bob's starts at once.
func TestPerUserSubagentCap(t *testing.T) {
	cfg := defaultSubagents()
	cfg.MaxRunning, cfg.MaxRunningPerUser = 32, 8
	cfg.MaxConcurrentPerResponse, cfg.MaxTotalPerRun = 32, 32
	started, gate := make(chan string, 64), make(chan struct{})
	h := newHarness(t, harnessConfig{subagents: cfg, models: []*Model{model("m", gatedSubagents(started, gate))}})

	alice, bob := h.newThread("alice"), h.newThread("bob")
	h.startIn(alice, "alice", "alice 32")
	for range 8 {
		receive(t, started, "alice's subagents")
	}
	awaitStat(t, h.rt, "alice's 24 queued at her cap", func(s Stats) bool { return s.Queued == 24 })
	h.startIn(bob, "bob", "bob 1")
	if got := receive(t, started, "bob's subagent"); got != "bob-0" {
		t.Fatalf("started %s, want bob-0 at once", got)
	}
	if n := h.rt.Stats().ByStatus[StatusRunning]; n != 9 {
		t.Errorf("running = %d, want alice's 8 and bob's 1", n)
	}
	close(gate)
	h.waitThread(alice)
	h.waitThread(bob)
}

// TestStopWhileQueued: a Stop cancels a subagent waiting for a slot; it
// ends cancelled (queued, then end) and leaves the queue.
func TestStopWhileQueued(t *testing.T) {
	cfg := defaultSubagents()
	cfg.MaxRunning = 1
	started, gate := make(chan string, 4), make(chan struct{})
	h := newHarness(t, harnessConfig{subagents: cfg, models: []*Model{model("m", gatedSubagents(started, gate))}})
	st := h.start("u1 2")
	first := receive(t, started, "the first subagent")
	awaitStat(t, h.rt, "the second queued", func(s Stats) bool { return s.Queued == 1 })
	if err := h.rt.Cancel(h.thread, st.RunID); err != nil {
		t.Fatal(err)
	}
	h.wait()
	queued := "u1-0"
	if first == queued {
		queued = "u1-1"
	}
	if md := metadata(t, h.toolMessages()[queued]); md.Status != StatusCancelled {
		t.Errorf("the queued task ended %s, want cancelled", md.Status)
	}
	if evs := eventTypes(h.events(queued)); len(evs) != 2 || evs[0] != eventSubagentQueued || evs[1] != eventSubagentEnd {
		t.Errorf("events of the queued task: %v, want queued then end", evs)
	}
	if q := h.rt.Stats().Queued; q != 0 {
		t.Errorf("queued = %d after the stop, want 0", q)
	}
}

// TestActiveRunsPerUser: a user's fourth concurrent run is refused with
// the limit named; another user is not affected; an ended run frees its
// place.
func TestActiveRunsPerUser(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, harnessConfig{models: []*Model{model("m", llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
		if lastHuman(req) == "quick" {
			return reply("done", nil), nil
		}
		select {
		case <-release:
			return reply("done", nil), nil
		case <-ctx.Done():
			return Response{}, ctx.Err()
		}
	}))}})
	var threads []string
	for range 3 {
		th := h.newThread("alice")
		h.startIn(th, "alice", "hi")
		threads = append(threads, th)
	}
	fourth := h.newThread("alice")
	_, err := h.rt.Start(context.Background(), StartRequest{ThreadID: fourth, UserID: "alice", Content: "hi"})
	var limit *RunLimitError
	if !errors.As(err, &limit) || limit.Limit != 3 || !strings.Contains(err.Error(), "lead.max_active_runs_per_user") {
		t.Fatalf("fourth run: %v, want a RunLimitError of 3 naming lead.max_active_runs_per_user", err)
	}
	if _, ok := h.rt.ActiveRun(fourth); ok {
		t.Error("the refused run is active")
	}
	bob := h.newThread("bob")
	h.startIn(bob, "bob", "quick")
	h.waitThread(bob)

	release <- struct{}{} // one of alice's runs ends
	ended := make(chan string, 3)
	for _, th := range threads {
		go func() {
			_ = h.rt.Wait(context.Background(), th)
			ended <- th
		}()
	}
	<-ended
	h.startIn(fourth, "alice", "quick")
	close(release)
	for range 2 {
		<-ended
	}
	h.waitThread(fourth)
	if n := h.rt.ActiveRuns(); n != 0 {
		t.Errorf("%d runs active at the end", n)
	}
	for _, th := range threads {
		if rs := h.runsOf(th); len(rs) != 1 || rs[0].Status != models.RunCompleted {
			t.Errorf("thread %s runs %+v", th, rs)
		}
	}
}

func (h *harness) runsOf(threadID string) []models.Run {
	h.t.Helper()
	var out []models.Run
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.frames {
		if r.Run != nil && r.Run.ThreadID == threadID && r.Run.EndedAt != nil {
			out = append(out, *r.Run)
		}
	}
	return out
}
