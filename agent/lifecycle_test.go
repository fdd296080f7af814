package agent

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"herd/agent/tools"
	"herd/models"
)

// TestSubagentSpecs covers the precedence of docs/DESIGN.md §5, recursion, the
// bash type's availability and the effective model.
func TestSubagentSpecs(t *testing.T) {
	fast := model("fast", llmFunc(func(context.Context, Request, func(string)) (Response, error) { return reply("x", nil), nil }))
	deep := model("deep", fast.Provider)
	bash, _ := tools.NewBash(tools.SandboxConfig{Mode: tools.SandboxHost, AllowHostBash: true, BashTimeoutSeconds: 5, OutputLimitBytes: 2000})
	cfg := defaultSubagents()
	cfg.TimeoutSeconds = 1800
	cfg.Agents = map[string]AgentConfig{
		SubagentGeneral: {TimeoutSeconds: ptr(60), MaxTurns: ptr(7)},
		"researcher":    {Description: "r", Model: "deep", Tools: &[]string{tools.Ls, ToolTask, tools.ReadFile}},
		"writer":        {Description: "w", TimeoutSeconds: ptr(42), DisallowedTools: &[]string{tools.Bash}},
	}
	h := newHarness(t, harnessConfig{subagents: cfg, tools: append(tools.Workspace(), bash), models: []*Model{fast, deep}})
	cases := []struct {
		name    string
		timeout time.Duration
		turns   int
		model   string
		tools   []string
	}{
		{SubagentGeneral, 60 * time.Second, 7, "inherit", []string{tools.Ls, tools.ReadFile, tools.WriteFile, tools.StrReplace, tools.Bash}},
		{SubagentBash, 1800 * time.Second, 40, "inherit", []string{tools.Bash, tools.Ls, tools.ReadFile, tools.WriteFile, tools.StrReplace}},
		{"researcher", 900 * time.Second, 100, "deep", []string{tools.Ls, tools.ReadFile}},
		{"writer", 42 * time.Second, 100, "inherit", []string{tools.Ls, tools.ReadFile, tools.WriteFile, tools.StrReplace}},
	}
	for _, c := range cases {
		s := h.rt.cat.Load().withCommands.agents.byName[c.name]
		if s == nil {
			t.Fatalf("no spec %s", c.name)
		}
		if s.timeout != c.timeout || s.maxTurns != c.turns || s.model != c.model {
			t.Errorf("%s: timeout %v turns %d model %s; want %v %d %s", c.name, s.timeout, s.maxTurns, s.model, c.timeout, c.turns, c.model)
		}
		if got := sorted(s.tools.Names()); !slices.Equal(got, sorted(c.tools)) {
			t.Errorf("%s tools = %v, want %v", c.name, got, c.tools)
		}
		if slices.Contains(s.tools.Names(), ToolTask) {
			t.Errorf("%s can call task: recursion", c.name)
		}
	}
	// Without bash allowed, the bash type does not exist.
	h2 := newHarness(t, harnessConfig{models: []*Model{fast}})
	if _, ok := h2.rt.cat.Load().withCommands.agents.byName[SubagentBash]; ok {
		t.Error("bash subagent offered without the bash tool")
	}
	// The effective model: inherit is the lead's model of the run.
	if got := resolveModel(h.rt.cat.Load().withCommands.agents.byName[SubagentGeneral], deep, h.rt.cat.Load().byName); got != deep {
		t.Errorf("inherit resolved to %s, want the run's model", got.Config.Name)
	}
	if got := resolveModel(h.rt.cat.Load().withCommands.agents.byName["researcher"], fast, h.rt.cat.Load().byName); got != deep {
		t.Errorf("named model resolved to %s", got.Config.Name)
	}
}

