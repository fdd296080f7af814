package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"herd/agent"
	"herd/agent/openai/openaitest"
	"herd/agent/tools"
)

// toolRequest is a request that offers one tool, as every lead turn does.
func toolRequest() agent.Request {
	req := hello()
	req.Tools = []tools.Spec{{Name: "ls", Description: "list files", Parameters: json.RawMessage(`{"type":"object"}`)}}
	return req
}

// logBuffer is a concurrency-safe log sink for asserting what was logged.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newModeFake(t *testing.T, cfg agent.ModelConfig, logs *logBuffer, replies ...openaitest.Reply) (*Provider, *openaitest.Server) {
	t.Helper()
	checkLeaks(t)
	srv := openaitest.NewServer(t, replies...)
	cfg.Name, cfg.Model, cfg.BaseURL, cfg.APIKey = "test-model", "gpt-test", srv.URL(), "sk-test"
	var h slog.Handler = slog.DiscardHandler
	if logs != nil {
		h = slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	p, err := New(cfg, WithHTTPClient(srv.Client()), WithMaxRetryDelay(time.Millisecond), WithLogger(slog.New(h)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p, srv
}

// TestStreamFalse: a model with stream: false makes plain calls, tool calls
// and usage included, and hands the whole answer to onDelta once.
func TestStreamFalse(t *testing.T) {
	usage := &openaitest.Usage{PromptTokens: 30, CompletionTokens: 7, TotalTokens: 37}
	p, srv := newModeFake(t, agent.ModelConfig{Stream: StreamFalse}, nil,
		openaitest.Reply{Chunks: []string{"Let me ", "look."}, ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "ls", Args: `{"path":"."}`}}, Usage: usage},
		openaitest.Reply{Chunks: []string{"Done ", "here."}},
	)
	var c collect
	got, err := p.Complete(context.Background(), toolRequest(), c.onDelta)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	want := agent.Response{CallID: got.CallID, Text: "Let me look.", Model: "gpt-test",
		Usage:     &agent.Usage{InputTokens: 30, OutputTokens: 7, TotalTokens: 37},
		ToolCalls: []agent.ToolCall{{ID: "call_1", Name: "ls", Args: json.RawMessage(`{"path":"."}`)}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if !reflect.DeepEqual(c.deltas, []string{"Let me look."}) {
		t.Errorf("deltas = %q, want the whole answer once", c.deltas)
	}
	// Without tools, too; no usage reported stays nil.
	got, err = p.Complete(context.Background(), hello(), nil)
	if err != nil || got.Text != "Done here." || got.Usage != nil {
		t.Fatalf("second call = %+v, %v", got, err)
	}
	for i, r := range srv.Requests() {
		if r.Chat.Stream || r.Chat.StreamOptions != nil {
			t.Errorf("request %d: stream %v, stream_options %+v; want neither (OpenAI rejects stream_options without stream)", i, r.Chat.Stream, r.Chat.StreamOptions)
		}
	}
}

// streamedToolsFail answers like a server that cannot stream tool calls.
func streamedToolsFail(req openaitest.ChatRequest) openaitest.Reply {
	if req.Stream && len(req.Tools) > 0 {
		return openaitest.Fail(http.StatusInternalServerError, "streaming with tools is not supported")
	}
	return openaitest.Reply{Chunks: []string{"ok ", "plain"}, Usage: &openaitest.Usage{PromptTokens: 5, CompletionTokens: 2, TotalTokens: 7}}
}

// TestStreamAutoFallsBack: stream: auto retries a failed streamed tool call
// without streaming, remembers that for the model (one warning), and still
// streams calls without tools.
func TestStreamAutoFallsBack(t *testing.T) {
	var logs logBuffer
	p, srv := newModeFake(t, agent.ModelConfig{MaxRetries: new(0)}, &logs)
	srv.SetFallback(streamedToolsFail)

	for i := range 2 {
		var c collect
		got, err := p.Complete(context.Background(), toolRequest(), c.onDelta)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if got.Text != "ok plain" || got.Usage == nil || got.Usage.TotalTokens != 7 {
			t.Errorf("call %d = %+v, want the plain answer with its usage", i, got)
		}
		if !reflect.DeepEqual(c.deltas, []string{"ok plain"}) {
			t.Errorf("call %d deltas = %q", i, c.deltas)
		}
	}
	var streamed []bool
	for _, r := range srv.Requests() {
		streamed = append(streamed, r.Chat.Stream)
	}
	// The first call tries to stream, then not; the second goes plain at once.
	if want := []bool{true, false, false}; !reflect.DeepEqual(streamed, want) {
		t.Errorf("requests streamed %v, want %v", streamed, want)
	}
	if n := strings.Count(logs.String(), "now calls tools without streaming"); n != 1 {
		t.Errorf("fallback logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("fallback not logged at warn:\n%s", logs.String())
	}

	// A call without tools still streams.
	if _, err := p.Complete(context.Background(), hello(), nil); err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests(); !r[len(r)-1].Chat.Stream {
		t.Error("a call without tools was not streamed")
	}
}

// TestStreamAutoFallbackCases: which streamed failures fall back.
func TestStreamAutoFallbackCases(t *testing.T) {
	plain := openaitest.Text("plain")
	tests := []struct {
		name      string
		stream    string
		first     openaitest.Reply
		wantPlain bool
	}{
		{"error event before content", StreamAuto, openaitest.Reply{End: openaitest.EndError, After: 1, Error: "tool streaming unsupported"}, true},
		{"400 on the streamed request", StreamAuto, openaitest.Fail(400, "stream with tools unsupported"), true},
		{"error after text: not retried", StreamAuto, openaitest.Reply{Chunks: []string{"part"}, End: openaitest.EndError, After: 2, Error: "overloaded"}, false},
		{"401 is not about streaming", StreamAuto, openaitest.Fail(401, "bad key"), false},
		{"429 is not about streaming", StreamAuto, openaitest.Fail(429, "slow down"), false},
		{"stream: true never falls back", StreamTrue, openaitest.Fail(400, "stream with tools unsupported"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, srv := newModeFake(t, agent.ModelConfig{Stream: agent.StreamMode(tt.stream), MaxRetries: new(0)}, nil, tt.first, plain)
			got, err := p.Complete(context.Background(), toolRequest(), nil)
			n := len(srv.Requests())
			if !tt.wantPlain {
				if err == nil || n != 1 {
					t.Fatalf("got %+v, %v after %d requests; want the streamed error, no fallback", got, err, n)
				}
				return
			}
			if err != nil || got.Text != "plain" || n != 2 || srv.Requests()[1].Chat.Stream {
				t.Fatalf("got %+v, %v after %d requests; want the plain retry's answer", got, err, n)
			}
		})
	}
}

// TestStreamAutoFallbackFailsToo: when the plain retry fails as well, the
// error tells both, and the model is not marked non-streaming.
func TestStreamAutoFallbackFailsToo(t *testing.T) {
	p, srv := newModeFake(t, agent.ModelConfig{MaxRetries: new(0)}, nil,
		openaitest.Fail(400, "streamed: no"), openaitest.Fail(400, "plain: no either"), openaitest.Text("again"))
	_, err := p.Complete(context.Background(), toolRequest(), nil)
	if !errors.Is(err, agent.ErrProvider) || !strings.Contains(err.Error(), "streamed: no; retried without streaming: HTTP 400 Bad Request: plain: no either") {
		t.Fatalf("err = %v", err)
	}
	if strings.Count(err.Error(), "llm provider") != 1 {
		t.Errorf("err = %q repeats its prefix", err)
	}
	if _, err := p.Complete(context.Background(), toolRequest(), nil); err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests(); !r[2].Chat.Stream {
		t.Error("a failed fallback marked the model non-streaming")
	}
}

func TestStreamSetting(t *testing.T) {
	_, err := New(agent.ModelConfig{Name: "m", Stream: "yes"})
	if err == nil || !strings.Contains(err.Error(), `stream must be auto, true or false, got "yes"`) {
		t.Errorf("err = %v", err)
	}
}
