package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"herd/agent/tools"
	"herd/models"
)

// leadThen is a lead that makes the given task calls on its first turn and
// then answers with a summary.
func leadThen(calls ...ToolCall) func(ctx context.Context, req Request) (Response, error) {
	return func(ctx context.Context, req Request) (Response, error) {
		if usedTurns(req) == 0 {
			return reply("delegating", &Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}, calls...), nil
		}
		return reply("summary", &Usage{InputTokens: 20, OutputTokens: 5, TotalTokens: 25}), nil
	}
}

func split(lead func(context.Context, Request) (Response, error), sub func(context.Context, Request) (Response, error)) Provider {
	return llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
		if isLead(req) {
			return lead(ctx, req)
		}
		return sub(ctx, req)
	})
}

// blockUntilCancelled answers its first call with usage, then blocks on
// every later call until ctx ends (honouring cancellation).
func blockAfterFirst(started chan<- struct{}) func(context.Context, Request) (Response, error) {
	return func(ctx context.Context, req Request) (Response, error) {
		if usedTurns(req) == 0 {
			return reply("looking", &Usage{InputTokens: 7, OutputTokens: 3, TotalTokens: 10}, ToolCall{ID: "c" + lastHuman(req), Name: tools.Ls, Args: []byte(`{}`)}), nil
		}
		if started != nil {
			started <- struct{}{}
		}
		<-ctx.Done()
		return Response{}, fmt.Errorf("%w: %w", ErrProvider, ctx.Err())
	}
}

func TestCancelRunWithThreeSubagents(t *testing.T) {
	started := make(chan struct{}, 3)
	h := newHarness(t, harnessConfig{models: []*Model{model("m", split(
		leadThen(taskCall("t1", "one", SubagentGeneral), taskCall("t2", "two", SubagentGeneral), taskCall("t3", "three", SubagentGeneral)),
		blockAfterFirst(started),
	))}})
	st := h.start("go")
	for range 3 {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("subagents did not start")
		}
	}
	if err := h.rt.Cancel(h.thread, st.RunID); err != nil {
		t.Fatal(err)
	}
	h.wait()
	tms := h.toolMessages()
	for _, id := range []string{"t1", "t2", "t3"} {
		m, ok := tms[id]
		if !ok {
			t.Fatalf("no ToolMessage for %s", id)
		}
		md := metadata(t, m)
		if md.Status != StatusCancelled || m.Content != "Task cancelled by user." {
			t.Errorf("%s: %q %+v, want cancelled", id, m.Content, md)
		}
		if md.Usage == nil || md.Usage.TotalTokens != 10 {
			t.Errorf("%s: usage %+v, want the 10 tokens used before the cancel", id, md.Usage)
		}
		ends := h.endEvents(id)
		if len(ends) != 1 || ends[0]["status"] != StatusCancelled || normalizeUsage(ends[0]["usage"]) == nil {
			t.Errorf("%s: end events %v, want one cancelled with usage", id, ends)
		}
	}
	if r := h.runRow(st.RunID); r.Status != models.RunCancelled {
		t.Errorf("run status %s, want cancelled", r.Status)
	}
	if n := h.rt.exec.reg.Len(); n != 0 {
		t.Errorf("registry holds %d after cancel", n)
	}
}

func TestCancelOneTask(t *testing.T) {
	started := make(chan struct{}, 2)
	var subCalls atomic.Int32
	h := newHarness(t, harnessConfig{models: []*Model{model("m", split(
		leadThen(taskCall("keep", "keep", SubagentGeneral), taskCall("stop", "stop", SubagentGeneral)),
		func(ctx context.Context, req Request) (Response, error) {
			subCalls.Add(1)
			if strings.Contains(lastHuman(req), "keep") {
				if usedTurns(req) == 0 {
					started <- struct{}{}
					select {
					case <-time.After(300 * time.Millisecond):
					case <-ctx.Done():
						return Response{}, ctx.Err()
					}
					return reply("", nil, ToolCall{ID: "x", Name: tools.Ls, Args: []byte(`{}`)}), nil
				}
				return reply("kept", nil), nil
			}
			return blockAfterFirst(started)(ctx, req)
		},
	))}})
	h.start("go")
	<-started
	<-started
	if err := h.rt.CancelTask(h.thread, "stop"); err != nil {
		t.Fatal(err)
	}
	if err := h.rt.CancelTask(h.thread, "nope"); !errors.Is(err, ErrNoTask) {
		t.Errorf("cancel unknown task: %v, want ErrNoTask", err)
	}
	h.wait()
	tms := h.toolMessages()
	if md := metadata(t, tms["stop"]); md.Status != StatusCancelled {
		t.Errorf("cancelled task: %+v", md)
	}
	if md := metadata(t, tms["keep"]); md.Status != StatusCompleted || md.ResultBrief != "kept" {
		t.Errorf("the other task: %+v, want completed", md)
	}
}

