package agent

import (
	"context"
	"fmt"
)

// LimitRequests wraps p so that at most n of its calls are in flight at
// once (models.N.max_concurrent_requests); n ≤ 0 returns p unchanged.
// Waiting calls are served in arrival order (a Go channel's senders queue
// FIFO) and give up when their context ends. A local server that answers
// one or two requests at a time then sees exactly that many, however many
// subagents run.
func LimitRequests(p Provider, n int) Provider {
	if n <= 0 {
		return p
	}
	return &limited{p: p, slots: make(chan struct{}, n)}
}

type limited struct {
	p     Provider
	slots chan struct{}
}

func (l *limited) Complete(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return Response{}, fmt.Errorf("%w: waiting for the model (max_concurrent_requests %d): %w", ErrProvider, cap(l.slots), ctx.Err())
	}
	defer func() { <-l.slots }()
	return l.p.Complete(ctx, req, onDelta)
}
