package agent

import (
	"context"
	"database/sql"
	_ "github.com/mattn/go-sqlite3"
	"strings"
	"testing"
	"time"

	"herd/agent/openaitest"
	"herd/models"
)

// openAIModel is the real OpenAI provider pointed at a fake server.
func openAIModel(t *testing.T, srv *openaitest.Server) *Model {
	t.Helper()
	cfg := ModelConfig{Name: "gpt", Provider: "openai", Model: "gpt-test", BaseURL: srv.URL(), APIKey: "k", TimeoutSeconds: 1, MaxRetries: ptr(1)}
	p, err := NewOpenAI(cfg, WithOpenAIHTTPClient(srv.Client()), WithOpenAIMaxRetryDelay(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return &Model{Config: cfg, Provider: p}
}

func (h *harness) runEnd(runID string) map[string]any {
	h.t.Helper()
	es, _, _ := h.store.Events(context.Background(), h.thread, models.EventFilter{RunID: runID, EventTypes: []string{EventRunEnd}})
	if len(es) != 1 {
		h.t.Fatalf("%d run.end events", len(es))
	}
	c, _ := DecodeContent(es[0].Content)
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
			h := newHarness(t, harnessConfig{models: []*Model{openAIModel(t, srv)}})
			t.Cleanup(srv.Close) // before the harness's leak check
			start := time.Now()
			st := h.run("hello")
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the run took %v to fail", d)
			}
			r := h.runRow(st.RunID)
			if r.Status != models.RunFailed || !strings.Contains(r.Error, c.want) {
				t.Errorf("run %s %q, want failed with %q", r.Status, r.Error, c.want)
			}
			if end := h.runEnd(st.RunID); end["status"] != models.RunFailed {
				t.Errorf("run.end %v", end)
			}
		})
	}
}

// TestSubagentProviderFault: a subagent whose provider fails mid-stream
// fails alone; the lead gets its failed ToolMessage and answers.
func TestSubagentProviderFault(t *testing.T) {
	srv := openaitest.NewServer(t,
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: ToolTask, Args: `{"description":"look","prompt":"look around","subagent_type":"general-purpose"}`}},
			Usage: &openaitest.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}},
		openaitest.Reply{Chunks: []string{"partial"}, End: openaitest.EndCut, After: 2},
		openaitest.Text("The subagent failed; here is what I know."),
	)
	h := newHarness(t, harnessConfig{models: []*Model{openAIModel(t, srv)}})
	t.Cleanup(srv.Close) // before the harness's leak check
	st := h.run("delegate please")
	md := metadata(t, h.toolMessages()["call_1"])
	if md.Status != StatusFailed || !strings.Contains(md.Error, "cut short") {
		t.Errorf("subagent %+v, want failed: cut short", md)
	}
	if r := h.runRow(st.RunID); r.Status != models.RunCompleted {
		t.Errorf("run %s %q, want completed", r.Status, r.Error)
	}
	// The subagent was offered no task tool: no recursion, even for real providers.
	for _, req := range srv.Requests()[1:2] {
		for _, tool := range req.Chat.Tools {
			if tool.Function.Name == ToolTask {
				t.Error("the subagent was offered task")
			}
		}
	}
}

// faultSwitch injects write failures into the harness's database from a
// second connection, as a full disk or a locked file would: every insert
// into run_events and messages fails while the switch is on.
type faultSwitch struct{ db *sql.DB }

func newFaultSwitch(t *testing.T, h *harness) *faultSwitch {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+h.dbPath+"?_busy_timeout=10000")
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
	demo := NewDemo(ModelConfig{Name: "demo", Model: "demo", LatencyMS: 30})

	t.Run("transient", func(t *testing.T) {
		h := newHarness(t, harnessConfig{backoff: backoff, models: []*Model{model("demo", demo)}})
		faults := newFaultSwitch(t, h)
		st := h.start("Compare:\n- alpha\n- beta")
		time.Sleep(60 * time.Millisecond)
		faults.set(true)
		time.Sleep(250 * time.Millisecond)
		faults.set(false)
		h.wait()
		if r := h.runRow(st.RunID); r.Status != models.RunCompleted {
			t.Fatalf("run %s %q after a transient fault", r.Status, r.Error)
		}
		recs, _ := h.store.Since(context.Background(), h.thread, 0, 100000)
		for i, r := range recs {
			if r.Seq() != int64(i+1) {
				t.Fatalf("seq %d at %d: gap or duplicate after retries", r.Seq(), i)
			}
		}
		if h.retries.Load() == 0 {
			t.Error("no write was retried: the fault missed the run")
		}
		if n := len(h.toolMessages()); n != 2 {
			t.Errorf("%d ToolMessages, want 2", n)
		}
	})

	t.Run("permanent", func(t *testing.T) {
		h := newHarness(t, harnessConfig{backoff: backoff[:2], models: []*Model{model("demo", demo)}})
		faults := newFaultSwitch(t, h)
		faults.set(true)
		_, err := h.rt.Start(context.Background(), StartRequest{ThreadID: h.thread, UserID: "u1", Content: "hello"})
		if err == nil || !strings.Contains(err.Error(), "injected write fault") {
			t.Fatalf("Start under a permanent fault: %v", err)
		}
		if _, ok := h.rt.ActiveRun(h.thread); ok {
			t.Error("a refused run is still active")
		}
		runs, _ := h.store.Runs(context.Background(), h.thread)
		msgs, _ := h.store.Messages(context.Background(), h.thread)
		if last, _ := h.store.LastSeq(context.Background(), h.thread); len(runs) != 0 || len(msgs) != 0 || last != 0 {
			t.Errorf("half-written: %d runs, %d messages, last_seq %d", len(runs), len(msgs), last)
		}
		faults.set(false)
		h.run("hello again") // the thread works once the database does
	})
}
