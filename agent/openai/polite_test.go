package openai

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"herd/agent"
	"herd/agent/openai/openaitest"
)

// TestShortKeyNeverMangles: a placeholder key's letters are left alone in
// error text (issue 11: "conte[redacted]t deadline e[redacted]ceeded").
func TestShortKeyNeverMangles(t *testing.T) {
	for _, key := range []string{"x", "ex", "ollama", "EMPTY", "sk-no-key-required"} {
		t.Run(key, func(t *testing.T) {
			checkLeaks(t)
			msg := "context deadline exceeded for Ollama: EMPTY reply; sk-no-key-required is what llama.cpp accepts"
			srv := openaitest.NewServer(t, openaitest.Fail(400, msg))
			p, err := New(agent.ModelConfig{Name: "m", Model: "m", BaseURL: srv.URL(), APIKey: key}, WithHTTPClient(srv.Client()))
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Complete(context.Background(), hello(), nil)
			if err == nil || !strings.Contains(err.Error(), msg) || strings.Contains(err.Error(), "redacted") {
				t.Errorf("err = %v, want the message unchanged", err)
			}
		})
	}
}

// TestRetryAfter: a 429 or 503 with Retry-After waits that long (plus a
// little jitter), then succeeds; one that asks for more than the call has
// left fails at once, saying so.
func TestRetryAfter(t *testing.T) {
	ra := func(v string) http.Header { return http.Header{"Retry-After": {v}} }
	t.Run("429 Retry-After 2 waits, then succeeds", func(t *testing.T) {
		checkLeaks(t)
		srv := openaitest.NewServer(t, openaitest.Reply{Status: 429, Error: "Rate limit reached", Header: ra("2")}, openaitest.Text("after the wait"))
		p, err := New(agent.ModelConfig{Name: "m", Model: "m", BaseURL: srv.URL(), TimeoutSeconds: 30}, WithHTTPClient(srv.Client()))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		got, err := p.Complete(context.Background(), hello(), nil)
		elapsed := time.Since(start)
		if err != nil || got.Text != "after the wait" {
			t.Fatalf("got %+v, %v", got, err)
		}
		if elapsed < 2*time.Second || elapsed > 3500*time.Millisecond {
			t.Errorf("took %s, want about 2s (Retry-After plus at most 10%% jitter)", elapsed)
		}
	})
	t.Run("503 Retry-After beyond the deadline fails fast", func(t *testing.T) {
		checkLeaks(t)
		srv := openaitest.NewServer(t, openaitest.Reply{Status: 503, Error: "loading model", Header: ra("10")}, openaitest.Text("never"))
		p, err := New(agent.ModelConfig{Name: "m", Model: "m", BaseURL: srv.URL(), TimeoutSeconds: 3}, WithHTTPClient(srv.Client()))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = p.Complete(context.Background(), hello(), nil)
		if d := time.Since(start); d > time.Second {
			t.Errorf("took %s, want an immediate failure", d)
		}
		if !errors.Is(err, agent.ErrProvider) || !strings.Contains(err.Error(), "HTTP 503 Service Unavailable: loading model (the server asked to retry after 10s, past this call's deadline") {
			t.Errorf("err = %v", err)
		}
		if n := len(srv.Requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
	t.Run("the caller's deadline counts too", func(t *testing.T) {
		checkLeaks(t)
		srv := openaitest.NewServer(t, openaitest.Reply{Status: 429, Error: "slow down", Header: ra("5")}, openaitest.Text("never"))
		p, err := New(agent.ModelConfig{Name: "m", Model: "m", BaseURL: srv.URL()}, WithHTTPClient(srv.Client()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = p.Complete(ctx, hello(), nil)
		if err == nil || !strings.Contains(err.Error(), "past this call's deadline") || ctx.Err() != nil {
			t.Errorf("err = %v (ctx %v), want a fast failure naming the deadline", err, ctx.Err())
		}
	})
}

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 11, 30, 15, 0, 0, 0, time.UTC)
	tests := []struct {
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second, true},
		{http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond, true},
		{http.Header{"Retry-After": {"Mon, 30 Nov 2026 15:00:07 GMT"}}, 7 * time.Second, true},
		{http.Header{"Retry-After": {"Mon, 30 Nov 2026 14:00:00 GMT"}}, 0, true},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond, true},
		{http.Header{"Retry-After": {"soon"}}, 0, false},
		{http.Header{"Retry-After": {"-3"}}, 0, false},
		{http.Header{}, 0, false},
	}
	for _, tt := range tests {
		got, ok := retryAfter(tt.h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("retryAfter(%v) = %s, %v; want %s, %v", tt.h, got, ok, tt.want, tt.ok)
		}
	}
}
