package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"herd/agent/tools"
	"herd/internal/pgtest"
	"herd/models"
)

// llmFunc is a scripted provider.
type llmFunc func(ctx context.Context, req Request, onDelta func(string)) (Response, error)

func (f llmFunc) Complete(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
	return f(ctx, req, onDelta)
}

func isLead(req Request) bool {
	return slices.ContainsFunc(req.Tools, func(t tools.Spec) bool { return t.Name == ToolTask })
}

func lastHuman(req Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Type == TypeHuman {
			return req.Messages[i].Content
		}
	}
	return ""
}

// usedTurns counts the AI messages since the last human message: the
// calls already made for the current request.
func usedTurns(req Request) int {
	n := 0
	for _, m := range req.Messages {
		switch m.Type {
		case TypeHuman:
			n = 0
		case TypeAI:
			n++
		}
	}
	return n
}

func reply(text string, u *Usage, calls ...ToolCall) Response {
	return Response{CallID: uuid.NewString(), Text: text, ToolCalls: calls, Usage: u, Model: "provider-model"}
}

func taskCall(id, desc, typ string) ToolCall {
	args, _ := json.Marshal(map[string]string{"description": desc, "prompt": "do " + desc, "subagent_type": typ})
	return ToolCall{ID: id, Name: ToolTask, Args: args}
}

// harness is a Runtime on a real SQLite file, as main wires it.
type harness struct {
	t      testing.TB
	dbPath string
	store  *models.Store
	writer *models.Writer
	rt     *Runtime
	thread string
	cfg    harnessConfig
	mu     sync.Mutex
	frames []models.Record // every committed record, in commit order
	// committed is signalled (without blocking) after every commit, for
	// until.
	committed chan struct{}
	retries   atomic.Int64 // failed write attempts the writer retried
}

type harnessConfig struct {
	// onCommit, when set, also sees every committed batch.
	onCommit  func([]models.Record)
	models    []*Model
	subagents SubagentsConfig
	tools     []tools.Tool
	leadTurns int
	backoff   []time.Duration // the writer's retry waits; nil: its default
	// noCommands starts the harness's runs without commands, as the
	// server does for a non-admin in host mode.
	noCommands bool
	offReason  string
	publisher  Publisher     // nil: none
	logger     *slog.Logger  // the runtime's; nil: discarded
	persistTO  time.Duration // 0: the runtime's
	// mcp, leadTools and admin: MCP tools, the lead's tools list, and
	// whether the harness's user is an admin.
	mcp       ToolSource
	leadTools *[]string
	admin     bool
	postgres  bool // the store is PostgreSQL (pgtest), not SQLite
	// jobs, when set, sees the records of every Write and Enqueue: each
	// commits whole.
	jobs func([]models.Record)
}

// watchedJournal tells jobs of every job before the journal takes it.
type watchedJournal struct {
	Journal
	jobs func([]models.Record)
}

func (j watchedJournal) Write(ctx context.Context, recs ...models.Record) error {
	j.jobs(recs)
	return j.Journal.Write(ctx, recs...)
}

func (j watchedJournal) Enqueue(ctx context.Context, recs ...models.Record) error {
	j.jobs(recs)
	return j.Journal.Enqueue(ctx, recs...)
}

func defaultSubagents() SubagentsConfig {
	return SubagentsConfig{
		TimeoutSeconds: 30, MaxRunning: 32, MaxConcurrentPerResponse: 4, MaxTotalPerRun: 12,
		QueueTimeoutSeconds: 30, SafetyMarginSeconds: 60, CancelGraceSeconds: 2, LoopLimit: 3,
	}
}

