// Package lapse logs a failure that repeats while its cause lasts (the
// database away, say) once per change of state: its first failure, a
// count at most once a minute while it goes on, and its end, instead of
// a line per attempt (docs/DESIGN.md §14).
package lapse

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Every is how often a lapse that goes on logs its count, and how long a
// lapse nobody ended (End) lasts after its last failure: the next
// failure after that is a new lapse, logged again.
const Every = time.Minute

// A Lapse is one kind of failure of one part (the listener's
// connection, a read back): the attempts that fail while it lasts are
// counted, not logged. It is safe for concurrent use.
type Lapse struct {
	log  *slog.Logger
	what string
	now  func() time.Time

	// failing lets End, which runs after every success, return without
	// the lock while nothing fails.
	failing  atomic.Bool
	mu       sync.Mutex
	since    time.Time // the lapse's first failure
	last     time.Time // its latest
	said     time.Time // when a line last said so
	failures int
}

// New is a Lapse that logs to log, at Warn, what fails ("cluster: lost
// the listener connection; reconnecting").
func New(log *slog.Logger, what string) *Lapse {
	return &Lapse{log: log, what: what, now: time.Now}
}

// Fail notes one failure, err, with args for its line: the first of a
// lapse is logged; the others are counted, and at most every minute a
// line says how long it has lasted, how many failed and the latest err.
func (l *Lapse) Fail(err error, args ...any) {
	l.mu.Lock()
	now := l.now()
	if l.failures > 0 && now.Sub(l.last) >= Every {
		l.failures = 0 // quiet for a minute: this is a new lapse
	}
	first := l.failures == 0
	if first {
		l.since, l.said = now, now
		l.failing.Store(true)
	}
	l.failures++
	l.last = now
	n, lasted := l.failures, now.Sub(l.since)
	goesOn := !first && now.Sub(l.said) >= Every
	if goesOn {
		l.said = now
	}
	l.mu.Unlock()
	switch {
	case first:
		l.log.Warn(l.what, attrs(args, "err", err)...)
	case goesOn:
		l.log.Warn(l.what, attrs(args, "still_failing_for", lasted.Round(time.Second), "failures", n, "err", err)...)
	}
}

// End notes a success: if a lapse was on, it logs msg at Info, with args
// and how long the lapse lasted and how many attempts failed, and
// reports true.
func (l *Lapse) End(msg string, args ...any) bool {
	if !l.failing.Load() {
		return false
	}
	l.mu.Lock()
	n, lasted := l.failures, l.now().Sub(l.since)
	l.failures = 0
	l.failing.Store(false)
	l.mu.Unlock()
	if n == 0 {
		return false
	}
	l.log.Info(msg, attrs(args, "after", lasted.Round(100*time.Millisecond), "failures", n)...)
	return true
}

// attrs is args and more in a slice of their own (args may be a
// caller's).
func attrs(args []any, more ...any) []any {
	return append(append(make([]any, 0, len(args)+len(more)), args...), more...)
}
