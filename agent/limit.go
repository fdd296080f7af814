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
// subagents run. A call that has to wait says so, through the hook its
// context carries (withModelWait), when it starts waiting and when it
// gets its slot, so its card or its run can show it.
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
	default:
		// Every slot is taken. A freed slot goes to the longest waiter
		// (the channel hands it over on receive), so trying first never
		// jumps the queue.
		if err := l.wait(ctx); err != nil {
			return Response{}, err
		}
	}
	defer func() { <-l.slots }()
	return l.p.Complete(ctx, req, onDelta)
}

// wait takes a slot, telling the context's hook that the call waits and,
// once it has its slot, that it no longer does. A call whose context ends
// first says nothing more: its caller ends it.
func (l *limited) wait(ctx context.Context) error {
	hook, _ := ctx.Value(modelWaitKey{}).(func(bool))
	if hook != nil {
		hook(true)
	}
	held := false
	select {
	case l.slots <- struct{}{}:
		held = true
	case <-ctx.Done():
	}
	if held && ctx.Err() == nil && runEnded(ctx) {
		// The run's end is still on its way to this call's context
		// (runEnded), the slot most likely freed by it: wait for it here.
		<-ctx.Done()
	}
	if ctx.Err() != nil {
		// A slot that freed as the context ended (a Stop or a deadline
		// ends the holder and the waiter together) is not worth a call.
		if held {
			<-l.slots
		}
		return fmt.Errorf("%w: waiting for the model (max_concurrent_requests %d): %w", ErrProvider, cap(l.slots), ctx.Err())
	}
	if hook != nil {
		hook(false)
	}
	return nil
}

type modelWaitKey struct{}

// runKey holds a run's own context in every context under it (withRun).
type runKey struct{}

// withRun marks ctx, a run's context, for runEnded.
func withRun(ctx context.Context) context.Context { return context.WithValue(ctx, runKey{}, ctx) }

// runEnded reports whether the run ctx belongs to has ended. A Stop ends
// the run's context at once, but reaches the contexts under it one after
// another: a holder reached first can free its slot while a waiter's own
// context, not reached yet, still looks alive (TestStopFreesNoSlotForAWaiter).
func runEnded(ctx context.Context) bool {
	run, ok := ctx.Value(runKey{}).(context.Context)
	return ok && run.Err() != nil
}

// withModelWait returns ctx carrying hook, which a limited provider calls
// with true when a call starts waiting for a slot and with false when it
// gets one. Calls that find a free slot never call it. hook must not
// block for long: the call waits for it.
func withModelWait(ctx context.Context, hook func(waiting bool)) context.Context {
	return context.WithValue(ctx, modelWaitKey{}, hook)
}
