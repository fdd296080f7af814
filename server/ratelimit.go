package server

import (
	"container/list"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// limiterCapacity bounds the keys a limiter or a back-off remembers. Keys
// come from attackers (addresses, emails), so memory must not grow with
// them: past the bound the least recently used key is forgotten. At a few
// hundred bytes a key this is a few megabytes (TestLimiterMemoryBounded).
const limiterCapacity = 20000

// lru is a map of at most capacity keys that forgets the least recently
// used one to make room. It is not safe for concurrent use.
type lru[V any] struct {
	capacity int
	order    *list.List // front = most recently used; values are *lruEntry[V]
	byKey    map[string]*list.Element
}

type lruEntry[V any] struct {
	key string
	val V
}

func newLRU[V any](capacity int) *lru[V] {
	return &lru[V]{capacity: capacity, order: list.New(), byKey: map[string]*list.Element{}}
}

// get returns key's value, made by fresh when absent, and marks it used.
func (l *lru[V]) get(key string, fresh func() V) V {
	if el, ok := l.byKey[key]; ok {
		l.order.MoveToFront(el)
		return el.Value.(*lruEntry[V]).val
	}
	if l.order.Len() >= l.capacity {
		oldest := l.order.Back()
		l.order.Remove(oldest)
		delete(l.byKey, oldest.Value.(*lruEntry[V]).key)
	}
	v := fresh()
	l.byKey[key] = l.order.PushFront(&lruEntry[V]{key: key, val: v})
	return v
}

// peek returns key's value without making one or marking it used.
func (l *lru[V]) peek(key string) (V, bool) {
	if el, ok := l.byKey[key]; ok {
		return el.Value.(*lruEntry[V]).val, true
	}
	var zero V
	return zero, false
}

func (l *lru[V]) remove(key string) {
	if el, ok := l.byKey[key]; ok {
		l.order.Remove(el)
		delete(l.byKey, key)
	}
}

func (l *lru[V]) len() int { return l.order.Len() }

// limiter is a per-key token bucket: perMin events a minute, in bursts of
// up to perMin. It remembers at most limiterCapacity keys.
type limiter struct {
	mu     sync.Mutex
	perMin int
	now    func() time.Time
	keys   *lru[*bucket]
}

// bucket is one key's tokens as of last: they grow by perMin a minute up
// to perMin.
type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(perMinute int, now func() time.Time) *limiter {
	return &limiter{perMin: perMinute, now: now, keys: newLRU[*bucket](limiterCapacity)}
}

// tokensAt brings b up to now and returns its tokens.
func (l *limiter) tokensAt(b *bucket, now time.Time) float64 {
	if now.After(b.last) {
		b.tokens = min(b.tokens+now.Sub(b.last).Minutes()*float64(l.perMin), float64(l.perMin))
		b.last = now
	}
	return b.tokens
}

// allow takes one event from key's bucket, reporting whether it had one.
func (l *limiter) allow(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.keys.get(key, func() *bucket { return &bucket{tokens: float64(l.perMin), last: now} })
	if l.tokensAt(b, now) < 1 {
		return false
	}
	b.tokens--
	return true
}

// refund gives back an event allow took: a password check reserves its
// failure before it runs and is refunded when the password was right.
func (l *limiter) refund(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.keys.peek(key); ok {
		b.tokens = min(l.tokensAt(b, l.now())+1, float64(l.perMin))
	}
}

// ready reports whether key's bucket has an event left, without taking
// it.
func (l *limiter) ready(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.keys.peek(key)
	return !ok || l.tokensAt(b, l.now()) >= 1
}

// retryAfter is how long until key's bucket has an event again.
func (l *limiter) retryAfter(key string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.keys.peek(key)
	if !ok {
		return 0
	}
	missing := 1 - l.tokensAt(b, l.now())
	if missing <= 0 {
		return 0
	}
	return time.Duration(missing / float64(l.perMin) * float64(time.Minute))
}

func (l *limiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.keys.len()
}

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
	keys   *lru[*strikes]
}

type strikes struct {
	n     int
	last  time.Time
	until time.Time
}

func newBackoff(now func() time.Time) *backoff {
	return &backoff{now: now, free: 5, base: time.Second, max: time.Minute, forget: 15 * time.Minute, keys: newLRU[*strikes](limiterCapacity)}
}

// wait is how long key must wait before its next attempt (0: now).
func (b *backoff) wait(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.keys.peek(key)
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
	s := b.keys.get(key, func() *strikes { return &strikes{} })
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
	b.keys.remove(key)
}

func (b *backoff) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.keys.len()
}

// authLimits are the limits of the signed-out forms and of the password
// checks (checks.go), all keyed by the client's real address (clientIP)
// or by account.
type authLimits struct {
	// failures counts failed sign-ins per address: the limit that stops a
	// guesser.
	failures *limiter
	// accounts slows down an account that keeps failing, whoever fails.
	accounts *backoff
	// attempts counts every set-up and sign-up per address.
	attempts *limiter
	// checking runs one password check or hash at a time per address
	// and per account (checks.go).
	checking *checkGate
}

func newAuthLimits(perMinute int, now func() time.Time) *authLimits {
	return &authLimits{failures: newLimiter(perMinute, now), accounts: newBackoff(now), attempts: newLimiter(perMinute, now), checking: newCheckGate(max(2, runtime.GOMAXPROCS(0)))}
}

// rateLimited answers 429 saying why and how long to wait, also as
// Retry-After (whole seconds, at least one).
func rateLimited(c echo.Context, wait time.Duration, why string) *apiError {
	secs := max(int((wait+time.Second-1)/time.Second), 1)
	c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
	after := fmt.Sprintf("%d seconds", secs)
	switch {
	case secs == 1:
		after = "a second"
	case secs >= 90:
		after = fmt.Sprintf("%d minutes", (secs+59)/60)
	}
	return &apiError{errRateLimited.Status, errRateLimited.Code, why + "; try again in " + after}
}

// ipExtractor finds the client's address for limits and logs: the
// connection's peer, unless the peer is one of the trusted proxies; then
// X-Forwarded-For is read right to left, skipping trusted hops, so a
// client can prepend whatever it likes without changing its key. Echo's
// default trust of loopback and private ranges is turned off: only the
// configured CIDRs are proxies.
func ipExtractor(trusted []string) (echo.IPExtractor, error) {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect(), nil
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, cidr := range trusted {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			return nil, fmt.Errorf("server: trusted proxy %q: %w", cidr, err)
		}
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...), nil
}
