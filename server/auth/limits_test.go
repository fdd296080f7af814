package auth

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"herd/internal/testclock"
	"herd/server/limits"
)

// TestBackoffGrowsAndForgets: the window doubles per failure past the
// free ones, is capped, and a success resets it.
func TestBackoffGrowsAndForgets(t *testing.T) {
	clock := testclock.New()
	b := newBackoff(clock.Now)
	var waits []time.Duration
	for range 14 {
		b.fail("k")
		waits = append(waits, b.wait("k"))
	}
	want := []time.Duration{0, 0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 60, 60, 60}
	for i := range want {
		if waits[i] != want[i]*time.Second {
			t.Fatalf("waits %v, want %v seconds", waits, want)
		}
	}
	clock.Advance(time.Minute)
	if w := b.wait("k"); w != 0 {
		t.Errorf("after the window: wait %v", w)
	}
	b.reset("k")
	b.fail("k")
	if w := b.wait("k"); w != 0 {
		t.Errorf("after a success the first failure is free again; wait %v", w)
	}
}

// TestBackoffMemoryBounded: 100,000 distinct keys leave at most
// limits.Capacity behind, and a few megabytes.
func TestBackoffMemoryBounded(t *testing.T) {
	b := newBackoff(time.Now)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 100000 {
		b.fail("ip:" + strconv.Itoa(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if b.len() > limits.Capacity {
		t.Errorf("back-off keeps %d keys; cap %d", b.len(), limits.Capacity)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 32<<20 {
		t.Errorf("heap grew by %d MB for 100k keys", grew>>20)
	}
	// The newest keys are the ones kept.
	if _, ok := b.keys.Peek("ip:99999"); !ok {
		t.Error("the newest key was evicted")
	}
	if _, ok := b.keys.Peek("ip:0"); ok {
		t.Error("the oldest key was kept")
	}
}

// strikes is key's count of failures.
func (b *backoff) strikes(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.keys.Peek(key)
	if !ok {
		return 0
	}
	return s.n
}
