package agent

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// Eight subagents on a model limited to two requests at once: never more
// than two calls are in flight, the others wait their turn, and every
// subagent completes.
func TestMaxConcurrentRequests(t *testing.T) {
	var inFlight, peak, calls atomic.Int64
	sub := func(ctx context.Context, req Request) (Response, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		calls.Add(1)
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return Response{}, ctx.Err()
		}
		return reply("done", &Usage{InputTokens: 3, OutputTokens: 2, TotalTokens: 5}), nil
	}
	var tasks []ToolCall
	for i := range 8 {
		tasks = append(tasks, taskCall(fmt.Sprint("t", i), fmt.Sprint("item ", i), SubagentGeneral))
	}
	cfg := defaultSubagents()
	cfg.MaxConcurrentPerResponse, cfg.MaxTotalPerRun = 8, 8
	// The lead's calls go through the same limit, as they would on one
	// local server.
	m := model("local", LimitRequests(split(leadThen(tasks...), sub), 2))
	h := newHarness(t, harnessConfig{subagents: cfg, models: []*Model{m}})
	h.run("eight items")
	if p := peak.Load(); p > 2 {
		t.Errorf("%d subagent calls in flight at once, want at most 2", p)
	}
	if c := calls.Load(); c != 8 {
		t.Errorf("%d subagent calls, want 8", c)
	}
	for id, msg := range h.toolMessages() {
		if md := metadata(t, msg); md.Status != StatusCompleted {
			t.Errorf("task %s ended %s, want completed", id, md.Status)
		}
	}
	if n := len(h.toolMessages()); n != 8 {
		t.Errorf("%d ToolMessages, want 8", n)
	}
}

// A call waiting for a slot gives up when its context ends, saying why.
func TestLimitRequestsWaitEndsWithContext(t *testing.T) {
	release := make(chan struct{})
	p := LimitRequests(llmFunc(func(ctx context.Context, _ Request, _ func(string)) (Response, error) {
		<-release
		return Response{}, nil
	}), 1)
	done := make(chan struct{})
	go func() { defer close(done); _, _ = p.Complete(context.Background(), Request{}, nil) }()
	for len(p.(*limited).slots) == 0 { // the first call holds the slot
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := p.Complete(ctx, Request{}, nil)
	if err == nil || !errors.Is(err, ErrProvider) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting call: %v; want a provider error naming the deadline", err)
	}
	close(release)
	<-done
}