// TestEffectiveModelEverywhere: one resolution is used for every call and
// every event of a subagent, and for its ToolMessage.
func TestEffectiveModelEverywhere(t *testing.T) {
	var mu sync.Mutex
	calls := map[string][]string{}
	prov := func(name string) Provider {
		return llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
			if isLead(req) {
				return leadThen(taskCall("r", "r", "researcher"), taskCall("g", "g", SubagentGeneral))(ctx, req)
			}
			mu.Lock()
			calls[lastHuman(req)] = append(calls[lastHuman(req)], name+"/"+req.Model)
			mu.Unlock()
			if usedTurns(req) < 2 {
				return reply("step", &Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2}, ToolCall{ID: uuid.NewString(), Name: tools.Ls, Args: []byte(`{"path":"."}`)}), nil
			}
			return reply("answer", &Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2}), nil
		})
	}
	cfg := defaultSubagents()
	cfg.LoopLimit = 10
	cfg.Agents = map[string]AgentConfig{"researcher": {Description: "r", Model: "deep"}}
	h := newHarness(t, harnessConfig{subagents: cfg, models: []*Model{model("fast", prov("fast")), model("deep", prov("deep"))}})
	h.run("go")
	want := map[string]string{"r": "deep", "g": "fast"}
	for id, m := range want {
		for _, c := range calls["do "+id] {
			if c != m+"/"+m {
				t.Errorf("task %s called %s, want %s", id, c, m)
			}
		}
		for _, e := range h.events(id) {
			c, _ := DecodeContent(e.Content)
			if mn, ok := c["model_name"]; ok && mn != m {
				t.Errorf("task %s: %s has model_name %v, want %s", id, e.EventType, mn, m)
			}
		}
		if md := metadata(t, h.toolMessages()[id]); md.ModelName != m {
			t.Errorf("task %s ToolMessage model %q, want %s", id, md.ModelName, m)
		}
	}
}

func TestCollector(t *testing.T) {
	resp := func(id string, u *Usage) Response { return Response{CallID: id, Usage: u, Model: "reported-model"} }
	cases := []struct {
		name  string
		resps []Response
		want  *TokenUsage
		calls int
		cache int64
	}{
		{"duplicate call id counted once", []Response{resp("a", &Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}), resp("a", &Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15})}, &TokenUsage{10, 5, 15}, 1, 0},
		{"zero usage: not in the card", []Response{resp("a", &Usage{})}, nil, 0, 0},
		{"negative usage: not in the card", []Response{resp("a", &Usage{InputTokens: -1, OutputTokens: -1, TotalTokens: -2})}, nil, 0, 0},
		{"no usage: not in the card", []Response{resp("a", nil)}, nil, 0, 0},
		{"missing total is input + output", []Response{resp("a", &Usage{InputTokens: 10, OutputTokens: 5})}, &TokenUsage{10, 5, 15}, 1, 0},
		{"cache read kept when positive", []Response{resp("a", &Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15, CacheReadTokens: 4}), resp("b", &Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2})}, &TokenUsage{11, 6, 17}, 2, 4},
		{"cumulative, never deltas", []Response{resp("a", &Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2}), resp("b", &Usage{InputTokens: 2, OutputTokens: 2, TotalTokens: 4}), resp("c", &Usage{InputTokens: 3, OutputTokens: 3, TotalTokens: 6})}, &TokenUsage{6, 6, 12}, 3, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			col := &collector{}
			var recs []models.UsageEntry // what the collector recorded
			for _, r := range c.resps {
				if e := ledgerEntry(owner{threadID: "th"}, "run", "task", "m", r); col.Record(e) {
					recs = append(recs, *e)
				}
			}
			got := col.Snapshot()
			if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
				t.Errorf("snapshot %+v, want %+v", got, c.want)
			}
			if len(recs) != c.calls {
				t.Errorf("%d records, want %d", len(recs), c.calls)
			}
			var cache int64
			for _, r := range recs {
				cache += r.CacheReadTokens
				if r.ModelName != "reported-model" {
					t.Errorf("record model %q, want the provider-reported name", r.ModelName)
				}
			}
			if cache != c.cache {
				t.Errorf("cache read %d, want %d", cache, c.cache)
			}
		})
	}
}

// TestCrashRecovery closes a database a crash left with a running run, a
// running subagent, a queued one and a tool call without a result.
// TestLedgerEntryUnreported: a call whose provider reported no usage is
// still a ledger row, marked unreported with zero figures; a reported one
// is not marked.
func TestLedgerEntryUnreported(t *testing.T) {
	for _, u := range []*Usage{nil, {}, {InputTokens: -1, OutputTokens: -1, TotalTokens: -2}} {
		e := ledgerEntry(owner{threadID: "th"}, "run", "", "m", Response{CallID: "a", Usage: u, Model: "m"})
		if !e.Unreported || e.CallID != "a" || e.ModelName != "m" || e.InputTokens != 0 || e.OutputTokens != 0 || e.TotalTokens != 0 {
			t.Errorf("usage %+v: entry %+v, want an unreported row of call a", u, e)
		}
	}
	if e := ledgerEntry(owner{threadID: "th"}, "run", "", "m", Response{CallID: "b", Usage: &Usage{InputTokens: 1, OutputTokens: 2}}); e.Unreported || e.TotalTokens != 3 {
		t.Errorf("reported usage: entry %+v", e)
	}
}

