package agent

import (
	"strings"
	"sync"
	"testing"
	"time"
)

func TestDeltaStreamCoalesces(t *testing.T) {
	var (
		mu   sync.Mutex
		sent []string
	)
	s := newDeltaStream(func(text string) { mu.Lock(); sent = append(sent, text); mu.Unlock() })
	var want strings.Builder
	for i := range 200 {
		w := string(rune('a'+i%26)) + " "
		want.WriteString(w)
		s.write(w)
		if i%50 == 0 {
			time.Sleep(2 * deltaWindow) // a pause: what was pending goes out on the timer
			mu.Lock()
			n := len(sent)
			mu.Unlock()
			if n == 0 {
				t.Fatal("nothing sent during a pause")
			}
		}
	}
	s.close()
	s.write("after close")
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(sent, ""); got != want.String() {
		t.Fatalf("sent %q, want %q", got, want.String())
	}
	if len(sent) > 20 {
		t.Errorf("%d deltas for 200 writes in a burst: not coalesced", len(sent))
	}
	time.Sleep(2 * deltaWindow)
	if strings.Contains(strings.Join(sent, ""), "after close") {
		t.Error("a write after close was sent")
	}
}
