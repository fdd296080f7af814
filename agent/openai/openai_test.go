package openai

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"herd/agent"
	"herd/agent/openai/openaitest"
	"herd/agent/tools"
)

// checkLeaks fails the test if it leaves goroutines behind. It runs
// as a cleanup registered before the fake server's, so it checks after the
// server has closed.
func checkLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// newFake starts a fake server scripted with replies and a provider
// pointed at it, with retries backing off for a millisecond at most.
func newFake(t *testing.T, configure func(*agent.ModelConfig), replies ...openaitest.Reply) (*Provider, *openaitest.Server) {
	t.Helper()
	checkLeaks(t)
	srv := openaitest.NewServer(t, replies...)
	cfg := agent.ModelConfig{Name: "test-model", Provider: "openai", Model: "gpt-test", BaseURL: srv.URL(), APIKey: "sk-test"}
	if configure != nil {
		configure(&cfg)
	}
	p, err := New(cfg,
		WithHTTPClient(srv.Client()),
		WithMaxRetryDelay(time.Millisecond),
		WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p, srv
}

func hello() agent.Request {
	return agent.Request{Messages: []agent.Message{{Type: agent.TypeHuman, Content: "hello"}}}
}

// collect records the deltas a call streams.
type collect struct{ deltas []string }

func (c *collect) onDelta(s string) { c.deltas = append(c.deltas, s) }

func TestCompleteSuccess(t *testing.T) {
	pathArgs := `{"path": "notes/todo.md", "limit": 10}`
	tests := []struct {
		name      string
		configure func(*agent.ModelConfig)
		reply     openaitest.Reply
		wantText  string
		wantCalls []agent.ToolCall
		wantUsage *agent.Usage
		wantModel string
		// wantIncludeUsage is whether stream_options.include_usage was sent.
		wantIncludeUsage bool
	}{
		{
			name: "streamed text",
			reply: openaitest.Reply{
				Chunks: []string{"Hel", "lo, ", "wörld ✓"},
				Usage:  &openaitest.Usage{PromptTokens: 12, CompletionTokens: 4, TotalTokens: 16},
			},
			wantText:         "Hello, wörld ✓",
			wantUsage:        &agent.Usage{InputTokens: 12, OutputTokens: 4, TotalTokens: 16},
			wantModel:        "gpt-test",
			wantIncludeUsage: true,
		},
		{
			name:             "no usage reported",
			reply:            openaitest.Text("fine"),
			wantText:         "fine",
			wantModel:        "gpt-test",
			wantIncludeUsage: true,
		},
		{
			name: "cached tokens",
			reply: openaitest.Reply{
				Chunks: []string{"cached"},
				Usage:  &openaitest.Usage{PromptTokens: 1000, CompletionTokens: 20, TotalTokens: 1020, CachedTokens: 768},
			},
			wantText:         "cached",
			wantUsage:        &agent.Usage{InputTokens: 1000, OutputTokens: 20, TotalTokens: 1020, CacheReadTokens: 768},
			wantModel:        "gpt-test",
			wantIncludeUsage: true,
		},
		{
			name: "reported model name",
			reply: openaitest.Reply{
				Chunks: []string{"hi"},
				Model:  "gpt-test-2025-04-14",
				Usage:  &openaitest.Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4},
			},
			wantText:         "hi",
			wantUsage:        &agent.Usage{InputTokens: 3, OutputTokens: 1, TotalTokens: 4},
			wantModel:        "gpt-test-2025-04-14",
			wantIncludeUsage: true,
		},
		{
			name:      "stream_usage false asks for no usage",
			configure: func(c *agent.ModelConfig) { c.StreamUsage = new(false) },
			reply: openaitest.Reply{
				Chunks: []string{"no ", "usage"},
				Usage:  &openaitest.Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4},
			},
			wantText:  "no usage",
			wantModel: "gpt-test",
		},
		{
			name: "one tool call with arguments split across chunks",
			reply: openaitest.Reply{
				ToolCalls: []openaitest.ToolCall{{ID: "call_a", Name: "read_file", Args: pathArgs}},
				Usage:     &openaitest.Usage{PromptTokens: 50, CompletionTokens: 9, TotalTokens: 59},
			},
			wantCalls:        []agent.ToolCall{{ID: "call_a", Name: "read_file", Args: json.RawMessage(pathArgs)}},
			wantUsage:        &agent.Usage{InputTokens: 50, OutputTokens: 9, TotalTokens: 59},
			wantModel:        "gpt-test",
			wantIncludeUsage: true,
		},
		{
			name: "text then parallel tool calls",
			reply: openaitest.Reply{
				Chunks: []string{"Delegating ", "two tasks."},
				ToolCalls: []openaitest.ToolCall{
					{ID: "call_1", Name: "task", Args: `{"description": "résumé A", "prompt": "Summarise A"}`},
					{ID: "call_2", Name: "task", Args: `{"description": "B", "prompt": "Summarise B"}`},
				},
			},
			wantText: "Delegating two tasks.",
			wantCalls: []agent.ToolCall{
				{ID: "call_1", Name: "task", Args: json.RawMessage(`{"description": "résumé A", "prompt": "Summarise A"}`)},
				{ID: "call_2", Name: "task", Args: json.RawMessage(`{"description": "B", "prompt": "Summarise B"}`)},
			},
			wantModel:        "gpt-test",
			wantIncludeUsage: true,
		},
		{
			name: "parallel tool calls interleaved by index",
			reply: openaitest.Reply{
				InterleaveToolCalls: true,
				ToolCalls: []openaitest.ToolCall{
					{ID: "call_x", Name: "ls", Args: `{"path": "src/deep/dir"}`},
					{ID: "call_y", Name: "bash", Args: `{"command": "echo interleaved"}`},
					{ID: "call_z", Name: "read_file", Args: `{"path": "README.md"}`},
				},
			},
			wantCalls: []agent.ToolCall{
				{ID: "call_x", Name: "ls", Args: json.RawMessage(`{"path": "src/deep/dir"}`)},
				{ID: "call_y", Name: "bash", Args: json.RawMessage(`{"command": "echo interleaved"}`)},
				{ID: "call_z", Name: "read_file", Args: json.RawMessage(`{"path": "README.md"}`)},
			},
			wantModel:        "gpt-test",
			wantIncludeUsage: true,
		},
		{
			name:             "an answer cut at the output limit",
			reply:            openaitest.Reply{Chunks: []string{"Once upon ", "a time"}, FinishReason: "length"},
			wantText:         "Once upon a time",
			wantModel:        "gpt-test",
			wantIncludeUsage: true,
		},
		{
			name: "empty arguments become an empty object",
			reply: openaitest.Reply{
				ToolCalls: []openaitest.ToolCall{{ID: "call_e", Name: "ls", Args: ""}},
			},
			wantCalls:        []agent.ToolCall{{ID: "call_e", Name: "ls", Args: json.RawMessage(`{}`)}},
			wantModel:        "gpt-test",
			wantIncludeUsage: true,
		},
		{
			name: "invalid arguments are kept verbatim as a JSON string",
			reply: openaitest.Reply{
				ToolCalls:    []openaitest.ToolCall{{ID: "call_t", Name: "write_file", Args: `{"path": "a.txt", "content": "trunc`}},
				FinishReason: "length",
			},
			wantCalls:        []agent.ToolCall{{ID: "call_t", Name: "write_file", Args: json.RawMessage(`"{\"path\": \"a.txt\", \"content\": \"trunc"`)}},
			wantModel:        "gpt-test",
			wantIncludeUsage: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, srv := newFake(t, tt.configure, tt.reply)
			var c collect
			got, err := p.Complete(context.Background(), hello(), c.onDelta)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if got.Text != tt.wantText {
				t.Errorf("Text = %q, want %q", got.Text, tt.wantText)
			}
			if want := tt.reply.Chunks; !reflect.DeepEqual(c.deltas, want) {
				t.Errorf("deltas = %q, want %q", c.deltas, want)
			}
			if !reflect.DeepEqual(got.ToolCalls, tt.wantCalls) {
				t.Errorf("ToolCalls = %s, want %s", mustMarshal(t, got.ToolCalls), mustMarshal(t, tt.wantCalls))
			}
			if !reflect.DeepEqual(got.Usage, tt.wantUsage) {
				t.Errorf("Usage = %+v, want %+v", got.Usage, tt.wantUsage)
			}
			if got.Model != tt.wantModel {
				t.Errorf("Model = %q, want %q", got.Model, tt.wantModel)
			}
			if _, err := uuid.Parse(got.CallID); err != nil {
				t.Errorf("CallID = %q, not a UUID: %v", got.CallID, err)
			}
			// finish_reason "length": the answer stopped at the output limit.
			if want := tt.reply.FinishReason == "length"; got.Cut != want {
				t.Errorf("Cut = %v, want %v", got.Cut, want)
			}

			reqs := srv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("server got %d requests, want 1", len(reqs))
			}
			chat := reqs[0].Chat
			if !chat.Stream {
				t.Error("request did not ask for a stream")
			}
			gotInclude := chat.StreamOptions != nil && chat.StreamOptions.IncludeUsage
			if gotInclude != tt.wantIncludeUsage {
				t.Errorf("stream_options.include_usage sent = %v, want %v", gotInclude, tt.wantIncludeUsage)
			}
			if !tt.wantIncludeUsage && strings.Contains(string(reqs[0].Body), "stream_options") {
				t.Errorf("request body has stream_options: %s", reqs[0].Body)
			}
		})
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	return string(b)
}