func newHarness(t testing.TB, hc harnessConfig) *harness {
	t.Helper()
	leaks := goleak.IgnoreCurrent()
	dir := t.TempDir()
	var store *models.Store
	var err error
	if hc.postgres {
		store, err = models.OpenPostgres(pgtest.DSN(t), models.Options{})
	} else {
		store, err = models.Open(filepath.Join(dir, "herd.db"), models.Options{})
	}
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, store: store, dbPath: filepath.Join(dir, "herd.db"), cfg: hc, committed: make(chan struct{}, 1)}
	h.writer = store.NewWriter(models.WriterOptions{Backoff: hc.backoff, OnBatch: func(st models.BatchStats) { h.retries.Add(int64(st.Attempts - 1)) }, OnCommit: func(recs []models.Record) {
		h.mu.Lock()
		h.frames = append(h.frames, recs...)
		h.mu.Unlock()
		select {
		case h.committed <- struct{}{}:
		default:
		}
		if hc.onCommit != nil {
			hc.onCommit(recs)
		}
	}})
	if hc.tools == nil {
		hc.tools = tools.Workspace()
	}
	var journal Journal = h.writer
	if hc.jobs != nil {
		journal = watchedJournal{h.writer, hc.jobs}
	}
	if hc.subagents.MaxRunning == 0 {
		hc.subagents = defaultSubagents()
	}
	h.rt, err = New(Options{
		Models: hc.models, Subagents: hc.subagents, Lead: LeadConfig{MaxTurns: max(hc.leadTurns, 5), Tools: hc.leadTools},
		WorkspaceRoot: filepath.Join(dir, "ws"), Tools: hc.tools, Journal: journal, History: store,
		CommandsOffReason: hc.offReason, Publisher: hc.publisher, MCP: hc.mcp, Logger: hc.logger,
		// As main wires it: the database claims each run's thread.
		Claims: store,
	})
	if err != nil {
		t.Fatal(err)
	}
	if hc.persistTO > 0 {
		h.rt.persistTO = hc.persistTO
	}
	th, err := store.CreateThread(context.Background(), "u1", "t")
	if err != nil {
		t.Fatal(err)
	}
	h.thread = th.ID
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.rt.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		h.writer.Close()
		_ = store.Close()
		if n := h.rt.exec.reg.Len(); n != 0 {
			t.Errorf("registry holds %d executions after the test", n)
		}
		goleak.VerifyNone(t, leaks)
	})
	return h
}

func model(name string, p Provider) *Model {
	return &Model{Config: ModelConfig{Name: name, DisplayName: name + " label", Provider: "test", Model: name}, Provider: p}
}

// run sends a message and waits for the run to end.
func (h *harness) run(content string) Started {
	h.t.Helper()
	st := h.start(content)
	h.wait()
	return st
}

func (h *harness) start(content string) Started {
	h.t.Helper()
	st, err := h.rt.Start(context.Background(), StartRequest{ThreadID: h.thread, UserID: "u1", Content: content, Commands: !h.cfg.noCommands, Admin: h.cfg.admin})
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

func (h *harness) wait() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.rt.Wait(ctx, h.thread); err != nil {
		h.t.Fatalf("run did not end: %v", err)
	}
}

// until waits, commit by commit, for cond to hold over every record
// committed so far; it fails the test after 10 s.
func (h *harness) until(what string, cond func([]models.Record) bool) {
	h.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		h.mu.Lock()
		ok := cond(h.frames)
		h.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-h.committed:
		case <-deadline:
			h.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// toolMessages returns the task ToolMessages by task id, with their
// decoded metadata.
func (h *harness) toolMessages() map[string]models.Message {
	h.t.Helper()
	msgs, err := h.store.Messages(context.Background(), h.thread)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]models.Message{}
	for _, m := range msgs {
		if m.Type == TypeTool {
			if _, dup := out[m.ToolCallID]; dup {
				h.t.Errorf("two ToolMessages for %s", m.ToolCallID)
			}
			out[m.ToolCallID] = m
		}
	}
	return out
}

func metadata(t *testing.T, m models.Message) taskMetadata {
	t.Helper()
	kw, err := DecodeContent(m.AdditionalKwargs)
	if err != nil {
		t.Fatalf("kwargs of %s: %v", m.ToolCallID, err)
	}
	md, ok := readMetadata(kw)
	if !ok {
		t.Fatalf("no metadata on %s: %s", m.ToolCallID, m.AdditionalKwargs)
	}
	return md
}

// events returns the thread's subagent events of one task.
func (h *harness) events(taskID string) []models.RunEvent {
	h.t.Helper()
	es, _, err := h.store.Events(context.Background(), h.thread, models.EventFilter{TaskID: taskID})
	if err != nil {
		h.t.Fatal(err)
	}
	return es
}

func (h *harness) endEvents(taskID string) []map[string]any {
	var out []map[string]any
	for _, e := range h.events(taskID) {
		if e.EventType == eventSubagentEnd {
			c, _ := DecodeContent(e.Content)
			out = append(out, c)
		}
	}
	return out
}

func (h *harness) runRow(id string) *models.Run {
	h.t.Helper()
	r, err := h.store.Run(context.Background(), h.thread, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// closeInterrupted closes the runs left running as a restart does
// (Recover) or, for failover, as a survivor does for a dead instance's
// runs (Failover, with the runs it took over).
func (h *harness) closeInterrupted(ctx context.Context, failover bool) (int, error) {
	if !failover {
		return h.rt.Recover(ctx, h.store)
	}
	runs, err := h.store.TakeOrphanRuns(ctx, "survivor", 1, 0)
	if err != nil {
		return 0, err
	}
	return h.rt.Failover(ctx, h.store, runs)
}
