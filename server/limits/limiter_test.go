package limits

import (
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"

	"herd/internal/testclock"
)

// TestLimiterRefund: a refund gives back what allow took, never more than
// the bucket holds.
func TestLimiterRefund(t *testing.T) {
	clock := testclock.New()
	l := NewLimiter(2, clock.Now)
	allowed := func() int {
		n := 0
		for range 5 {
			if l.Allow("k") {
				n++
			}
		}
		return n
	}
	l.Refund("k") // unknown key: nothing to give back
	if n := allowed(); n != 2 {
		t.Fatalf("a bucket of 2 allowed %d", n)
	}
	l.Refund("k")
	if n := allowed(); n != 1 {
		t.Errorf("a refund gave back %d, want 1", n)
	}
	clock.Advance(time.Hour)
	l.Refund("k")
	if got := l.Tokens("k"); got != 2 {
		t.Errorf("a full bucket holds %v after a refund, want 2", got)
	}
	clock.Advance(-time.Minute) // a clock step back takes nothing
	if got := l.Tokens("k"); got != 2 {
		t.Errorf("after the clock stepped back: %v", got)
	}
}

func TestIPExtractor(t *testing.T) {
	cases := []struct {
		name    string
		trusted []string
		remote  string
		xff     string
		want    string
	}{
		{"no proxies: XFF ignored", nil, "203.0.113.9:5000", "1.2.3.4", "203.0.113.9"},
		{"loopback is not trusted by default", nil, "127.0.0.1:5000", "1.2.3.4", "127.0.0.1"},
		{"private ranges are not trusted by default", []string{"10.0.0.0/8"}, "192.168.1.1:5000", "1.2.3.4", "192.168.1.1"},
		{"trusted proxy: last hop", []string{"127.0.0.1/32"}, "127.0.0.1:5000", "1.2.3.4", "1.2.3.4"},
		{"forged left part skipped", []string{"127.0.0.1/32"}, "127.0.0.1:5000", "6.6.6.6, 1.2.3.4", "1.2.3.4"},
		{"trusted hops skipped right to left", []string{"127.0.0.1/32", "10.0.0.0/8"}, "127.0.0.1:5000", "9.9.9.9, 1.2.3.4, 10.1.2.3", "1.2.3.4"},
		{"garbage in XFF", []string{"127.0.0.1/32"}, "127.0.0.1:5000", "not-an-ip", "127.0.0.1"},
		{"untrusted peer with XFF", []string{"10.0.0.0/8"}, "203.0.113.9:5000", "10.0.0.1", "203.0.113.9"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ext, err := IPExtractor(c.trusted)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest("GET", "/", nil)
			req.RemoteAddr = c.remote
			req.Header.Set("X-Forwarded-For", c.xff)
			if got := ext(req); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	if _, err := IPExtractor([]string{"10.0.0.1"}); err == nil {
		t.Error("a CIDR without mask was accepted")
	}
}

// TestLimiterMemoryBounded: 100,000 distinct keys leave at most
// Capacity behind, and a few megabytes.
func TestLimiterMemoryBounded(t *testing.T) {
	l := NewLimiter(10, time.Now)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 100000 {
		l.Allow("ip:" + strconv.Itoa(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if l.Len() > Capacity {
		t.Errorf("limiter keeps %d keys; cap %d", l.Len(), Capacity)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 32<<20 {
		t.Errorf("heap grew by %d MB for 100k keys", grew>>20)
	}
	// The newest keys are the ones kept.
	if _, ok := l.keys.Peek("ip:99999"); !ok {
		t.Error("the newest key was evicted")
	}
	if _, ok := l.keys.Peek("ip:0"); ok {
		t.Error("the oldest key was kept")
	}
}
