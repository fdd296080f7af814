package agent

import (
	"context"
	"testing"
)

// TestAdmissionResize: a slot added goes at once to whoever waits; one
// taken away is taken back as running subagents end, none started over
// the new number.
func TestAdmissionResize(t *testing.T) {
	a := newAdmission(1, 1)
	if _, ok := a.tryAcquire("ann"); !ok {
		t.Fatal("the first slot was not free")
	}
	w, ok := a.tryAcquire("bob")
	if ok {
		t.Fatal("a second subagent got the only slot")
	}
	a.resize(2, 2)
	select {
	case <-w.ready:
	default:
		t.Fatal("a slot added was not granted to the one waiting")
	}
	a.resize(1, 1)
	w2, ok := a.tryAcquire("cid")
	if ok {
		t.Fatal("a slot was granted over the lowered max")
	}
	a.release("ann")
	select {
	case <-w2.ready:
		t.Fatal("a slot was granted while two ran for a max of 1")
	default:
	}
	a.release("bob")
	if err := a.wait(context.Background(), "cid", w2); err != nil {
		t.Fatal(err)
	}
}

// TestSetLimits: limits below 1 are refused and change nothing; a run
// keeps the max_turns it started with, the next run takes the new one.
func TestSetLimits(t *testing.T) {
	p := llmFunc(func(context.Context, Request, func(string)) (Response, error) { return reply("x", nil), nil })
	h := newHarness(t, harnessConfig{models: []*Model{model("main", p)}})
	before := h.rt.Limits()
	if err := h.rt.SetLimits(Limits{MaxTurns: 0, MaxActiveRunsPerUser: 1, MaxRunning: 1, MaxRunningPerUser: 1}); err == nil {
		t.Fatal("SetLimits took a max_turns of 0")
	}
	if h.rt.Limits() != before {
		t.Fatal("a refused change changed the limits")
	}
	want := Limits{MaxTurns: 7, MaxActiveRunsPerUser: 2, MaxRunning: 5, MaxRunningPerUser: 3}
	if err := h.rt.SetLimits(want); err != nil {
		t.Fatal(err)
	}
	r := h.rt.newRun(StartRequest{ThreadID: h.thread, UserID: "u1"}, h.rt.cat.Load().order[0], h.rt.cat.Load().withCommands)
	defer r.cancel(nil)
	if r.maxTurns != 7 || h.rt.exec.slots.max != 5 || h.rt.exec.slots.perUser != 3 {
		t.Fatalf("after SetLimits a run's turns %d, slots %d/%d; want 7, 5/3", r.maxTurns, h.rt.exec.slots.max, h.rt.exec.slots.perUser)
	}
}
