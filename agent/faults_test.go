package agent_test

import (
	"context"
	"database/sql"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"herd/agent"
	"herd/agent/demo"
	"herd/agent/openai"
	"herd/agent/openai/openaitest"
	"herd/models"
)

// openAIModel is the real OpenAI provider pointed at a fake server. It
// always streams, so that a stream's faults reach the run rather than
// stream: auto's unstreamed retry (TestDelegationWithoutStreaming).
func openAIModel(t *testing.T, srv *openaitest.Server) *agent.Model {
	t.Helper()
	cfg := agent.ModelConfig{Name: "gpt", Provider: "openai", Model: "gpt-test", BaseURL: srv.URL(), APIKey: "k", TimeoutSeconds: 1, MaxRetries: new(1), Stream: "true"}
	p, err := openai.New(cfg, openai.WithHTTPClient(srv.Client()), openai.WithMaxRetryDelay(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return &agent.Model{Config: cfg, Provider: p}
}

func runEnd(t *testing.T, h *agent.Harness, runID string) map[string]any {
	t.Helper()
	es, _, _ := h.Store().Events(context.Background(), h.Thread(), models.EventFilter{RunID: runID, EventTypes: []string{agent.EventRunEnd}})
	if len(es) != 1 {
		t.Fatalf("%d run.end events", len(es))
	}
	c, _ := agent.DecodeContent(es[0].Content)
	return c
}

// TestProviderFaults drives the lead through the real OpenAI provider
// against a server that fails in each way a provider does: the run fails
// with the provider's reason, writes its end and leaks nothing.
func TestProviderFaults(t *testing.T) {
	cases := []struct {
		name  string
		reply openaitest.Reply
		want  string
	}{
		{"stream cut short", openaitest.Reply{Chunks: []string{"Hel", "lo"}, End: openaitest.EndCut, After: 2}, "cut short"},
		{"connection dropped", openaitest.Reply{Chunks: []string{"Hel", "lo"}, End: openaitest.EndAbort, After: 2}, "llm provider"},
		{"garbage chunk", openaitest.Reply{Chunks: []string{"a"}, End: openaitest.EndMalformed, After: 1}, "llm provider"},
		{"in-stream error", openaitest.Reply{Chunks: []string{"a"}, End: openaitest.EndError, After: 1, Error: "overloaded"}, "overloaded"},
		{"hang", openaitest.Reply{Chunks: []string{"a"}, End: openaitest.EndHang, After: 1}, "timed out"},
		{"500 after retries", openaitest.Fail(500, "upstream exploded"), "upstream exploded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := openaitest.NewServer(t)
			srv.SetFallback(func(openaitest.ChatRequest) openaitest.Reply { return c.reply })
			h := agent.NewHarness(t, agent.HarnessConfig{Models: []*agent.Model{openAIModel(t, srv)}})
			t.Cleanup(srv.Close) // before the harness's leak check
			start := time.Now()
			st := h.Run("hello")
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the run took %v to fail", d)
			}
			r := h.RunRow(st.RunID)
			if r.Status != models.RunFailed || !strings.Contains(r.Error, c.want) {
				t.Errorf("run %s %q, want failed with %q", r.Status, r.Error, c.want)
			}
			if end := runEnd(t, h, st.RunID); end["status"] != models.RunFailed {
				t.Errorf("run.end %v", end)
			}
		})
	}
}

// TestSubagentProviderFault: a subagent whose provider fails mid-stream
// fails alone; the lead gets its failed ToolMessage and answers.
func TestSubagentProviderFault(t *testing.T) {
	srv := openaitest.NewServer(t,
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: agent.ToolTask, Args: `{"description":"look","prompt":"look around","subagent_type":"general-purpose"}`}},
			Usage: &openaitest.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}},
		openaitest.Reply{Chunks: []string{"partial"}, End: openaitest.EndCut, After: 2},
		openaitest.Text("The subagent failed; here is what I know."),
	)
	h := agent.NewHarness(t, agent.HarnessConfig{Models: []*agent.Model{openAIModel(t, srv)}})
	t.Cleanup(srv.Close) // before the harness's leak check
	st := h.Run("delegate please")
	md := agent.MessageMetadata(t, h.ToolMessages()["call_1"])
	if md.Status != agent.StatusFailed || !strings.Contains(md.Error, "cut short") {
		t.Errorf("subagent %+v, want failed: cut short", md)
	}
	if r := h.RunRow(st.RunID); r.Status != models.RunCompleted {
		t.Errorf("run %s %q, want completed", r.Status, r.Error)
	}
	// The subagent was offered no task tool: no recursion, even for real providers.
	for _, req := range srv.Requests()[1:2] {
		for _, tool := range req.Chat.Tools {
			if tool.Function.Name == agent.ToolTask {
				t.Error("the subagent was offered task")
			}
		}
	}
}

