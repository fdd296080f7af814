// Package testclock is a settable clock for tests of what limits by time
// (server/limits, server/auth and the server's HTTP limits).
package testclock

import (
	"sync"
	"time"
)

// Clock is a settable clock, safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock at a fixed instant.
func New() *Clock { return &Clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)} }

// Now is the clock's time; pass it where a func() time.Time is taken.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
