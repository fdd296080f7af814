package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"herd/agent"
	"herd/agent/openai"
	"herd/agent/openai/openaitest"
	"herd/models"
)

// tightWindow is the context window of the fake model below, in its own
// tokens: three bytes of the request body each, denser than herd's
// estimate of four, so that only calibration from reported usage keeps
// the requests within it.
const tightWindow = 4096

func tokensOf(req openaitest.ChatRequest) int {
	b, _ := json.Marshal(req) // what the fake decoded of the body
	return len(b) / 3
}

// tightServer is an OpenAI fake with a small context window: a request
// over it is refused as OpenAI refuses it (400 context_length_exceeded);
// every other request is answered by reply and reports its prompt tokens.
func tightServer(t *testing.T, reply func(openaitest.ChatRequest) openaitest.Reply) *openaitest.Server {
	srv := openaitest.NewServer(t)
	srv.SetFallback(func(req openaitest.ChatRequest) openaitest.Reply {
		n := tokensOf(req)
		if n > tightWindow {
			return openaitest.ContextLengthExceeded(tightWindow, n)
		}
		r := reply(req)
		r.Usage = &openaitest.Usage{PromptTokens: int64(n), CompletionTokens: 50, TotalTokens: int64(n + 50)}
		return r
	})
	return srv
}