// faultSwitch injects write failures into the harness's database from a
// second connection, as a full disk or a locked file would: every insert
// into run_events and messages fails while the switch is on.
type faultSwitch struct{ db *sql.DB }

func newFaultSwitch(t *testing.T, h *agent.Harness) *faultSwitch {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+h.DBPath()+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		"CREATE TABLE herd_fault (x)",
		"CREATE TRIGGER herd_fault_events BEFORE INSERT ON run_events WHEN EXISTS (SELECT 1 FROM herd_fault) BEGIN SELECT RAISE(ABORT, 'injected write fault'); END",
		"CREATE TRIGGER herd_fault_messages BEFORE INSERT ON messages WHEN EXISTS (SELECT 1 FROM herd_fault) BEGIN SELECT RAISE(ABORT, 'injected write fault'); END",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return &faultSwitch{db: db}
}

func (f *faultSwitch) set(on bool) {
	if on {
		f.db.Exec("INSERT INTO herd_fault VALUES (1)")
	} else {
		f.db.Exec("DELETE FROM herd_fault")
	}
}

// TestDatabaseFaults: writes failing for a while are retried and the run
// completes with every record once; writes failing for good refuse the
// run with nothing half-written.
func TestDatabaseFaults(t *testing.T) {
	backoff := []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	demoLLM := demo.New(agent.ModelConfig{Name: "demo", Model: "demo", LatencyMS: 30})

	t.Run("transient", func(t *testing.T) {
		h := agent.NewHarness(t, agent.HarnessConfig{Backoff: backoff, Models: []*agent.Model{agent.TestModel("demo", demoLLM)}})
		faults := newFaultSwitch(t, h)
		st := h.Start("Compare:\n- alpha\n- beta")
		time.Sleep(60 * time.Millisecond)
		faults.set(true)
		time.Sleep(250 * time.Millisecond)
		faults.set(false)
		h.Wait()
		if r := h.RunRow(st.RunID); r.Status != models.RunCompleted {
			t.Fatalf("run %s %q after a transient fault", r.Status, r.Error)
		}
		recs, _ := h.Store().Since(context.Background(), h.Thread(), 0, 100000)
		for i, r := range recs {
			if r.Seq() != int64(i+1) {
				t.Fatalf("seq %d at %d: gap or duplicate after retries", r.Seq(), i)
			}
		}
		if h.Retries() == 0 {
			t.Error("no write was retried: the fault missed the run")
		}
		if n := len(h.ToolMessages()); n != 2 {
			t.Errorf("%d ToolMessages, want 2", n)
		}
	})

	t.Run("permanent", func(t *testing.T) {
		h := agent.NewHarness(t, agent.HarnessConfig{Backoff: backoff[:2], Models: []*agent.Model{agent.TestModel("demo", demoLLM)}})
		faults := newFaultSwitch(t, h)
		faults.set(true)
		_, err := h.Runtime().Start(context.Background(), agent.StartRequest{ThreadID: h.Thread(), UserID: "u1", Content: "hello"})
		if err == nil || !strings.Contains(err.Error(), "injected write fault") {
			t.Fatalf("Start under a permanent fault: %v", err)
		}
		if _, ok := h.Runtime().ActiveRun(h.Thread()); ok {
			t.Error("a refused run is still active")
		}
		runs, _ := h.Store().Runs(context.Background(), h.Thread())
		msgs, _ := h.Store().Messages(context.Background(), h.Thread())
		if last, _ := h.Store().LastSeq(context.Background(), h.Thread()); len(runs) != 0 || len(msgs) != 0 || last != 0 {
			t.Errorf("half-written: %d runs, %d messages, last_seq %d", len(runs), len(msgs), last)
		}
		faults.set(false)
		h.Run("hello again") // the thread works once the database does
	})
}

