package auth

import (
	"runtime"
	"sync"
	"time"

	"herd/server/limits"
)

// backoff slows down one key (an account) after repeated failures: the
// first free failures cost nothing, then each one closes the key for a
// window that doubles up to max. Only a failure opens a window and an
// attempt refused inside one is not a failure, so whoever knows the
// password gets in as soon as the window ends, however many failures
// others made: the per-account rule slows guessing down, the per-address
// limit is what stops a guesser. The count is forgotten after forget
// without failures, or by a success.
type backoff struct {
	mu     sync.Mutex
	now    func() time.Time
	free   int
	base   time.Duration
	max    time.Duration
	forget time.Duration
	keys   *limits.LRU[*strikes]
}

type strikes struct {
	n     int
	last  time.Time
	until time.Time
}

func newBackoff(now func() time.Time) *backoff {
	return &backoff{now: now, free: 5, base: time.Second, max: time.Minute, forget: 15 * time.Minute, keys: limits.NewLRU[*strikes](limits.Capacity)}
}

// wait is how long key must wait before its next attempt (0: now).
func (b *backoff) wait(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.keys.Peek(key)
	if !ok {
		return 0
	}
	return max(s.until.Sub(b.now()), 0)
}

// fail records a failure of key.
func (b *backoff) fail(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	s := b.keys.Get(key, func() *strikes { return &strikes{} })
	if now.Sub(s.last) > b.forget {
		s.n = 0
	}
	s.n++
	s.last = now
	if over := s.n - b.free; over > 0 {
		d := b.max
		if over <= 16 && b.base<<(over-1) < b.max {
			d = b.base << (over - 1)
		}
		s.until = now.Add(d)
	}
}

// reset forgets key's failures (a success).
func (b *backoff) reset(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.keys.Remove(key)
}

func (b *backoff) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.keys.Len()
}

// authLimits are the limits of the signed-out forms and of the password
// checks (checks.go), all keyed by the client's real address (c.RealIP)
// or by account.
type authLimits struct {
	// failures counts failed sign-ins per address: the limit that stops a
	// guesser.
	failures *limits.Limiter
	// accounts slows down an account that keeps failing, whoever fails.
	accounts *backoff
	// attempts counts every set-up and sign-up per address.
	attempts *limits.Limiter
	// checking runs one password check or hash at a time per address
	// and per account (checks.go).
	checking *checkGate
	// starts counts single sign-on starts per address.
	starts *limits.Limiter
}

func newAuthLimits(perMinute int, now func() time.Time) *authLimits {
	return &authLimits{failures: limits.NewLimiter(perMinute, now), accounts: newBackoff(now), attempts: limits.NewLimiter(perMinute, now), checking: newCheckGate(max(2, runtime.GOMAXPROCS(0))), starts: limits.NewLimiter(6*perMinute, now)}
}