func TestRequestBody(t *testing.T) {
	p, srv := newFake(t, nil, openaitest.Text("done"))
	schema := `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`
	req := agent.Request{
		Model: "gpt-override",
		Messages: []agent.Message{
			{Type: agent.TypeSystem, Content: "You are the lead."},
			{Type: agent.TypeHuman, Content: "List the files."},
			{Type: agent.TypeAI, Content: "Looking.", ToolCalls: []agent.ToolCall{
				{ID: "call_1", Name: "ls", Args: json.RawMessage(`{"path":"."}`)},
				{ID: "call_2", Name: "read_file", Args: json.RawMessage(`"{\"path\": \"a"`)},
			}},
			{Type: agent.TypeTool, ToolCallID: "call_1", Name: "ls", Content: "a.txt"},
			{Type: agent.TypeTool, ToolCallID: "call_2", Name: "read_file", Content: "error: invalid arguments"},
			{Type: agent.TypeAI, ToolCalls: []agent.ToolCall{{ID: "call_3", Name: "ls", Args: json.RawMessage(`{}`)}}},
			{Type: agent.TypeTool, ToolCallID: "call_3", Name: "ls", Content: "a.txt"},
			{Type: agent.TypeAI, Content: ""},
		},
		Tools: []tools.Spec{
			{Name: "ls", Description: "List a directory.", Parameters: json.RawMessage(schema)},
			{Name: "noop"},
		},
	}
	if _, err := p.Complete(context.Background(), req, nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server got %d requests, want 1", len(reqs))
	}
	chat := reqs[0].Chat
	if chat.Model != "gpt-override" {
		t.Errorf("model = %q, want the request's gpt-override", chat.Model)
	}

	type msg struct {
		Role, Text, ToolCallID string
		HasContent             bool
		ToolCalls              []openaitest.RequestToolCall
	}
	var got []msg
	for _, m := range chat.Messages {
		got = append(got, msg{Role: m.Role, Text: m.Text(), ToolCallID: m.ToolCallID, HasContent: len(m.Content) > 0, ToolCalls: m.ToolCalls})
	}
	fn := func(id, name, args string) openaitest.RequestToolCall {
		return openaitest.RequestToolCall{ID: id, Type: "function", Function: openaitest.FunctionCall{Name: name, Arguments: args}}
	}
	want := []msg{
		{Role: "system", Text: "You are the lead.", HasContent: true},
		{Role: "user", Text: "List the files.", HasContent: true},
		{Role: "assistant", Text: "Looking.", HasContent: true, ToolCalls: []openaitest.RequestToolCall{
			fn("call_1", "ls", `{"path":"."}`),
			// Arguments the model got wrong go back exactly as it wrote them.
			fn("call_2", "read_file", `{"path": "a`),
		}},
		{Role: "tool", Text: "a.txt", ToolCallID: "call_1", HasContent: true},
		{Role: "tool", Text: "error: invalid arguments", ToolCallID: "call_2", HasContent: true},
		{Role: "assistant", ToolCalls: []openaitest.RequestToolCall{fn("call_3", "ls", `{}`)}},
		{Role: "tool", Text: "a.txt", ToolCallID: "call_3", HasContent: true},
		{Role: "assistant", HasContent: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("messages:\n got %+v\nwant %+v", got, want)
	}

	if len(chat.Tools) != 2 {
		t.Fatalf("got %d tools, want 2", len(chat.Tools))
	}
	ls := chat.Tools[0]
	if ls.Type != "function" || ls.Function.Name != "ls" || ls.Function.Description != "List a directory." {
		t.Errorf("tool 0 = %+v, want function ls with its description", ls)
	}
	var gotSchema, wantSchema any
	if err := json.Unmarshal(ls.Function.Parameters, &gotSchema); err != nil {
		t.Fatalf("tool parameters %s: %v", ls.Function.Parameters, err)
	}
	_ = json.Unmarshal([]byte(schema), &wantSchema)
	if !reflect.DeepEqual(gotSchema, wantSchema) {
		t.Errorf("tool parameters = %s, want %s", ls.Function.Parameters, schema)
	}
	if noop := chat.Tools[1]; noop.Function.Name != "noop" || noop.Function.Parameters != nil {
		t.Errorf("tool 1 = %+v, want noop with no parameters", noop)
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q, want Bearer sk-test", got)
	}
}

func TestBadRequestNeverSent(t *testing.T) {
	tests := []struct {
		name string
		req  agent.Request
		want string
	}{
		{"unknown message type", agent.Request{Messages: []agent.Message{{Type: "robot", Content: "hi"}}}, `unknown type "robot"`},
		{"parameters not an object", agent.Request{Messages: hello().Messages, Tools: []tools.Spec{{Name: "ls", Parameters: json.RawMessage(`[1]`)}}}, `tool "ls"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, srv := newFake(t, nil)
			_, err := p.Complete(context.Background(), tt.req, nil)
			if !errors.Is(err, agent.ErrProvider) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want an ErrProvider naming %s", err, tt.want)
			}
			if n := len(srv.Requests()); n != 0 {
				t.Errorf("server got %d requests, want 0", n)
			}
		})
	}
}

func TestCallIDsAreFresh(t *testing.T) {
	p, srv := newFake(t, nil, openaitest.Text("one"))
	srv.Enqueue(openaitest.Text("two"))
	first, err := p.Complete(context.Background(), hello(), nil)
	if err != nil {
		t.Fatalf("first call: %v", err)
	}
	second, err := p.Complete(context.Background(), hello(), nil)
	if err != nil {
		t.Fatalf("second call: %v", err)
	}
	if first.CallID == second.CallID {
		t.Errorf("both calls got CallID %q; the server's completion id repeats, the call id must not", first.CallID)
	}
	if second.Text != "two" {
		t.Errorf("second Text = %q, want the enqueued two", second.Text)
	}
	if first.CallID == openaitest.CompletionID {
		t.Errorf("CallID is the provider's completion id %q", first.CallID)
	}
}

func TestToolCallWithoutID(t *testing.T) {
	p, _ := newFake(t, nil, openaitest.Reply{ToolCalls: []openaitest.ToolCall{
		{Name: "ls", Args: `{"path":"."}`},
		{Name: "ls", Args: `{"path":"src"}`},
	}})
	got, err := p.Complete(context.Background(), hello(), nil)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if len(got.ToolCalls) != 2 {
		t.Fatalf("got %d tool calls, want 2", len(got.ToolCalls))
	}
	a, b := got.ToolCalls[0], got.ToolCalls[1]
	if !strings.HasPrefix(a.ID, "call_") || !strings.HasPrefix(b.ID, "call_") || a.ID == b.ID {
		t.Errorf("ids = %q, %q; want distinct made-up call_ ids", a.ID, b.ID)
	}
	if string(a.Args) != `{"path":"."}` || string(b.Args) != `{"path":"src"}` {
		t.Errorf("args = %s, %s", a.Args, b.Args)
	}
}

func TestFakeFallback(t *testing.T) {
	p, srv := newFake(t, nil, openaitest.Text("scripted"))
	srv.SetFallback(func(req openaitest.ChatRequest) openaitest.Reply {
		return openaitest.Text("echo: " + req.Messages[len(req.Messages)-1].Text())
	})
	for _, want := range []string{"scripted", "echo: hello", "echo: hello"} {
		got, err := p.Complete(context.Background(), hello(), nil)
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		if got.Text != want {
			t.Errorf("Text = %q, want %q", got.Text, want)
		}
	}
}

func TestHTTPErrors(t *testing.T) {
	retryAfter := func(v string) http.Header { return http.Header{"Retry-After": {v}} }
	tests := []struct {
		name      string
		configure func(*agent.ModelConfig)
		replies   []openaitest.Reply
		wantErr   []string // substrings of the error; nil: success
		wantText  string
		wantTries int
		// wantMinDur is the Retry-After the call must wait for; it also
		// lifts the retry delay cap so that the wait is allowed.
		wantMinDur time.Duration
	}{
		{
			name:      "500 then success is retried",
			replies:   []openaitest.Reply{openaitest.Fail(500, "The server had an error"), openaitest.Text("recovered")},
			wantText:  "recovered",
			wantTries: 2,
		},
		{
			name:      "500 forever stops after max_retries",
			replies:   repeat(openaitest.Fail(500, "The server had an error while processing your request"), 5),
			wantErr:   []string{"HTTP 500 Internal Server Error", "The server had an error while processing your request", "after 3 attempts"},
			wantTries: 3,
		},
		{
			name:      "max_retries 0 tries once",
			configure: func(c *agent.ModelConfig) { c.MaxRetries = new(0) },
			replies:   repeat(openaitest.Fail(503, "overloaded"), 3),
			wantErr:   []string{"HTTP 503", "overloaded"},
			wantTries: 1,
		},
		{
			name:      "max_retries 4",
			configure: func(c *agent.ModelConfig) { c.MaxRetries = new(4) },
			replies:   repeat(openaitest.Fail(502, "bad gateway"), 6),
			wantErr:   []string{"HTTP 502", "after 5 attempts"},
			wantTries: 5,
		},
		{
			name: "429 waits for a small Retry-After",
			replies: []openaitest.Reply{
				{Status: 429, Error: "Rate limit reached for gpt-test", Header: retryAfter("1")},
				openaitest.Text("after the wait"),
			},
			wantText:   "after the wait",
			wantTries:  2,
			wantMinDur: time.Second,
		},
		{
			name: "429 with a long Retry-After fails at once",
			replies: []openaitest.Reply{
				{Status: 429, Error: "Rate limit reached for gpt-test", Header: retryAfter("3600")},
				openaitest.Text("never"),
			},
			wantErr:   []string{"HTTP 429 Too Many Requests", "Rate limit reached for gpt-test"},
			wantTries: 1,
		},
		{
			name:      "400 is not retried",
			replies:   []openaitest.Reply{openaitest.Fail(400, "Invalid value for 'model': 'nope'."), openaitest.Text("never")},
			wantErr:   []string{"HTTP 400 Bad Request", "Invalid value for 'model': 'nope'."},
			wantTries: 1,
		},
		{
			name:      "error as a plain string",
			replies:   []openaitest.Reply{{Status: 404, ErrorBody: `{"error":"model \"llama9\" not found, try pulling it first"}`}},
			wantErr:   []string{"HTTP 404 Not Found", `model "llama9" not found, try pulling it first`},
			wantTries: 1,
		},
		{
			name:      "error as detail",
			replies:   []openaitest.Reply{{Status: 422, ErrorBody: `{"detail":"messages: field required"}`}},
			wantErr:   []string{"HTTP 422", "messages: field required"},
			wantTries: 1,
		},
		{
			name:      "non-JSON error body",
			configure: func(c *agent.ModelConfig) { c.MaxRetries = new(0) },
			replies:   []openaitest.Reply{{Status: 502, ErrorBody: "<html><body>\n<h1>502 Bad Gateway</h1>\n</body></html>"}},
			wantErr:   []string{"HTTP 502 Bad Gateway", "<html><body> <h1>502 Bad Gateway</h1> </body></html>"},
			wantTries: 1,
		},
		{
			name:      "empty error body",
			replies:   []openaitest.Reply{{Status: 401, ErrorBody: " "}},
			wantErr:   []string{"HTTP 401 Unauthorized", "(empty error body)"},
			wantTries: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			srv := openaitest.NewServer(t, tt.replies...)
			cfg := agent.ModelConfig{Name: "test-model", Model: "gpt-test", BaseURL: srv.URL(), APIKey: "sk-test"}
			if tt.configure != nil {
				tt.configure(&cfg)
			}
			maxDelay := time.Millisecond
			if tt.wantMinDur > 0 {
				maxDelay = 5 * time.Second
			}
			p, err := New(cfg, WithHTTPClient(srv.Client()), WithMaxRetryDelay(maxDelay),
				WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatalf("New: %v", err)
			}

			var c collect
			start := time.Now()
			got, err := p.Complete(context.Background(), hello(), c.onDelta)
			elapsed := time.Since(start)

			if n := len(srv.Requests()); n != tt.wantTries {
				t.Errorf("server got %d requests, want %d", n, tt.wantTries)
			}
			if left := srv.Pending(); left != len(tt.replies)-tt.wantTries {
				t.Errorf("%d scripted replies left, want %d", left, len(tt.replies)-tt.wantTries)
			}
			if elapsed < tt.wantMinDur {
				t.Errorf("call took %s, want at least %s (Retry-After)", elapsed, tt.wantMinDur)
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Complete: %v", err)
				}
				if got.Text != tt.wantText {
					t.Errorf("Text = %q, want %q", got.Text, tt.wantText)
				}
				return
			}
			if !errors.Is(err, agent.ErrProvider) {
				t.Fatalf("err = %v, want an ErrProvider", err)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %q, want it to contain %q", err, want)
				}
			}
			if !reflect.DeepEqual(got, agent.Response{}) {
				t.Errorf("a failed call returned %+v, want a zero Response", got)
			}
			if len(c.deltas) != 0 {
				t.Errorf("a failed call streamed %q", c.deltas)
			}
		})
	}
}

func repeat(r openaitest.Reply, n int) []openaitest.Reply {
	out := make([]openaitest.Reply, n)
	for i := range out {
		out[i] = r
	}
	return out
}

func TestBrokenStreams(t *testing.T) {
	usage := &openaitest.Usage{PromptTokens: 5, CompletionTokens: 2, TotalTokens: 7}
	// Chunks of the replies below: role, "one ", "two ", "three", finish, usage.
	text := []string{"one ", "two ", "three"}
	tests := []struct {
		name       string
		reply      openaitest.Reply
		wantErr    string
		wantDeltas []string
	}{
		{
			name:       "connection closed cleanly mid-text",
			reply:      openaitest.Reply{Chunks: text, Usage: usage, End: openaitest.EndCut, After: 3},
			wantErr:    "stream cut short: the connection closed before [DONE] and without a finish_reason, after 3 chunks",
			wantDeltas: text[:2],
		},
		{
			name:       "connection dropped",
			reply:      openaitest.Reply{Chunks: text, Usage: usage, End: openaitest.EndAbort, After: 2},
			wantErr:    "stream cut short after 2 chunks: unexpected EOF",
			wantDeltas: text[:1],
		},
		{
			name:    "headers then nothing",
			reply:   openaitest.Reply{Chunks: text, End: openaitest.EndCut, After: 0},
			wantErr: "stream cut short: the connection closed before [DONE] and without a finish_reason, after 0 chunks",
		},
		{
			name:       "malformed chunk",
			reply:      openaitest.Reply{Chunks: text, Usage: usage, End: openaitest.EndMalformed, After: 2},
			wantErr:    "malformed stream chunk after 2 chunks",
			wantDeltas: text[:1],
		},
		{
			name:       "error event mid-stream",
			reply:      openaitest.Reply{Chunks: text, End: openaitest.EndError, After: 3, Error: "The model is overloaded"},
			wantErr:    "error event in stream after 3 chunks: The model is overloaded",
			wantDeltas: text[:2],
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A retry would have a reply to use: the test fails if one happens.
			p, srv := newFake(t, nil, tt.reply, openaitest.Text("retried"))
			var c collect
			got, err := p.Complete(context.Background(), hello(), c.onDelta)
			if !errors.Is(err, agent.ErrProvider) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want an ErrProvider containing %q", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, agent.Response{}) {
				t.Errorf("a broken stream returned %+v, want a zero Response, not a partial success", got)
			}
			if !reflect.DeepEqual(c.deltas, tt.wantDeltas) {
				t.Errorf("deltas = %q, want %q", c.deltas, tt.wantDeltas)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("server got %d requests, want 1: a stream that has started is never retried", n)
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	p, srv := newFake(t, func(c *agent.ModelConfig) { c.TimeoutSeconds = 1 },
		openaitest.Reply{Chunks: []string{"thinking", " hard"}, End: openaitest.EndHang, After: 2},
		openaitest.Text("retried"))
	var c collect
	start := time.Now()
	_, err := p.Complete(context.Background(), hello(), c.onDelta)
	elapsed := time.Since(start)
	if !errors.Is(err, agent.ErrProvider) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrProvider and context.DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "timed out after 1s") {
		t.Errorf("err = %q, want it to say it timed out after 1s", err)
	}
	if elapsed < time.Second || elapsed > 3*time.Second {
		t.Errorf("call took %s, want about the 1s timeout", elapsed)
	}
	if want := []string{"thinking"}; !reflect.DeepEqual(c.deltas, want) {
		t.Errorf("deltas = %q, want %q before the hang", c.deltas, want)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("server got %d requests, want 1", n)
	}
}

func TestCancel(t *testing.T) {
	tests := []struct {
		name  string
		reply openaitest.Reply
		// cancelOnDelta cancels when the first delta arrives; otherwise
		// the test cancels after a short while.
		cancelOnDelta bool
	}{
		{
			name:          "mid-stream",
			reply:         openaitest.Reply{Chunks: []string{"partial", " more"}, End: openaitest.EndHang, After: 3},
			cancelOnDelta: true,
		},
		{
			name:  "before the first chunk",
			reply: openaitest.Reply{End: openaitest.EndHang, After: 0},
		},
		{
			name:  "during a retry wait",
			reply: openaitest.Reply{Status: 503, Error: "busy", Header: http.Header{"Retry-After": {"20"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			srv := openaitest.NewServer(t, tt.reply, openaitest.Text("retried"))
			// A generous retry cap, so the retry wait really waits.
			p, err := New(agent.ModelConfig{Name: "test-model", Model: "gpt-test", BaseURL: srv.URL()},
				WithHTTPClient(srv.Client()), WithMaxRetryDelay(time.Minute),
				WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var canceledAt atomic.Int64
			var deltas []string
			onDelta := func(s string) {
				deltas = append(deltas, s)
				if tt.cancelOnDelta {
					canceledAt.Store(time.Now().UnixNano())
					cancel()
				}
			}
			if !tt.cancelOnDelta {
				timer := time.AfterFunc(100*time.Millisecond, func() {
					canceledAt.Store(time.Now().UnixNano())
					cancel()
				})
				defer timer.Stop()
			}

			_, err = p.Complete(ctx, hello(), onDelta)
			if !errors.Is(err, context.Canceled) || !errors.Is(err, agent.ErrProvider) {
				t.Fatalf("err = %v, want ErrProvider and context.Canceled", err)
			}
			if at := canceledAt.Load(); at == 0 {
				t.Fatal("Complete returned before the cancel")
			} else if lag := time.Since(time.Unix(0, at)); lag > time.Second {
				t.Errorf("Complete returned %s after the cancel, want promptly", lag)
			}
			if tt.cancelOnDelta && len(deltas) != 1 {
				t.Errorf("deltas = %q, want none after the cancel", deltas)
			}
		})
	}
}

func TestConnectionRefusedIsRetried(t *testing.T) {
	checkLeaks(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	base := closed.URL + "/v1"
	closed.Close()

	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	var dials atomic.Int32
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		dials.Add(1)
		return transport.RoundTrip(r)
	})}
	p, err := New(agent.ModelConfig{Name: "test-model", Model: "gpt-test", BaseURL: base, MaxRetries: new(2)},
		WithHTTPClient(client), WithMaxRetryDelay(time.Millisecond),
		WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = p.Complete(context.Background(), hello(), nil)
	if !errors.Is(err, agent.ErrProvider) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("err = %v, want ErrProvider and ECONNREFUSED", err)
	}
	if !strings.Contains(err.Error(), "after 3 attempts") {
		t.Errorf("err = %q, want the attempt count", err)
	}
	if n := dials.Load(); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestAPIKey(t *testing.T) {
	const secret = "sk-proj-Zq8XsecretSECRET1234"
	t.Setenv("HERD_TEST_OPENAI_KEY", secret)
	refs := []struct{ name, ref string }{
		{"dollar variable", "$HERD_TEST_OPENAI_KEY"},
		{"braced variable", "${HERD_TEST_OPENAI_KEY}"},
		{"literal key", secret},
	}
	for _, tt := range refs {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			srv := openaitest.NewServer(t,
				openaitest.Text("authorised"),
				// Servers echo keys back; the error must not.
				openaitest.Fail(401, "Incorrect API key provided: "+secret+". You can find your API key at https://platform.openai.com/account/api-keys."),
				openaitest.Reply{Chunks: []string{"x"}, End: openaitest.EndError, After: 1, Error: "bad key " + secret},
			)
			p, err := New(agent.ModelConfig{Name: "test-model", Model: "gpt-test", BaseURL: srv.URL(), APIKey: tt.ref, MaxRetries: new(0)},
				WithHTTPClient(srv.Client()), WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if _, err := p.Complete(context.Background(), hello(), nil); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer "+secret {
				t.Errorf("Authorization = %q, want the expanded key", got)
			}
			for _, wantMsg := range []string{"Incorrect API key provided: [redacted]", "bad key [redacted]"} {
				_, err = p.Complete(context.Background(), hello(), nil)
				if err == nil {
					t.Fatal("Complete succeeded, want an error")
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("err = %q contains the API key", err)
				}
				if !strings.Contains(err.Error(), wantMsg) || !errors.Is(err, agent.ErrProvider) {
					t.Errorf("err = %q, want an ErrProvider with %q", err, wantMsg)
				}
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	t.Setenv("HERD_TEST_EMPTY_KEY", "")
	tests := []struct {
		name string
		cfg  agent.ModelConfig
		opts []Option
		want string
	}{
		{"unset key variable", agent.ModelConfig{Name: "m", APIKey: "$HERD_TEST_UNSET_KEY_VAR"}, nil, "environment variable HERD_TEST_UNSET_KEY_VAR is not set"},
		{"empty key variable", agent.ModelConfig{Name: "m", APIKey: "${HERD_TEST_EMPTY_KEY}"}, nil, "environment variable HERD_TEST_EMPTY_KEY is not set"},
		{"base_url without scheme", agent.ModelConfig{Name: "m", BaseURL: "localhost:11434/v1"}, nil, `base_url "localhost:11434/v1" is not an http(s) URL`},
		{"negative max_retries", agent.ModelConfig{Name: "m", MaxRetries: new(-1)}, nil, "max_retries must not be negative"},
		{"zero retry delay", agent.ModelConfig{Name: "m"}, []Option{WithMaxRetryDelay(0)}, "max retry delay must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg, tt.opts...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
			if err != nil && !strings.Contains(err.Error(), `model "m"`) {
				t.Errorf("err = %q, want it to name the model", err)
			}
		})
	}
}

// TestOpenAIWireQuirks feeds hand-written streams for what OpenAI-compatible
// servers do differently from OpenAI.
func TestWireQuirks(t *testing.T) {
	const (
		role   = `data: {"id":"c1","model":"m-1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n"
		finish = `data: {"id":"c1","model":"m-1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
		done   = "data: [DONE]\n\n"
	)
	tests := []struct {
		name        string
		contentType string // default text/event-stream
		body        string
		wantErr     string
		wantText    string
		wantModel   string
		wantUsage   *agent.Usage
		wantCalls   []agent.ToolCall
	}{
		{
			// [DONE] is proof enough that the answer is whole.
			name:      "[DONE] without a finish_reason",
			body:      role + `data: {"id":"c1","model":"m-1","choices":[{"index":0,"delta":{"content":"whole"}}]}` + "\n\n" + done,
			wantText:  "whole",
			wantModel: "m-1",
		},
		{
			name: "keep-alive comments and no space after data:",
			body: ": keep-alive\n\n" + role + `data:{"id":"c1","model":"m-1","choices":[{"index":0,"delta":{"content":"tight"}}]}` + "\n\n" +
				": ping\n\n" + finish + done,
			wantText:  "tight",
			wantModel: "m-1",
		},
		{
			name:      "no model reported",
			body:      `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"anon"},"finish_reason":"stop"}]}` + "\n\n" + done,
			wantText:  "anon",
			wantModel: "gpt-test",
		},
		{
			name: "usage on every chunk, the last one counts",
			body: `data: {"id":"c1","model":"m-1","choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}` + "\n\n" +
				`data: {"id":"c1","model":"m-1","choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}` + "\n\n" + done,
			wantText:  "ab",
			wantModel: "m-1",
			wantUsage: &agent.Usage{InputTokens: 9, OutputTokens: 2, TotalTokens: 11},
		},
		{
			name: "every call numbered 0, name and id repeated",
			body: role +
				`data: {"id":"c1","model":"m-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"ls","arguments":"{\"path\":"}}]}}]}` + "\n\n" +
				`data: {"id":"c1","model":"m-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"ls","arguments":"\".\"}"}}]}}]}` + "\n\n" +
				`data: {"id":"c1","model":"m-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"bash","arguments":"{\"command\":\"pwd\"}"}}]}}]}` + "\n\n" +
				`data: {"id":"c1","model":"m-1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" + done,
			wantModel: "m-1",
			wantCalls: []agent.ToolCall{
				{ID: "call_a", Name: "ls", Args: json.RawMessage(`{"path":"."}`)},
				{ID: "call_b", Name: "bash", Args: json.RawMessage(`{"command":"pwd"}`)},
			},
		},
		{
			// LiteLLM and some gateways name the event; OpenAI does not.
			name:    "an error event with an event name inside a 200 stream",
			body:    role + "event: error\ndata: {\"error\":{\"message\":\"rate limit upstream\",\"type\":\"server_error\"}}\n\n",
			wantErr: "error event in stream after 1 chunks: rate limit upstream",
		},
		{
			name:    "an error event after text, then [DONE]",
			body:    role + `data: {"id":"c1","model":"m-1","choices":[{"index":0,"delta":{"content":"par"}}]}` + "\n\n" + `data: {"error":{"message":"context length exceeded"}}` + "\n\n" + done,
			wantErr: "error event in stream after 2 chunks: context length exceeded",
		},
		{
			name:        "a JSON error with status 200",
			contentType: "application/json",
			body:        `{"error":{"message":"upstream provider failed","type":"proxy_error"}}`,
			wantErr:     "expected an event stream, got a JSON body: upstream provider failed",
		},
		{
			name:        "stream: true ignored",
			contentType: "application/json; charset=utf-8",
			body:        `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"not streamed"}}]}`,
			wantErr:     `expected an event stream, got a JSON body: {"id":"c1","object":"chat.completion"`,
		},
		{
			name:    "no stream at all",
			body:    "\n",
			wantErr: "stream cut short: the connection closed before [DONE] and without a finish_reason, after 0 chunks",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", cmp.Or(tt.contentType, "text/event-stream"))
				_, _ = w.Write([]byte(tt.body))
			}))
			t.Cleanup(srv.Close)
			p, err := New(agent.ModelConfig{Name: "test-model", Model: "gpt-test", BaseURL: srv.URL},
				WithHTTPClient(srv.Client()), WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			got, err := p.Complete(context.Background(), hello(), nil)
			if tt.wantErr != "" {
				if !errors.Is(err, agent.ErrProvider) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want an ErrProvider containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if got.Text != tt.wantText || got.Model != tt.wantModel {
				t.Errorf("Text, Model = %q, %q; want %q, %q", got.Text, got.Model, tt.wantText, tt.wantModel)
			}
			if !reflect.DeepEqual(got.Usage, tt.wantUsage) {
				t.Errorf("Usage = %+v, want %+v", got.Usage, tt.wantUsage)
			}
			if !reflect.DeepEqual(got.ToolCalls, tt.wantCalls) {
				t.Errorf("ToolCalls = %s, want %s", mustMarshal(t, got.ToolCalls), mustMarshal(t, tt.wantCalls))
			}
		})
	}
}

func TestIgnoresAmbientEnvironment(t *testing.T) {
	// openai.NewClient would pick these up; a local server must never get
	// a key meant for api.openai.com.
	t.Setenv("OPENAI_API_KEY", "sk-ambient-key")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	p, srv := newFake(t, func(c *agent.ModelConfig) { c.APIKey = "" }, openaitest.Text("local"))
	got, err := p.Complete(context.Background(), hello(), nil)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if got.Text != "local" {
		t.Errorf("Text = %q, want local", got.Text)
	}
	if auth := srv.Requests()[0].Header.Get("Authorization"); auth != "" {
		t.Errorf("Authorization = %q, want none without an api_key", auth)
	}
}

func TestDefaultBaseURL(t *testing.T) {
	var got string
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.URL.String()
		return nil, errors.New("not sent")
	})}
	p, err := New(agent.ModelConfig{Name: "test-model", MaxRetries: new(0)},
		WithHTTPClient(client), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, _ = p.Complete(context.Background(), hello(), nil)
	if want := "https://api.openai.com/v1/chat/completions"; got != want {
		t.Errorf("request URL = %q, want %q", got, want)
	}
}

// TestMaxOutputTokens: max_output_tokens caps the answer as max_tokens on
// a compatible server and as max_completion_tokens on OpenAI's own API
// (which refuses max_tokens for its reasoning models); unset, no cap is
// sent.
func TestMaxOutputTokens(t *testing.T) {
	for _, tt := range []struct {
		name             string
		max              int
		openAIHost       bool
		wantMax, wantMCT int64
	}{
		{"unset", 0, false, 0, 0},
		{"compatible server", 512, false, 512, 0},
		{"api.openai.com", 512, true, 0, 512},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, srv := newFake(t, func(c *agent.ModelConfig) { c.MaxOutputTokens = tt.max }, openaitest.Text("ok"))
			p.completionTokens = tt.openAIHost
			if _, err := p.Complete(context.Background(), hello(), nil); err != nil {
				t.Fatal(err)
			}
			got := srv.Requests()[0].Chat
			if got.MaxTokens != tt.wantMax || got.MaxCompletionTokens != tt.wantMCT {
				t.Errorf("max_tokens %d, max_completion_tokens %d; want %d, %d", got.MaxTokens, got.MaxCompletionTokens, tt.wantMax, tt.wantMCT)
			}
		})
	}
	if !isOpenAIHost("https://API.openai.com/v1") || isOpenAIHost("http://localhost:11434/v1") {
		t.Error("isOpenAIHost")
	}
}

// TestContextLengthExceeded: a refusal for length is marked
// agent.ErrContextLength, keeps the provider's words, and is not taken
// for a server that cannot stream (no plain retry under stream: auto).
func TestContextLengthExceeded(t *testing.T) {
	for _, tt := range []struct {
		name  string
		reply openaitest.Reply
		want  bool
	}{
		{"openai", openaitest.ContextLengthExceeded(8192, 9000), true},
		{"vllm", openaitest.Fail(http.StatusBadRequest, "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens"), true},
		{"other 400", openaitest.Fail(http.StatusBadRequest, "unknown parameter: foo"), false},
		{"500 that mentions it", openaitest.Fail(http.StatusInternalServerError, "context length"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, srv := newFake(t, func(c *agent.ModelConfig) { c.MaxRetries = new(0) }, tt.reply)
			req := hello()
			req.Tools = []tools.Spec{{Name: "ls", Parameters: json.RawMessage(`{"type":"object"}`)}}
			_, err := p.Complete(context.Background(), req, nil)
			if err == nil || errors.Is(err, agent.ErrContextLength) != tt.want {
				t.Fatalf("err %v; ErrContextLength %v, want %v", err, errors.Is(err, agent.ErrContextLength), tt.want)
			}
			if tt.want && (!strings.Contains(err.Error(), "maximum context length") || strings.HasSuffix(err.Error(), " ")) {
				t.Errorf("err %q, want the provider's words", err)
			}
			if tt.want && len(srv.Requests()) != 1 {
				t.Errorf("%d requests, want no retry without streaming", len(srv.Requests()))
			}
		})
	}
}
