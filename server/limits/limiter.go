// Package limits holds herd's generic limits: per-key token buckets in
// bounded memory, the per-user socket count, the listener's connection
// cap, and the client address they count by. It knows nothing of auth:
// its keys are strings its callers choose.
package limits

import (
	"container/list"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// Capacity bounds the keys a limiter or a back-off remembers. Keys
// come from attackers (addresses, emails), so memory must not grow with
// them: past the bound the least recently used key is forgotten. At a few
// hundred bytes a key this is a few megabytes (TestLimiterMemoryBounded).
const Capacity = 20000

// LRU is a map of at most capacity keys that forgets the least recently
// used one to make room. It is not safe for concurrent use.
type LRU[V any] struct {
	capacity int
	order    *list.List // front = most recently used; values are *lruEntry[V]
	byKey    map[string]*list.Element
}

type lruEntry[V any] struct {
	key string
	val V
}

// NewLRU makes an empty LRU of at most capacity keys.
func NewLRU[V any](capacity int) *LRU[V] {
	return &LRU[V]{capacity: capacity, order: list.New(), byKey: map[string]*list.Element{}}
}

// Get returns key's value, made by fresh when absent, and marks it used.
func (l *LRU[V]) Get(key string, fresh func() V) V {
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

// Peek returns key's value without making one or marking it used.
func (l *LRU[V]) Peek(key string) (V, bool) {
	if el, ok := l.byKey[key]; ok {
		return el.Value.(*lruEntry[V]).val, true
	}
	var zero V
	return zero, false
}

// Remove forgets key.
func (l *LRU[V]) Remove(key string) {
	if el, ok := l.byKey[key]; ok {
		l.order.Remove(el)
		delete(l.byKey, key)
	}
}

// Len is how many keys l holds.
func (l *LRU[V]) Len() int { return l.order.Len() }

// Limiter is a per-key token bucket: perMin events a minute, in bursts of
// up to perMin. It remembers at most Capacity keys.
type Limiter struct {
	mu     sync.Mutex
	perMin int
	now    func() time.Time
	keys   *LRU[*bucket]
}

// bucket is one key's tokens as of last: they grow by perMin a minute up
// to perMin.
type bucket struct {
	tokens float64
	last   time.Time
}

// NewLimiter allows perMinute events a minute per key, by now's clock.
func NewLimiter(perMinute int, now func() time.Time) *Limiter {
	return &Limiter{perMin: perMinute, now: now, keys: NewLRU[*bucket](Capacity)}
}

// SetRate changes the events allowed a minute per key from now on (the
// admin console); buckets keep their tokens, up to the new rate.
func (l *Limiter) SetRate(perMinute int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.perMin = perMinute
}

// tokensAt brings b up to now and returns its tokens.
func (l *Limiter) tokensAt(b *bucket, now time.Time) float64 {
	if now.After(b.last) {
		b.tokens = min(b.tokens+now.Sub(b.last).Minutes()*float64(l.perMin), float64(l.perMin))
		b.last = now
	}
	return b.tokens
}

// Allow takes one event from key's bucket, reporting whether it had one.
func (l *Limiter) Allow(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.keys.Get(key, func() *bucket { return &bucket{tokens: float64(l.perMin), last: now} })
	if l.tokensAt(b, now) < 1 {
		return false
	}
	b.tokens--
	return true
}

// Refund gives back an event Allow took, never past a full bucket: an
// event taken ahead that turned out not to count.
func (l *Limiter) Refund(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.keys.Peek(key); ok {
		b.tokens = min(l.tokensAt(b, l.now())+1, float64(l.perMin))
	}
}

// Ready reports whether key's bucket has an event left, without taking
// it.
func (l *Limiter) Ready(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.keys.Peek(key)
	return !ok || l.tokensAt(b, l.now()) >= 1
}

// RetryAfter is how long until key's bucket has an event again.
func (l *Limiter) RetryAfter(key string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.keys.Peek(key)
	if !ok {
		return 0
	}
	missing := 1 - l.tokensAt(b, l.now())
	if missing <= 0 {
		return 0
	}
	return time.Duration(missing / float64(l.perMin) * float64(time.Minute))
}

// Tokens is what key's bucket holds now (a full bucket for an unknown
// key).
func (l *Limiter) Tokens(key string) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.keys.Peek(key)
	if !ok {
		return float64(l.perMin)
	}
	return l.tokensAt(b, l.now())
}

// Len is how many keys l remembers.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.keys.Len()
}

// IPExtractor finds the client's address for limits and logs: the
// connection's peer, unless the peer is one of the trusted proxies; then
// X-Forwarded-For is read right to left, skipping trusted hops, so a
// client can prepend whatever it likes without changing its key. Echo's
// default trust of loopback and private ranges is turned off: only the
// configured CIDRs are proxies.
func IPExtractor(trusted []string) (echo.IPExtractor, error) {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect(), nil
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, cidr := range trusted {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			return nil, fmt.Errorf("limits: trusted proxy %q: %w", cidr, err)
		}
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...), nil
}