// TestSafetyNet: a subagent stuck in a call that ignores cancellation is
// abandoned at admission + timeout + margin with polling_timed_out; its
// late call is still counted once.
func TestSafetyNet(t *testing.T) {
	release := make(chan struct{})
	cfg := defaultSubagents()
	cfg.TimeoutSeconds, cfg.SafetyMarginSeconds = 1, 1
	h := newHarness(t, harnessConfig{subagents: cfg, models: []*Model{model("m", split(
		leadThen(taskCall("stuck", "stuck", SubagentGeneral)),
		func(ctx context.Context, req Request) (Response, error) {
			<-release // ignores ctx
			return reply("too late", &Usage{InputTokens: 40, OutputTokens: 2, TotalTokens: 42}), nil
		},
	))}})
	start := time.Now()
	st := h.run("go")
	took := time.Since(start)
	if took < 2*time.Second || took > 4*time.Second {
		t.Errorf("safety net fired after %v, want about 2 s", took)
	}
	m := h.toolMessages()["stuck"]
	md := metadata(t, m)
	if md.Status != StatusPollingTimedOut || !strings.Contains(m.Content, "polling timed out") {
		t.Errorf("ToolMessage %q %+v, want polling_timed_out", m.Content, md)
	}
	if h.runRow(st.RunID).Status != models.RunCompleted {
		t.Errorf("run = %s, want completed (the lead went on)", h.runRow(st.RunID).Status)
	}
	close(release) // the stuck call returns; its usage is still counted once
	deadline := time.Now().Add(5 * time.Second)
	for {
		rep, _ := h.store.Usage(context.Background(), h.thread, "")
		if rep.Subagents.TotalTokens == 42 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("late call not in the ledger: %+v", rep)
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.rt.exec.wait()
	if ends := h.endEvents("stuck"); len(ends) != 1 {
		t.Errorf("%d end events, want exactly one", len(ends))
	}
}

func TestExecutionTimeout(t *testing.T) {
	cfg := defaultSubagents()
	cfg.TimeoutSeconds = 1
	h := newHarness(t, harnessConfig{subagents: cfg, models: []*Model{model("m", split(
		leadThen(taskCall("slow", "slow", SubagentGeneral)),
		blockAfterFirst(nil),
	))}})
	h.run("go")
	m := h.toolMessages()["slow"]
	md := metadata(t, m)
	if md.Status != StatusTimedOut || m.Content != "Task timed out. Error: Execution timed out after 1 seconds" {
		t.Errorf("%q %+v, want timed_out", m.Content, md)
	}
	if md.Usage == nil || md.Usage.TotalTokens != 10 {
		t.Errorf("usage %+v, want the 10 tokens before the timeout", md.Usage)
	}
}

func TestQueueTimeout(t *testing.T) {
	cfg := defaultSubagents()
	cfg.MaxRunning, cfg.QueueTimeoutSeconds, cfg.TimeoutSeconds = 1, 1, 10
	h := newHarness(t, harnessConfig{subagents: cfg, models: []*Model{model("m", split(
		leadThen(taskCall("first", "first", SubagentGeneral), taskCall("second", "second", SubagentGeneral)),
		func(ctx context.Context, req Request) (Response, error) {
			select {
			case <-time.After(1500 * time.Millisecond):
				return reply("done", nil), nil
			case <-ctx.Done():
				return Response{}, ctx.Err()
			}
		},
	))}})
	h.run("go")
	tms := h.toolMessages()
	var queued, ran string
	for _, id := range []string{"first", "second"} {
		md := metadata(t, tms[id])
		switch md.Status {
		case StatusCompleted:
			ran = id
		case StatusTimedOut:
			queued = id
			if !strings.Contains(md.Error, "Queue timed out after 1 seconds") || !strings.Contains(md.Error, "max_running = 1") {
				t.Errorf("queue error = %q", md.Error)
			}
		}
	}
	if queued == "" || ran == "" {
		t.Fatalf("statuses: %v; want one completed, one queue-timed-out", tms)
	}
	evs := h.events(queued)
	if len(evs) != 2 || evs[0].EventType != eventSubagentQueued || evs[1].EventType != eventSubagentEnd {
		t.Errorf("events of the queued task: %v, want queued then end", eventTypes(evs))
	}
}

func eventTypes(es []models.RunEvent) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.EventType
	}
	return out
}

