package agent_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"herd/agent"
	"herd/agent/anthropic"
	"herd/agent/anthropic/anthropictest"
	"herd/agent/openai"
	"herd/agent/openai/openaitest"
	"herd/models"
)

// failureCase is one cause of a failed model call, scripted the same way
// for both fakes: the words the run's end must say, its kind, and
// whether the page offers Retry.
type failureCase struct {
	name      string
	status    int    // 0: see hang / unreachable
	message   string // the provider's message
	header    http.Header
	hang      bool // the server holds the call past timeout_seconds
	closed    bool // nothing listens
	overflow  bool // the provider says the context is too long
	kind      string
	retry     bool
	wantWords []string
}

var failureCases = []failureCase{
	{name: "401", status: http.StatusUnauthorized, message: "Incorrect API key provided", kind: agent.ErrorAuth,
		wantWords: []string{"rejected herd's API key (HTTP 401)", "An admin can fix it in herd.yaml or in the provider's console."}},
	{name: "403", status: http.StatusForbidden, message: "not allowed", kind: agent.ErrorAuth,
		wantWords: []string{"may not use this model (HTTP 403)", "provider's console"}},
	{name: "404 model", status: http.StatusNotFound, message: "The model `llama-9` does not exist", kind: agent.ErrorModel,
		wantWords: []string{`does not know the model "llama-9" (HTTP 404)`, "fix the model name in herd.yaml"}},
	{name: "429 with Retry-After", status: http.StatusTooManyRequests, message: "Rate limit reached", header: http.Header{"Retry-After": {"20"}},
		kind: agent.ErrorRateLimit, retry: true, wantWords: []string{"rate limit was reached (HTTP 429)", "Retry in 20 s"}},
	{name: "429 in the message", status: http.StatusTooManyRequests, message: "Rate limit reached for gpt-4o. Please try again in 2m.",
		kind: agent.ErrorRateLimit, retry: true, wantWords: []string{"Retry in 2 min"}},
	{name: "500", status: http.StatusInternalServerError, message: "boom", kind: agent.ErrorServer, retry: true,
		wantWords: []string{"The model provider failed (HTTP 500)", "Retry in a moment"}},
	{name: "timeout", hang: true, kind: agent.ErrorTimeout, retry: true,
		wantWords: []string{"stopped answering (timeout after 1 s)", "timeout_seconds"}},
	{name: "context too long", overflow: true, kind: agent.ErrorContextLength,
		wantWords: []string{"too long for this model's context window", "start a new thread"}},
	{name: "unreachable", closed: true, kind: agent.ErrorNetwork, retry: true,
		wantWords: []string{"could not be reached", "base_url"}},
}

// closedURL is the address of a port nothing listens on.
func closedURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr + "/v1"
}

// TestFailureWordsPerCause: every cause of a failed lead call, through the
// real OpenAI and Anthropic providers against their fakes, ends the run
// with its own words (who can fix it), its error_kind, and Retry only
// where it can help; the provider's raw error stays the run's error.
func TestFailureWordsPerCause(t *testing.T) {
	providers := []struct {
		name  string
		build func(t *testing.T, c failureCase, cfg *agent.ModelConfig) (agent.Provider, func())
	}{
		{"openai", func(t *testing.T, c failureCase, cfg *agent.ModelConfig) (agent.Provider, func()) {
			cfg.Provider = "openai"
			var opts []openai.Option
			closeFn := func() {}
			if c.closed {
				cfg.BaseURL = closedURL(t)
			} else {
				r := openaitest.Reply{Status: c.status, Error: c.message, Header: c.header}
				switch {
				case c.hang:
					r = openaitest.Reply{Chunks: []string{"x"}, End: openaitest.EndHang}
				case c.overflow:
					r = openaitest.ContextLengthExceeded(8192, 9000)
				}
				srv := openaitest.NewServer(t, r, r, r)
				cfg.BaseURL = srv.URL()
				opts = append(opts, openai.WithHTTPClient(srv.Client()))
				closeFn = srv.Close
			}
			p, err := openai.New(*cfg, append(opts, openai.WithMaxRetryDelay(time.Millisecond))...)
			if err != nil {
				t.Fatal(err)
			}
			return p, closeFn
		}},
		{"anthropic", func(t *testing.T, c failureCase, cfg *agent.ModelConfig) (agent.Provider, func()) {
			cfg.Provider = "anthropic"
			var opts []anthropic.Option
			closeFn := func() {}
			if c.closed {
				cfg.BaseURL = closedURL(t)
			} else {
				r := anthropictest.Reply{Status: c.status, Error: c.message, Header: c.header}
				switch {
				case c.hang:
					r = anthropictest.Reply{Chunks: []string{"x"}, End: anthropictest.EndHang}
				case c.overflow:
					r = anthropictest.Fail(http.StatusBadRequest, "prompt is too long: 210000 tokens > 200000 maximum")
				}
				srv := anthropictest.NewServer(t, r, r, r)
				cfg.BaseURL = srv.URL()
				opts = append(opts, anthropic.WithHTTPClient(srv.Client()))
				closeFn = srv.Close
			}
			p, err := anthropic.New(*cfg, append(opts, anthropic.WithMaxRetryDelay(time.Millisecond))...)
			if err != nil {
				t.Fatal(err)
			}
			return p, closeFn
		}},
	}
	for _, pr := range providers {
		for _, c := range failureCases {
			t.Run(pr.name+"/"+c.name, func(t *testing.T) {
				cfg := agent.ModelConfig{Name: "local", Model: "llama-9", APIKey: "x", TimeoutSeconds: 1, MaxRetries: new(0), MaxOutputTokens: 1024}
				p, closeFn := pr.build(t, c, &cfg)
				h := agent.NewHarness(t, agent.HarnessConfig{Models: []*agent.Model{{Config: cfg, Provider: p}}})
				t.Cleanup(closeFn) // before the harness checks for leaks
				st := h.Run("hello")
				es, _, err := h.Store().Events(context.Background(), h.Thread(), models.EventFilter{RunID: st.RunID, EventTypes: []string{"run.end"}})
				if err != nil || len(es) != 1 {
					t.Fatalf("run.end: %d events, %v", len(es), err)
				}
				var end agent.RunEnd
				if err := json.Unmarshal(es[0].Content, &end); err != nil || end.Status != models.RunFailed {
					t.Fatalf("run.end = %s (%v), want failed", es[0].Content, err)
				}
				if end.ErrorKind != c.kind {
					t.Errorf("error_kind = %q, want %q; error %q", end.ErrorKind, c.kind, end.Error)
				}
				for _, w := range c.wantWords {
					if !strings.Contains(end.Notice, w) {
						t.Errorf("notice = %q, want it to say %q", end.Notice, w)
					}
				}
				if got := agent.RetryHelps(end.ErrorKind); got != c.retry {
					t.Errorf("Retry offered = %v, want %v", got, c.retry)
				}
				if end.Error == "" || end.Error == end.Notice {
					t.Errorf("error = %q: the raw cause must stay under Details", end.Error)
				}
			})
		}
	}
}
