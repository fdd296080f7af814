package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"herd/agent/tools"
)

// strays runs the calls a run waits for — the tool and model calls of its
// lead and of its subagents — so that one which ignores its context
// cannot hold the run (docs/DESIGN.md §4, the stuck-tool rule). Every call
// runs in a goroutine strays owns; the caller waits for its result, or for
// its context to end and the cancel grace to pass, and then abandons the
// call. The goroutine runs on until the call returns: it is counted
// (Stats().Abandoned) and waited for by Shutdown, and its late result is
// dropped.
type strays struct {
	grace     time.Duration // subagents.cancel_grace_seconds
	wg        sync.WaitGroup
	abandoned atomic.Int64 // abandoned calls that have not returned yet
}

// call states, for the hand-off between the waiter and the goroutine.
const (
	callRunning int32 = iota
	callReturned
	callAbandoned
)

// errAbandoned is the error of a call the caller stopped waiting for.
type errAbandoned struct {
	what  string // "the read_file tool", "the model demo-fast"
	grace time.Duration
}

func (e errAbandoned) Error() string {
	return fmt.Sprintf("%s did not stop within %d s of being cancelled (subagents.cancel_grace_seconds); herd stopped waiting for it and dropped its result",
		e.what, int(e.grace.Seconds()))
}

// await calls f (which must recover its own panics) in a goroutine of s
// and returns its result, or errAbandoned once ctx has ended and the
// grace has passed without one. what names the call in the error and the
// logs.
func await[T any](s *strays, ctx context.Context, log *slog.Logger, what string, f func() T) (T, error) {
	out := make(chan T, 1)
	var state atomic.Int32
	s.wg.Go(func() {
		out <- f()
		if !state.CompareAndSwap(callRunning, callReturned) {
			s.abandoned.Add(-1)
			log.Info("an abandoned call returned", "call", what)
		}
	})
	select {
	case res := <-out:
		return res, nil
	case <-ctx.Done():
	}
	t := time.NewTimer(s.grace)
	defer t.Stop()
	select {
	case res := <-out:
		return res, nil
	case <-t.C:
	}
	// Count the call before it is marked, so the goroutine's decrement
	// never precedes the increment.
	s.abandoned.Add(1)
	if !state.CompareAndSwap(callRunning, callAbandoned) {
		s.abandoned.Add(-1)
		return <-out, nil // it returned just now
	}
	log.Warn("abandoned a call that ignored its cancellation", "call", what, "grace", s.grace)
	var zero T
	return zero, errAbandoned{what: what, grace: s.grace}
}

// runTool runs call with t through s (await). A tool that fails, panics or
// is abandoned answers with the error, for the model to read.
func (s *strays) runTool(ctx context.Context, log *slog.Logger, t tools.Tool, env tools.Env, call ToolCall) string {
	res, err := await(s, ctx, log, "the "+call.Name+" tool", func() (result string) {
		defer func() {
			if p := recover(); p != nil {
				log.Error("tool panicked", "tool", call.Name, "panic", p)
				result = fmt.Sprintf("Error: the %s tool failed internally", call.Name)
			}
		}()
		out, err := t.Run(ctx, env, call.Args)
		if err != nil {
			return "Error: " + err.Error()
		}
		return out
	})
	if err != nil {
		return "Error: " + err.Error()
	}
	return res
}

// complete calls m for req through s (await): a provider that ignores ctx
// is abandoned after the grace, and one that panics fails the call instead
// of the process.
func (s *strays) complete(ctx context.Context, log *slog.Logger, m *Model, req Request, onDelta func(string)) (Response, error) {
	type result struct {
		resp Response
		err  error
	}
	res, err := await(s, ctx, log, "the model "+m.Config.Name, func() (r result) {
		defer func() {
			if p := recover(); p != nil {
				log.Error("provider panicked", "model", m.Config.Name, "panic", p)
				r = result{err: fmt.Errorf("%w: the model %s failed internally: %v", ErrProvider, m.Config.Name, p)}
			}
		}()
		resp, err := m.Provider.Complete(ctx, req, onDelta)
		return result{resp, err}
	})
	if err != nil {
		return Response{}, err
	}
	return res.resp, res.err
}