func TestAdmissionLimits(t *testing.T) {
	cfg := defaultSubagents()
	cfg.MaxConcurrentPerResponse, cfg.MaxTotalPerRun = 2, 3
	h := newHarness(t, harnessConfig{subagents: cfg, models: []*Model{model("m", split(
		func(ctx context.Context, req Request) (Response, error) {
			switch usedTurns(req) {
			case 0:
				return reply("", nil, taskCall("a1", "a", SubagentGeneral), taskCall("a2", "b", SubagentGeneral), taskCall("a3", "c", SubagentGeneral)), nil
			case 1:
				return reply("", nil, taskCall("b1", "d", SubagentGeneral), taskCall("b2", "e", SubagentGeneral)), nil
			}
			return reply("done", nil), nil
		},
		func(ctx context.Context, req Request) (Response, error) { return reply("ok", nil), nil },
	))}})
	h.run("go")
	tms := h.toolMessages()
	want := map[string]string{"a1": StatusCompleted, "a2": StatusCompleted, "a3": "max_concurrent_per_response", "b1": StatusCompleted, "b2": "max_total_per_run"}
	for id, w := range want {
		md := metadata(t, tms[id])
		if isTerminal(w) {
			if md.Status != w {
				t.Errorf("%s: %+v, want %s", id, md, w)
			}
			continue
		}
		if md.Status != StatusFailed || !strings.Contains(md.Error, w) {
			t.Errorf("%s: %+v, want failed naming %s", id, md, w)
		}
		if evs := h.events(id); len(evs) != 0 {
			t.Errorf("%s: a refused call has events %v", id, eventTypes(evs))
		}
	}
}

func TestUnknownSubagentType(t *testing.T) {
	h := newHarness(t, harnessConfig{models: []*Model{model("m", split(
		leadThen(taskCall("u", "x", "wizard")),
		func(ctx context.Context, req Request) (Response, error) {
			t.Error("a subagent ran")
			return reply("", nil), nil
		},
	))}, subagents: func() SubagentsConfig {
		c := defaultSubagents()
		c.Agents = map[string]AgentConfig{"researcher": {Description: "r"}}
		return c
	}()})
	h.run("go")
	m := h.toolMessages()["u"]
	if m.Content != "Task failed. Error: Unknown subagent type 'wizard'. Available: general-purpose, researcher" {
		t.Errorf("content = %q", m.Content)
	}
	if evs := h.events("u"); len(evs) != 0 {
		t.Errorf("events %v for a task that never started", eventTypes(evs))
	}
}