func tightModel(t *testing.T, srv *openaitest.Server, window int) *agent.Model {
	t.Helper()
	cfg := agent.ModelConfig{Name: "local", Provider: "openai", Model: "llama", BaseURL: srv.URL(), APIKey: "x",
		TimeoutSeconds: 10, MaxRetries: new(0), ContextWindow: window, MaxOutputTokens: 256}
	p, err := openai.New(cfg, openai.WithHTTPClient(srv.Client()), openai.WithMaxRetryDelay(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return &agent.Model{Config: cfg, Provider: p}
}

// refused lists the requests over the fake's window.
func refused(srv *openaitest.Server) []int {
	var out []int
	for _, r := range srv.Requests() {
		if n := tokensOf(r.Chat); n > tightWindow {
			out = append(out, n)
		}
	}
	return out
}

// TestLongThreadFitsTheWindow: a thread that outgrows its model's context
// window keeps getting answers: each request fits (the fake would refuse
// one that did not), leaves the oldest turns out while keeping the system
// prompt and the latest message, and the answer carries the note that
// turns were left out.
func TestLongThreadFitsTheWindow(t *testing.T) {
	var n atomic.Int32
	srv := tightServer(t, func(openaitest.ChatRequest) openaitest.Reply {
		return openaitest.Text(fmt.Sprintf("Answer %d. ", n.Add(1)), strings.Repeat("Some detail. ", 50))
	})
	h := agent.NewHarness(t, agent.HarnessConfig{Models: []*agent.Model{tightModel(t, srv, tightWindow)}})
	t.Cleanup(srv.Close)

	const runs = 10
	var last agent.Started
	for i := range runs {
		last = h.Run(fmt.Sprintf("Question %d: %s", i, strings.Repeat("please consider this. ", 60)))
		if r := h.RunRow(last.RunID); r.Status != models.RunCompleted {
			t.Fatalf("run %d %s: %q", i, r.Status, r.Error)
		}
	}
	if over := refused(srv); len(over) > 0 {
		t.Errorf("requests of %v tokens sent over a window of %d", over, tightWindow)
	}
	reqs := srv.Requests()
	final := reqs[len(reqs)-1].Chat
	if final.Messages[0].Role != "system" || !strings.HasPrefix(final.Messages[len(final.Messages)-1].Text(), fmt.Sprintf("Question %d:", runs-1)) {
		t.Errorf("last request %s ... %s, want the system prompt and the latest question", final.Messages[0].Role, final.Messages[len(final.Messages)-1].Text()[:12])
	}
	for _, m := range final.Messages {
		if strings.HasPrefix(m.Text(), "Question 0:") {
			t.Error("the oldest question was sent in the last request")
		}
	}
	if final.Messages[1].Role != "user" {
		t.Errorf("history starts with %s, want a user message", final.Messages[1].Role)
	}

	msgs, err := h.Store().Messages(context.Background(), h.Thread())
	if err != nil {
		t.Fatal(err)
	}
	answer := msgs[len(msgs)-1]
	if !strings.HasPrefix(answer.Content, fmt.Sprintf("Answer %d.", runs)) {
		t.Errorf("last message %q, want the last answer", answer.Content[:20])
	}
	var kw struct {
		Trimmed *struct{ Sent, Total int } `json:"context_trimmed"`
	}
	if err := json.Unmarshal(answer.AdditionalKwargs, &kw); err != nil || kw.Trimmed == nil {
		t.Fatalf("answer kwargs %s, want the note", answer.AdditionalKwargs)
	}
	// The thread's turns: a question and an answer a run, the latest
	// answer not yet written.
	if kw.Trimmed.Total != 2*runs-1 || kw.Trimmed.Sent >= kw.Trimmed.Total || kw.Trimmed.Sent < 1 {
		t.Errorf("note %+v, want fewer than all %d turns", *kw.Trimmed, 2*runs-1)
	}
	if first := msgs[1]; first.Type == agent.TypeAI && len(first.AdditionalKwargs) > 0 {
		t.Errorf("first answer %s carries a note; nothing was left out then", first.AdditionalKwargs)
	}
}

// TestLongSubagentFitsTheWindow: a subagent whose tool steps outgrow the
// window leaves its oldest steps out, keeps its task prompt, and finishes.
func TestLongSubagentFitsTheWindow(t *testing.T) {
	const steps = 12
	var sub atomic.Int32
	srv := tightServer(t, func(req openaitest.ChatRequest) openaitest.Reply {
		lead := false
		for _, tool := range req.Tools {
			lead = lead || tool.Function.Name == agent.ToolTask
		}
		last := req.Messages[len(req.Messages)-1]
		switch {
		case lead && last.Role == "tool":
			return openaitest.Text("The subagent wrote the files.")
		case lead:
			return openaitest.Reply{Chunks: []string{"Delegating."}, ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: agent.ToolTask,
				Args: `{"description":"write","prompt":"write the files","subagent_type":"general-purpose"}`}}}
		}
		i := sub.Add(1)
		if i > steps {
			return openaitest.Text("Wrote them all.")
		}
		args, _ := json.Marshal(map[string]string{"path": fmt.Sprintf("f%d.txt", i), "content": strings.Repeat("data ", 400)})
		return openaitest.Reply{ToolCalls: []openaitest.ToolCall{{ID: fmt.Sprintf("w%d", i), Name: "write_file", Args: string(args)}}}
	})
	h := agent.NewHarness(t, agent.HarnessConfig{Models: []*agent.Model{tightModel(t, srv, tightWindow)}})
	t.Cleanup(srv.Close)

	st := h.Run("delegate the writing")
	if r := h.RunRow(st.RunID); r.Status != models.RunCompleted {
		t.Fatalf("run %s %q", r.Status, r.Error)
	}
	if md := agent.MessageMetadata(t, h.ToolMessages()["call_1"]); md.Status != agent.StatusCompleted {
		t.Fatalf("subagent %+v, want completed", md)
	}
	if over := refused(srv); len(over) > 0 {
		t.Errorf("requests of %v tokens sent over a window of %d", over, tightWindow)
	}
	// The subagent's final request: its system prompt and task prompt,
	// then only its latest steps.
	var final openaitest.ChatRequest
	for _, r := range srv.Requests() {
		if len(r.Chat.Messages) > 1 && r.Chat.Messages[1].Text() == "write the files" {
			final = r.Chat
		}
	}
	if len(final.Messages) < 4 || final.Messages[0].Role != "system" {
		t.Fatalf("subagent's last request has %d messages", len(final.Messages))
	}
	if strings.Contains(string(mustJSON(t, final)), `f1.txt`) {
		t.Error("the first step was still sent in the subagent's last request")
	}
	if !strings.Contains(string(mustJSON(t, final)), fmt.Sprintf("f%d.txt", steps)) {
		t.Error("the latest step was not sent")
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTooLongForTheWindow: a message that cannot fit even alone fails the
// run saying so, without a request; a model whose window is not
// configured fails in plain words that say what to set, with the
// provider's own.
func TestTooLongForTheWindow(t *testing.T) {
	for _, tt := range []struct {
		name         string
		window       int
		wantRequests int
		wantError    []string
	}{
		{"minimum over the window", tightWindow, 0, []string{"does not fit the context window", "context_window 4096"}},
		{"window unknown", 0, 1, []string{"set context_window for this model", "maximum context length is 4096 tokens"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := tightServer(t, func(openaitest.ChatRequest) openaitest.Reply { return openaitest.Text("never") })
			h := agent.NewHarness(t, agent.HarnessConfig{Models: []*agent.Model{tightModel(t, srv, tt.window)}})
			t.Cleanup(srv.Close)
			st := h.Run(strings.Repeat("A very long paste. ", 1500))
			r := h.RunRow(st.RunID)
			if r.Status != models.RunFailed {
				t.Fatalf("run %s, want failed", r.Status)
			}
			for _, want := range tt.wantError {
				if !strings.Contains(r.Error, want) {
					t.Errorf("error %q lacks %q", r.Error, want)
				}
			}
			if n := len(srv.Requests()); n != tt.wantRequests {
				t.Errorf("%d requests, want %d", n, tt.wantRequests)
			}
		})
	}
}