// logLines is a slog handler that keeps each line's level and message and
// tells seen when a message holds "task end".
type logLines struct {
	mu    sync.Mutex
	lines []string
	seen  chan struct{}
	once  sync.Once
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logLines) WithGroup(string) slog.Handler            { return l }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.lines = append(l.lines, r.Level.String()+" "+r.Message)
	l.mu.Unlock()
	if strings.Contains(r.Message, "task end") {
		l.once.Do(func() { close(l.seen) })
	}
	return nil
}

func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// TestTaskEndLoggedOnlyWhenLost: a task's end (with its ToolMessage) is
// written while the database fails. Held up by a storage fault (another
// process holds the write lock) past the run's wait, the writer keeps it
// and commits it once the lock goes: no error is logged, and the end and
// its ToolMessage are there once. Refused by the database for good, it is
// lost, and that is logged as an error.
func TestTaskEndLoggedOnlyWhenLost(t *testing.T) {
	backoff := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}
	for _, c := range []struct {
		name string
		// fault starts the fault and returns its end.
		fault    func(t *testing.T, h *agent.Harness) (end func())
		wantKept bool
	}{
		{"held by a lock, kept", holdWriteLock, true},
		{"refused, lost", func(t *testing.T, h *agent.Harness) func() {
			f := newFaultSwitch(t, h)
			f.set(true)
			return func() { f.set(false) }
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := &logLines{seen: make(chan struct{})}
			subCalled, subDone, leadGoesOn := make(chan struct{}), make(chan struct{}), make(chan struct{})
			llm := agent.LLMFunc(func(ctx context.Context, req agent.Request, _ func(string)) (agent.Response, error) {
				if !agent.IsLead(req) {
					close(subCalled)
					select {
					case <-subDone:
					case <-ctx.Done():
						return agent.Response{}, ctx.Err()
					}
					return agent.Response{CallID: "sub", Text: "the answer"}, nil
				}
				if slices.ContainsFunc(req.Messages, func(m agent.Message) bool { return m.Type == agent.TypeTool }) {
					select {
					case <-leadGoesOn:
					case <-ctx.Done():
						return agent.Response{}, ctx.Err()
					}
					return agent.Response{CallID: "lead-2", Text: "done"}, nil
				}
				args := `{"description":"look","prompt":"look","subagent_type":"general-purpose"}`
				return agent.Response{CallID: "lead-1", ToolCalls: []agent.ToolCall{{ID: "call-1", Name: agent.ToolTask, Args: []byte(args)}}}, nil
			})
			h := agent.NewHarness(t, agent.HarnessConfig{Backoff: backoff, Logger: slog.New(log), PersistTimeout: 300 * time.Millisecond,
				Models: []*agent.Model{agent.TestModel("scripted", llm)}})
			st := h.Start("look")
			<-subCalled
			end := c.fault(t, h)
			close(subDone)
			select {
			case <-log.seen:
			case <-time.After(30 * time.Second):
				t.Fatalf("the task's end was never written; log: %q", log.all())
			}
			end()
			close(leadGoesOn)
			h.Wait()

			var errs []string
			for _, l := range log.all() {
				if strings.HasPrefix(l, "ERROR") && strings.Contains(l, "task end") {
					errs = append(errs, l)
				}
			}
			ends := 0
			for _, e := range h.Events("call-1") {
				if e.EventType == agent.EventSubagentEnd {
					ends++
				}
			}
			_, msg := h.ToolMessages()["call-1"]
			if c.wantKept {
				if len(errs) != 0 || ends != 1 || !msg {
					t.Errorf("kept through the fault: errors %q, %d task ends, ToolMessage %v; want none, 1, true", errs, ends, msg)
				}
				if r := h.RunRow(st.RunID); r.Status != models.RunCompleted {
					t.Errorf("run %s %q", r.Status, r.Error)
				}
				return
			}
			if len(errs) != 1 || ends != 0 || msg {
				t.Errorf("refused: errors %q, %d task ends, ToolMessage %v; want one error, 0, false", errs, ends, msg)
			}
		})
	}
}

// holdWriteLock takes the database's write lock from another connection,
// as another process would, and returns its release.
func holdWriteLock(t *testing.T, h *agent.Harness) func() {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+h.DBPath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
			t.Error(err)
		}
		conn.Close()
	}
}
