package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"herd/agent"
	"herd/agent/anthropic/anthropictest"
	"herd/agent/tools"
)

// checkLeaks fails the test if it leaves goroutines behind. It runs as a
// cleanup registered before the fake server's, so it checks after the
// server has closed.
func checkLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// newFake starts a fake server scripted with replies and a provider
// pointed at it.
func newFake(t *testing.T, configure func(*agent.ModelConfig), replies ...anthropictest.Reply) (*Provider, *anthropictest.Server) {
	t.Helper()
	checkLeaks(t)
	srv := anthropictest.NewServer(t, replies...)
	cfg := agent.ModelConfig{Name: "claude", Provider: "anthropic", Model: "claude-test", BaseURL: srv.URL(), APIKey: "sk-ant-test-key", TimeoutSeconds: 5}
	if configure != nil {
		configure(&cfg)
	}
	p, err := New(cfg, WithHTTPClient(srv.Client()), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p, srv
}

func hello() agent.Request {
	return agent.Request{Messages: []agent.Message{{Type: agent.TypeHuman, Content: "hello"}}}
}

func n(v int64) *int64 { return &v }

// retryNow makes the SDK's retry wait a millisecond, as the API's own
// retry-after header would tell it how long to wait.
var retryNow = http.Header{"Retry-After-Ms": {"1"}}

func TestStreamedTextInOrder(t *testing.T) {
	p, srv := newFake(t, nil, anthropictest.Reply{Chunks: []string{"Hel", "lo, ", "wörld ✓"}, Model: "claude-test-20261130"})
	var deltas []string
	resp, err := p.Complete(context.Background(), hello(), func(s string) { deltas = append(deltas, s) })
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(deltas, "|"); got != "Hel|lo, |wörld ✓" {
		t.Errorf("deltas %q", got)
	}
	if resp.Text != "Hello, wörld ✓" || resp.Model != "claude-test-20261130" || resp.CallID == "" {
		t.Errorf("response %+v", resp)
	}
	if resp.Usage != nil {
		t.Errorf("usage %+v from a stream that reported none", resp.Usage)
	}
	req := srv.Requests()[0]
	if anthropictest.APIKey(req.Header) != "sk-ant-test-key" || req.Header.Get("anthropic-version") == "" {
		t.Errorf("headers %v", req.Header)
	}
	if m := req.Messages; m.Model != "claude-test" || m.MaxTokens != DefaultMaxTokens || !m.Stream || len(m.Messages) != 1 || m.Messages[0].Text() != "hello" {
		t.Errorf("request %s", req.Body)
	}
}

// TestCutAtMaxTokens: stop_reason "max_tokens" marks the answer cut
// (agent.Response.Cut), so the run offers Continue; "end_turn" does not.
func TestCutAtMaxTokens(t *testing.T) {
	for _, c := range []struct {
		reason string
		cut    bool
	}{{"max_tokens", true}, {"end_turn", false}} {
		p, _ := newFake(t, nil, anthropictest.Reply{Chunks: []string{"Once upon ", "a time"}, StopReason: c.reason})
		resp, err := p.Complete(context.Background(), hello(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Cut != c.cut || resp.Text != "Once upon a time" {
			t.Errorf("stop_reason %s: cut %v, text %q", c.reason, resp.Cut, resp.Text)
		}
	}
}

func TestParallelToolCalls(t *testing.T) {
	p, _ := newFake(t, nil, anthropictest.Reply{
		Chunks: []string{"Let me look."},
		ToolCalls: []anthropictest.ToolCall{
			{ID: "toolu_1", Name: "read_file", Input: `{"path": "a.md", "limit": 10}`},
			{ID: "toolu_2", Name: "read_file", Input: `{"path": "b.md"}`},
			{ID: "toolu_3", Name: "ls", Input: ``},
		},
	})
	resp, err := p.Complete(context.Background(), hello(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []agent.ToolCall{
		{ID: "toolu_1", Name: "read_file", Args: json.RawMessage(`{"path": "a.md", "limit": 10}`)},
		{ID: "toolu_2", Name: "read_file", Args: json.RawMessage(`{"path": "b.md"}`)},
		{ID: "toolu_3", Name: "ls", Args: json.RawMessage(`{}`)},
	}
	if len(resp.ToolCalls) != len(want) {
		t.Fatalf("tool calls %+v", resp.ToolCalls)
	}
	for i, w := range want {
		g := resp.ToolCalls[i]
		if g.ID != w.ID || g.Name != w.Name || string(g.Args) != string(w.Args) {
			t.Errorf("call %d: %s %s %s, want %s %s %s", i, g.ID, g.Name, g.Args, w.ID, w.Name, w.Args)
		}
	}
	if resp.Text != "Let me look." {
		t.Errorf("text %q", resp.Text)
	}
}

// TestRequestShape: system prompt and tools carry the cache breakpoints;
// tool calls and their results go back as tool_use and tool_result blocks,
// a batch of results in one user message.
func TestRequestShape(t *testing.T) {
	p, srv := newFake(t, func(c *agent.ModelConfig) { c.MaxOutputTokens = 1234 }, anthropictest.Text("ok"))
	req := agent.Request{
		Messages: []agent.Message{
			{Type: agent.TypeSystem, Content: "You are the lead."},
			{Type: agent.TypeHuman, Content: "look at two files"},
			{Type: agent.TypeAI, ToolCalls: []agent.ToolCall{
				{ID: "toolu_1", Name: "read_file", Args: json.RawMessage(`{"path":"a"}`)},
				{ID: "toolu_2", Name: "read_file", Args: json.RawMessage(`"not json {"`)},
			}},
			{Type: agent.TypeTool, ToolCallID: "toolu_1", Name: "read_file", Content: "A"},
			{Type: agent.TypeTool, ToolCallID: "toolu_2", Name: "read_file", Content: ""},
			{Type: agent.TypeHuman, Content: "and now?"},
		},
		Tools: []tools.Spec{
			{Name: "read_file", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`)},
			{Name: "ls", Description: "List.", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
		},
	}
	if _, err := p.Complete(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0].Messages
	if got.MaxTokens != 1234 {
		t.Errorf("max_tokens %d", got.MaxTokens)
	}
	if len(got.System) != 1 || got.System[0].Text != "You are the lead." || got.System[0].CacheControl == nil || got.System[0].CacheControl.Type != "ephemeral" {
		t.Errorf("system %+v", got.System)
	}
	if len(got.Tools) != 2 || got.Tools[0].CacheControl != nil || got.Tools[1].CacheControl == nil || got.Tools[1].CacheControl.Type != "ephemeral" {
		t.Errorf("tools %+v: want cache_control on the last tool only", got.Tools)
	}
	var schema map[string]any
	_ = json.Unmarshal(got.Tools[0].InputSchema, &schema)
	if schema["type"] != "object" || schema["additionalProperties"] != false || schema["properties"] == nil {
		t.Errorf("input_schema %s", got.Tools[0].InputSchema)
	}
	roles := []string{}
	for _, m := range got.Messages {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "user,assistant,user" {
		t.Fatalf("roles %v", roles)
	}
	a := got.Messages[1].Content
	if len(a) != 2 || a[0].Type != "tool_use" || a[0].ID != "toolu_1" || string(a[0].Input) != `{"path":"a"}` || string(a[1].Input) != `{}` {
		t.Errorf("assistant blocks %+v", a)
	}
	u := got.Messages[2].Content
	if len(u) != 3 || u[0].Type != "tool_result" || u[0].ToolUseID != "toolu_1" || u[1].ToolUseID != "toolu_2" || string(u[0].Content) != `[{"text":"A","type":"text"}]` || u[1].Content != nil || u[2].Type != "text" || u[2].Text != "and now?" {
		t.Errorf("user blocks %+v", u)
	}
}

func TestUsage(t *testing.T) {
	cases := []struct {
		name  string
		usage *anthropictest.Usage
		want  *agent.Usage
	}{
		{"none", nil, nil},
		{"no cache fields", &anthropictest.Usage{InputTokens: 100, OutputTokens: 20},
			&agent.Usage{InputTokens: 100, OutputTokens: 20, TotalTokens: 120}},
		{"cache zero", &anthropictest.Usage{InputTokens: 100, OutputTokens: 20, CacheReadInputTokens: n(0), CacheCreationInputTokens: n(0)},
			&agent.Usage{InputTokens: 100, OutputTokens: 20, TotalTokens: 120}},
		{"cache written", &anthropictest.Usage{InputTokens: 10, OutputTokens: 20, CacheReadInputTokens: n(0), CacheCreationInputTokens: n(1500)},
			&agent.Usage{InputTokens: 1510, OutputTokens: 20, TotalTokens: 1530}},
		{"cache read", &anthropictest.Usage{InputTokens: 10, OutputTokens: 20, CacheReadInputTokens: n(1500), CacheCreationInputTokens: n(40)},
			&agent.Usage{InputTokens: 1550, OutputTokens: 20, TotalTokens: 1570, CacheReadTokens: 1500}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, _ := newFake(t, nil, anthropictest.Reply{Chunks: []string{"hi"}, Usage: c.usage})
			resp, err := p.Complete(context.Background(), hello(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if (resp.Usage == nil) != (c.want == nil) || (c.want != nil && *resp.Usage != *c.want) {
				t.Errorf("usage %+v, want %+v", resp.Usage, c.want)
			}
		})
	}
}

func TestRetries(t *testing.T) {
	cases := []struct {
		name  string
		first anthropictest.Reply
	}{
		{"429 rate limited", anthropictest.Reply{Status: 429, Error: "Number of request tokens has exceeded your rate limit", Header: retryNow}},
		{"529 overloaded", anthropictest.Reply{Status: 529, Error: "Overloaded", Header: retryNow}},
		{"529 overloaded, backoff", anthropictest.Reply{Status: 529, Error: "Overloaded"}},
		{"500", anthropictest.Reply{Status: 500, Error: "Internal server error", Header: retryNow}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, srv := newFake(t, nil, c.first, anthropictest.Text("recovered"))
			resp, err := p.Complete(context.Background(), hello(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != "recovered" || len(srv.Requests()) != 2 {
				t.Errorf("text %q after %d requests", resp.Text, len(srv.Requests()))
			}
		})
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name    string
		config  func(*agent.ModelConfig)
		replies []anthropictest.Reply
		want    []string
	}{
		{"400 with the provider's message", nil,
			[]anthropictest.Reply{anthropictest.Fail(400, "messages: roles must alternate between \"user\" and \"assistant\"")},
			[]string{"HTTP 400 Bad Request", `roles must alternate between "user" and "assistant"`}},
		{"401", nil, []anthropictest.Reply{anthropictest.Fail(401, "invalid x-api-key")}, []string{"HTTP 401", "invalid x-api-key"}},
		{"529 after retries", func(c *agent.ModelConfig) { c.MaxRetries = new(1) },
			[]anthropictest.Reply{{Status: 529, Error: "Overloaded", Header: retryNow}, {Status: 529, Error: "Overloaded", Header: retryNow}},
			[]string{"HTTP 529 Overloaded: Overloaded (after 2 attempts)"}},
		{"error event mid-stream", nil,
			[]anthropictest.Reply{{Chunks: []string{"a", "b"}, End: anthropictest.EndError, After: 4, Error: "Overloaded"}},
			[]string{"error event in stream after 3 events", "Overloaded"}},
		{"cut stream", nil,
			[]anthropictest.Reply{{Chunks: []string{"a", "b"}, End: anthropictest.EndCut, After: 4}},
			[]string{"stream cut short", "before message_stop", "after 3 events"}},
		{"dropped connection", nil,
			[]anthropictest.Reply{{Chunks: []string{"a", "b"}, End: anthropictest.EndAbort, After: 4}},
			[]string{"stream cut short after 3 events"}},
		{"retry-after beyond the longest wait", nil,
			[]anthropictest.Reply{{Status: 429, Error: "rate limited", Header: http.Header{"Retry-After": {"3600"}}}},
			[]string{"HTTP 429 Too Many Requests: rate limited"}},
		{"hang", func(c *agent.ModelConfig) { c.TimeoutSeconds = 1 },
			[]anthropictest.Reply{{Chunks: []string{"a"}, End: anthropictest.EndHang, After: 3}},
			[]string{"timed out after 1s"}},
	}
	// After: 4 is message_start, ping, content_block_start and one delta;
	// the SDK drops the ping, so the provider counts 3 events.
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, _ := newFake(t, c.config, c.replies...)
			_, err := p.Complete(context.Background(), hello(), nil)
			if !errors.Is(err, agent.ErrProvider) {
				t.Fatalf("error %v does not wrap ErrProvider", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), "claude") {
				t.Errorf("error %q does not name the model", err)
			}
		})
	}
}

// TestRedaction: a real key is scrubbed from error text; a placeholder key
// shorter than 8 characters leaves the text alone.
func TestRedaction(t *testing.T) {
	const long = "sk-ant-secret-123456"
	p, _ := newFake(t, func(c *agent.ModelConfig) { c.APIKey = long }, anthropictest.Fail(401, "invalid x-api-key "+long))
	_, err := p.Complete(context.Background(), hello(), nil)
	if err == nil || strings.Contains(err.Error(), long) || !strings.Contains(err.Error(), "[redacted]") || !errors.Is(err, agent.ErrProvider) {
		t.Errorf("long key: %v", err)
	}
	p, _ = newFake(t, func(c *agent.ModelConfig) { c.APIKey = "x" }, anthropictest.Fail(400, "context exceeded the max"))
	_, err = p.Complete(context.Background(), hello(), nil)
	if err == nil || !strings.Contains(err.Error(), "context exceeded the max") || strings.Contains(err.Error(), "redacted") {
		t.Errorf("placeholder key: %v", err)
	}
}

// TestCancel: cancelling the caller's context ends a call that is
// streaming, promptly, with no delta after the cancel.
func TestCancel(t *testing.T) {
	p, _ := newFake(t, nil, anthropictest.Reply{Chunks: []string{"a", "b", "c", "d"}, EventDelay: 20 * time.Millisecond, End: anthropictest.EndHang, After: 6})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	first := make(chan struct{})
	var cancelled bool
	go func() {
		_, err := p.Complete(ctx, hello(), func(string) {
			if cancelled {
				t.Error("delta after cancel")
			}
			select {
			case <-first:
			default:
				close(first)
			}
		})
		done <- err
	}()
	select {
	case <-first:
	case err := <-done:
		t.Fatalf("the call ended before any text: %v", err)
	}
	cancelled = true
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, agent.ErrProvider) {
			t.Errorf("error %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the call did not end after cancel")
	}
}

func TestNewValidates(t *testing.T) {
	t.Setenv("HERD_TEST_ANTHROPIC_KEY", "")
	cases := []struct {
		cfg  agent.ModelConfig
		want string
	}{
		{agent.ModelConfig{Name: "c"}, "api_key is required"},
		{agent.ModelConfig{Name: "c", APIKey: "$HERD_TEST_ANTHROPIC_KEY"}, "HERD_TEST_ANTHROPIC_KEY is not set"},
		{agent.ModelConfig{Name: "c", APIKey: "k", BaseURL: "ftp://x"}, "not an http(s) URL"},
		{agent.ModelConfig{Name: "c", APIKey: "k", MaxRetries: new(-1)}, "max_retries"},
		{agent.ModelConfig{Name: "c", APIKey: "k", MaxOutputTokens: -1}, "max_output_tokens"},
	}
	for _, c := range cases {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v, want %q", c.cfg, err, c.want)
		}
	}
	t.Setenv("HERD_TEST_ANTHROPIC_KEY", "from-env-key")
	p, err := New(agent.ModelConfig{Name: "c", APIKey: "${HERD_TEST_ANTHROPIC_KEY}"})
	if err != nil || p.ep.APIKey != "from-env-key" || p.maxTokens != DefaultMaxTokens {
		t.Errorf("env key: %v %+v", err, p)
	}
}

// TestPromptTooLong: Anthropic's refusal of a prompt over the window is
// marked agent.ErrContextLength (so herd leaves more turns out), with the
// provider's words; another 400 is not.
func TestPromptTooLong(t *testing.T) {
	for _, tt := range []struct {
		name  string
		reply anthropictest.Reply
		want  bool
	}{
		{"prompt too long", anthropictest.Fail(400, "prompt is too long: 208752 tokens > 200000 maximum"), true},
		{"another 400", anthropictest.Fail(400, "messages: roles must alternate"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := newFake(t, func(c *agent.ModelConfig) { c.MaxRetries = new(0) }, tt.reply)
			_, err := p.Complete(context.Background(), agent.Request{Messages: []agent.Message{{Type: agent.TypeHuman, Content: "hi"}}}, nil)
			if err == nil || errors.Is(err, agent.ErrContextLength) != tt.want {
				t.Fatalf("err %v: ErrContextLength %v, want %v", err, errors.Is(err, agent.ErrContextLength), tt.want)
			}
			if tt.want && !strings.HasSuffix(err.Error(), "200000 maximum") {
				t.Errorf("err %q, want the provider's words and nothing after", err)
			}
		})
	}
}