func TestStopReasons(t *testing.T) {
	ls := func(args string) ToolCall { return ToolCall{ID: "c", Name: tools.Ls, Args: []byte(args)} }
	cases := []struct {
		name   string
		agent  AgentConfig
		sub    func(ctx context.Context, req Request) (Response, error)
		status string
		reason string
		text   string
	}{
		{"token budget, with output", AgentConfig{TokenBudget: ptr[int64](15)},
			func(ctx context.Context, req Request) (Response, error) {
				return reply("partial findings", &Usage{InputTokens: 10, OutputTokens: 10, TotalTokens: 20}, ls(fmt.Sprintf(`{"path":"%d"}`, usedTurns(req)))), nil
			}, StatusCompleted, stopTokenCapped, "Task Succeeded (capped: token budget). Result: partial findings"},
		{"turn budget, no output", AgentConfig{MaxTurns: ptr(2)},
			func(ctx context.Context, req Request) (Response, error) {
				return reply("", nil, ls(fmt.Sprintf(`{"path":"%d"}`, usedTurns(req)))), nil
			}, StatusFailed, stopTurnCapped, "Task failed (capped: turn budget). Error: Stopped: reached the turn budget (max_turns 2) before a final answer"},
		{"repeated call loop", AgentConfig{},
			func(ctx context.Context, req Request) (Response, error) {
				return reply("", nil, ls(`{"path": "."}`)), nil
			}, StatusFailed, stopLoopCapped, "Task failed (capped: repeated tool-call loop). Error: Stopped: called ls with the same arguments 3 times"},
		{"empty answer", AgentConfig{},
			func(ctx context.Context, req Request) (Response, error) { return reply("  ", nil), nil },
			StatusFailed, "", "Task failed. Error: No response generated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := defaultSubagents()
			cfg.Agents = map[string]AgentConfig{SubagentGeneral: c.agent}
			h := newHarness(t, harnessConfig{subagents: cfg, models: []*Model{model("m", split(leadThen(taskCall("t", "t", SubagentGeneral)), c.sub))}})
			h.run("go")
			m := h.toolMessages()["t"]
			md := metadata(t, m)
			if md.Status != c.status || md.StopReason != c.reason || m.Content != c.text {
				t.Errorf("got %q %+v\nwant %q %s/%s", m.Content, md, c.text, c.status, c.reason)
			}
			ends := h.endEvents("t")
			if len(ends) != 1 || ends[0]["status"] != c.status || (c.reason != "" && ends[0]["stop_reason"] != c.reason) {
				t.Errorf("end event %v", ends)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestDelegateReleasesTheContext: once a task is terminal, its execution's
// context is cancelled (errTaskOver), so that the run's context, which
// lives as long as the run, does not keep it.
func TestDelegateReleasesTheContext(t *testing.T) {
	h := newHarness(t, harnessConfig{models: []*Model{model("m", llmFunc(func(context.Context, Request, func(string)) (Response, error) {
		return reply("done", nil), nil
	}))}})
	r := &run{env: &h.rt.runEnv, box: h.rt.cat.Load().withCommands, release: h.rt.release, id: "00000000-0000-4000-8000-0000000000ab", threadID: h.thread, model: h.rt.cat.Load().order[0], done: make(chan struct{})}
	r.sink = r.env.newSink(owner{r.threadID, r.userID}, r.id)
	r.ctx, r.cancel = context.WithCancelCause(context.Background())
	defer r.cancel(nil)
	o, release := h.rt.exec.delegate(r.scope(), taskCall("over", "finish", SubagentGeneral), func() {})
	if o.Status != StatusCompleted {
		t.Fatalf("outcome %+v", o)
	}
	es := h.rt.exec.reg.byRun(r.id)
	release()
	if len(es) != 1 {
		t.Fatalf("%d executions in the registry before release", len(es))
	}
	if cause := context.Cause(es[0].ctx); !errors.Is(cause, errTaskOver) {
		t.Errorf("a completed task's context: cause %v, want %v", cause, errTaskOver)
	}
	if r.ctx.Err() != nil {
		t.Error("the run's context ended with its task")
	}
}

// TestFirstTerminalWins races completion, timeout and cancellation in
// every order: exactly one wins, its payload is intact, one end row.
func TestFirstTerminalWins(t *testing.T) {
	h := newHarness(t, harnessConfig{models: []*Model{model("m", llmFunc(func(context.Context, Request, func(string)) (Response, error) {
		return reply("x", nil), nil
	}))}})
	r := &run{env: &h.rt.runEnv, box: h.rt.cat.Load().withCommands, release: h.rt.release, id: "00000000-0000-4000-8000-0000000000aa", threadID: h.thread, model: h.rt.cat.Load().order[0], done: make(chan struct{})}
	r.sink = r.env.newSink(owner{r.threadID, r.userID}, r.id)
	r.ctx, r.cancel = context.WithCancelCause(context.Background())
	defer r.cancel(nil)
	outcomes := []Outcome{
		{Status: StatusCompleted, Result: "the result"},
		{Status: StatusTimedOut, Error: "Execution timed out after 1 seconds"},
		{Status: StatusCancelled, Error: "stopped"},
	}
	for i := range 60 {
		e := h.rt.exec.newExecution(r.scope(), fmt.Sprintf("race-%d", i), taskArgs{Description: "d", Prompt: "p", SubagentType: SubagentGeneral}, h.rt.cat.Load().withCommands.agents.byName[SubagentGeneral])
		e.collector.Record(&models.UsageEntry{CallID: fmt.Sprint(i), TotalTokens: 5, InputTokens: 3, OutputTokens: 2})
		var (
			wg      sync.WaitGroup
			winners atomic.Int32
			won     = make([]bool, len(outcomes))
		)
		order := []int{i % 3, (i + 1 + i/3%2) % 3}
		order = append(order, 3-order[0]-order[1])
		for _, k := range order {
			wg.Go(func() {
				if e.finish(outcomes[k]) {
					winners.Add(1)
					won[k] = true
				}
			})
		}
		wg.Wait()
		if winners.Load() != 1 {
			t.Fatalf("round %d: %d winners", i, winners.Load())
		}
		got := e.outcome()
		for k, w := range won {
			if w && (got.Status != outcomes[k].Status || got.Result != outcomes[k].Result || got.Error != outcomes[k].Error) {
				t.Fatalf("round %d: outcome %+v, winner was %+v", i, got, outcomes[k])
			}
		}
		if got.Usage == nil || got.Usage.TotalTokens != 5 || got.ModelName != "m" {
			t.Fatalf("round %d: payload lost: %+v", i, got)
		}
		select {
		case <-e.done:
		default:
			t.Fatalf("round %d: terminal without done", i)
		}
		if ends := h.endEvents(e.TaskID); len(ends) != 1 || ends[0]["status"] != got.Status {
			t.Fatalf("round %d: end rows %v, want one %s", i, ends, got.Status)
		}
	}
}

// TestSameToolCallIDStaysIndependent: providers may repeat tool-call ids
// across runs; the registry keys on execution ids.
func TestSameToolCallIDStaysIndependent(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, harnessConfig{models: []*Model{model("m", split(
		leadThen(taskCall("call_0", "same id", SubagentGeneral)),
		func(ctx context.Context, req Request) (Response, error) {
			return reply(fmt.Sprintf("answer %d", n.Add(1)), nil), nil
		},
	))}})
	h.run("first")
	h.run("second")
	evs := h.events("call_0")
	execs := map[any]int{}
	for _, e := range evs {
		c, _ := DecodeContent(e.Content)
		execs[c["execution_id"]]++
	}
	if len(execs) != 2 {
		t.Fatalf("executions for call_0: %v, want two distinct", execs)
	}
	ends := h.endEvents("call_0")
	if len(ends) != 2 || ends[0]["result"] == ends[1]["result"] {
		t.Errorf("ends %v, want two independent results", ends)
	}
}

func TestToolPanicIsContained(t *testing.T) {
	h := newHarness(t, harnessConfig{tools: append(tools.Workspace(), panicTool{}), models: []*Model{model("m", split(
		leadThen(taskCall("p", "p", SubagentGeneral)),
		func(ctx context.Context, req Request) (Response, error) {
			if usedTurns(req) == 0 {
				return reply("", nil, ToolCall{ID: "x", Name: "boom", Args: []byte(`{}`)}), nil
			}
			return reply("survived: "+req.Messages[len(req.Messages)-1].Content, nil), nil
		},
	))}})
	h.run("go")
	md := metadata(t, h.toolMessages()["p"])
	if md.Status != StatusCompleted || !strings.Contains(md.ResultBrief, "failed internally") {
		t.Errorf("%+v, want completed after a contained panic", md)
	}
}

type panicTool struct{}

func (panicTool) Spec() tools.Spec {
	return tools.Spec{Name: "boom", Parameters: []byte(`{"type":"object"}`)}
}
func (panicTool) Run(context.Context, tools.Env, json.RawMessage) (string, error) {
	panic("kaboom")
}

// TestOneResponseStartsInOrder: the task calls of one response ask for
// their slots in the order the model made them, so with one slot they
// start in that order (docs/DESIGN.md §5: one user's subagents start in
// the order they were asked for).
func TestOneResponseStartsInOrder(t *testing.T) {
	cfg := defaultSubagents()
	cfg.MaxRunning, cfg.MaxConcurrentPerResponse, cfg.MaxTotalPerRun = 1, 12, 12
	var calls []ToolCall
	var want []string
	for i := range 12 {
		id := fmt.Sprintf("t%02d", i)
		calls, want = append(calls, taskCall(id, id, SubagentGeneral)), append(want, id)
	}
	h := newHarness(t, harnessConfig{subagents: cfg, models: []*Model{model("m", split(leadThen(calls...),
		func(ctx context.Context, req Request) (Response, error) { return reply("done", nil), nil },
	))}})
	h.run("go")
	var got []string
	for _, e := range h.events("") {
		if e.EventType == eventSubagentStart {
			got = append(got, e.TaskID)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("tasks started in the order %v, want %v", got, want)
	}
}
