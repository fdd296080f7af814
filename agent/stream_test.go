package agent

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

// TestAnswerStreamKeepsBeforeItShows: every batch is kept before it is
// published, a burst is coalesced, close returns once the last batch is out, and a write after
// close goes nowhere.
func TestAnswerStreamKeepsBeforeItShows(t *testing.T) {
	var (
		mu          sync.Mutex
		kept, shown strings.Builder
		keeps       int
		gate        = make(chan struct{}) // holds the first keep: a slow database
	)
	s := newAnswerStream(
		func(text, reasoning string) error {
			if keeps == 0 {
				<-gate
			}
			mu.Lock()
			defer mu.Unlock()
			keeps++
			kept.WriteString(reasoning + text)
			return nil
		},
		func(text, reasoning string) {
			mu.Lock()
			defer mu.Unlock()
			shown.WriteString(reasoning + text)
			if !strings.HasPrefix(kept.String(), shown.String()) {
				t.Errorf("shown %q before it was kept (kept %q)", shown.String(), kept.String())
			}
		})
	var want strings.Builder
	s.writeReasoning("think ")
	want.WriteString("think ")
	for i := range 200 {
		w := string(rune('a'+i%26)) + " "
		want.WriteString(w)
		s.writeText(w)
	}
	close(gate) // the 200 writes gathered while the first batch was held
	s.close()
	s.writeText("after close")
	mu.Lock()
	defer mu.Unlock()
	if got := shown.String(); got != want.String() {
		t.Fatalf("shown %q, want %q", got, want.String())
	}
	if keeps > 4 {
		t.Errorf("%d batches for 201 writes behind a slow keep: not coalesced", keeps)
	}
}

// TestAnswerStreamShowsNothingRefused: text the database did not keep
// (a released or fenced run) is never shown.
func TestAnswerStreamShowsNothingRefused(t *testing.T) {
	var shown []string
	s := newAnswerStream(func(string, string) error { return errors.New("refused") },
		func(text, _ string) { shown = append(shown, text) })
	s.writeText("lost ")
	s.close()
	if len(shown) > 0 {
		t.Fatalf("shown %q, which was never kept", shown)
	}
}