// TestCrashRecovery: crash recovery at start, and failover of a dead
// instance's runs, close everything a run left open, once, on both
// databases.
func TestCrashRecovery(t *testing.T) {
	for _, pg := range []bool{false, true} {
		for _, failover := range []bool{false, true} {
			if failover && !pg {
				continue // instances are PostgreSQL's
			}
			name := map[bool]string{false: "sqlite", true: "postgres"}[pg] + map[bool]string{false: "/restart", true: "/failover"}[failover]
			t.Run(name, func(t *testing.T) { testCrashRecovery(t, pg, failover) })
		}
	}
}

func testCrashRecovery(t *testing.T, pg, failover bool) {
	h := newHarness(t, harnessConfig{postgres: pg, models: []*Model{model("m", llmFunc(func(context.Context, Request, func(string)) (Response, error) {
		return reply("x", nil), nil
	}))}})
	ctx := context.Background()
	runID := uuid.NewString()
	calls, _ := json.Marshal([]ToolCall{
		taskCall("t-run", "running one", SubagentGeneral),
		taskCall("t-queue", "queued one", SubagentGeneral),
		taskCall("t-done", "finished one", SubagentGeneral),
		{ID: "c-ls", Name: tools.Ls, Args: []byte(`{}`)},
	})
	ev := func(task, typ string, content map[string]any) models.Record {
		b, _ := json.Marshal(content)
		if _, err := decodeEvent(typ, b); err != nil {
			t.Fatal(err)
		}
		return models.Record{Event: &models.RunEvent{ThreadID: h.thread, RunID: runID, TaskID: task, EventType: typ, Category: categoryOf(typ), Content: b}}
	}
	base := func(task string, v int, extra map[string]any) map[string]any {
		m := map[string]any{"task_id": task, "execution_id": "e-" + task, "run_id": runID, "version": v}
		for k, x := range extra {
			m[k] = x
		}
		return m
	}
	start := map[string]any{"description": "d", "prompt": "p", "subagent_type": SubagentGeneral, "model_name": "m"}
	usage := map[string]any{"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}
	doneOutcome, doneKw, _ := Outcome{Status: StatusCompleted, Result: "ok"}.ToolMessage()
	err := h.writer.Write(ctx,
		models.Record{Run: &models.Run{ID: runID, ThreadID: h.thread, UserID: "u1", Status: models.RunRunning, ModelName: "m", StartedAt: time.Now()}},
		models.Record{Message: &models.Message{ID: uuid.NewString(), ThreadID: h.thread, RunID: runID, Type: TypeHuman, Content: "go"}},
		models.Record{Message: &models.Message{ID: uuid.NewString(), ThreadID: h.thread, RunID: runID, Type: TypeAI, ToolCalls: models.JSON(calls)}},
		ev("t-run", eventSubagentStart, base("t-run", 1, start)),
		ev("t-run", eventSubagentStep, base("t-run", 2, map[string]any{"message_index": 1, "kind": "ai", "text": "working", "truncated": false, "usage": usage})),
		ev("t-queue", eventSubagentQueued, base("t-queue", 1, start)),
		ev("t-done", eventSubagentStart, base("t-done", 1, start)),
		ev("t-done", eventSubagentEnd, base("t-done", 2, map[string]any{"status": StatusCompleted, "result": "ok"})),
		models.Record{Message: &models.Message{ID: uuid.NewString(), ThreadID: h.thread, RunID: runID, Type: TypeTool, ToolCallID: "t-done", Name: ToolTask, Content: doneOutcome, AdditionalKwargs: models.MustJSON(doneKw)}},
	)
	if err != nil {
		t.Fatal(err)
	}

	want := interruptedByRestart
	if failover {
		want = interruptedInstanceLost
	}
	n, err := h.closeInterrupted(ctx, failover)
	if err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v; want 1 run closed", n, err)
	}
	if r := h.runRow(runID); r.Status != models.RunFailed || r.Error != want || r.EndedAt == nil {
		t.Errorf("run = %+v, want failed: %s", r, want)
	}
	tms := h.toolMessages()
	for _, id := range []string{"t-run", "t-queue"} {
		md := metadata(t, tms[id])
		if md.Status != StatusFailed || md.Error != want || md.ModelName != "m" {
			t.Errorf("%s ToolMessage metadata %+v", id, md)
		}
		ends := h.endEvents(id)
		if len(ends) != 1 || ends[0]["status"] != StatusFailed || ends[0]["error"] != want {
			t.Errorf("%s end events %v", id, ends)
		}
	}
	if md := metadata(t, tms["t-run"]); md.Usage == nil || md.Usage.TotalTokens != 7 {
		t.Errorf("the running task's usage so far was lost: %+v", md.Usage)
	}
	if ends := h.endEvents("t-done"); len(ends) != 1 {
		t.Errorf("a finished task got a second end: %v", ends)
	}
	if m := tms["c-ls"]; !strings.Contains(m.Content, want) {
		t.Errorf("the ls call's result = %q", m.Content)
	}
	// Idempotent: a second start finds nothing to close.
	if n, err := h.closeInterrupted(ctx, failover); err != nil || n != 0 {
		t.Errorf("second Recover = %d, %v", n, err)
	}
	// The next run's history is valid: every call has its result.
	hist := replayable(mustMessages(t, h))
	for i, m := range hist {
		if m.Type == TypeAI {
			for j, c := range m.ToolCalls {
				if hist[i+1+j].ToolCallID != c.ID {
					t.Errorf("call %s is not followed by its result", c.ID)
				}
			}
		}
	}
}

func mustMessages(t *testing.T, h *harness) []models.Message {
	ms, err := h.store.Messages(context.Background(), h.thread)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestShutdownClosesEverything: a graceful shutdown cancels running work
// and every subagent still writes its terminal state.
func TestShutdownClosesEverything(t *testing.T) {
	started := make(chan struct{}, 2)
	h := newHarness(t, harnessConfig{models: []*Model{model("m", split(
		leadThen(taskCall("s1", "one", SubagentGeneral), taskCall("s2", "two", SubagentGeneral)),
		blockAfterFirst(started),
	))}})
	st := h.start("go")
	<-started
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.Start(ctx, StartRequest{ThreadID: h.thread, UserID: "u1", Content: "more"}); err != ErrShuttingDown {
		t.Errorf("start after shutdown: %v, want ErrShuttingDown", err)
	}
	for _, id := range []string{"s1", "s2"} {
		md := metadata(t, h.toolMessages()[id])
		if md.Status != StatusCancelled || !strings.Contains(md.Error, "shutting down") {
			t.Errorf("%s: %+v", id, md)
		}
	}
	if r := h.runRow(st.RunID); r.Status != models.RunCancelled {
		t.Errorf("run %s, want cancelled", r.Status)
	}
}

// TestJanitor removes a terminal execution nobody delivered.
func TestJanitor(t *testing.T) {
	h := newHarness(t, harnessConfig{models: []*Model{model("m", llmFunc(func(context.Context, Request, func(string)) (Response, error) {
		return reply("x", nil), nil
	}))}})
	h.rt.exec.janitorGrace = 50 * time.Millisecond
	r := &run{env: &h.rt.runEnv, box: h.rt.cat.Load().withCommands, release: h.rt.release, id: uuid.NewString(), threadID: h.thread, model: h.rt.cat.Load().order[0]}
	r.sink = r.env.newSink(owner{r.threadID, r.userID}, r.id)
	r.ctx, r.cancel = context.WithCancelCause(context.Background())
	defer r.cancel(nil)
	e := h.rt.exec.newExecution(r.scope(), "orphan", taskArgs{Description: "d", Prompt: "p", SubagentType: SubagentGeneral}, h.rt.cat.Load().withCommands.agents.byName[SubagentGeneral])
	h.rt.exec.reg.add(e)
	e.finish(Outcome{Status: StatusCompleted, Result: "never delivered"})
	deadline := time.Now().Add(2 * time.Second)
	for h.rt.exec.reg.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the janitor did not remove the undelivered execution")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPersistShared: the writes of runs and tasks share one bound context
// (persistShared) while it has at least 7/8 of persistTO left; a new one
// replaces it after that, and the replaced one stays usable by the writes
// that hold it until its own deadline.
func TestPersistShared(t *testing.T) {
	env := &runEnv{persistTO: time.Hour}
	before := time.Now()
	first := env.persistShared()
	deadline, ok := first.Deadline()
	if !ok || deadline.Before(before.Add(time.Hour)) || deadline.After(time.Now().Add(time.Hour)) {
		t.Fatalf("deadline %v (set %v), want an hour from now", deadline, ok)
	}
	if again := env.persistShared(); again != first {
		t.Error("a write within the window got a context of its own")
	}
	env.bound.Load().renewAt = time.Now().Add(-time.Nanosecond) // the window has passed
	next := env.persistShared()
	if next == first {
		t.Fatal("the bound was not renewed after its window")
	}
	if first.Err() != nil || next.Err() != nil {
		t.Errorf("renewal ended a context: %v, %v", first.Err(), next.Err())
	}
	if d, _ := next.Deadline(); !d.After(deadline) {
		t.Errorf("renewed deadline %v, want after %v", d, deadline)
	}
}
