package agent

import (
	"strings"
	"sync"
	"time"
)

// deltaWindow is how long streamed text may gather before it is sent. A
// provider emits a delta per token; a page cannot show more than a few
// updates a frame anyway, and every delta is a frame to every client of
// the thread, so deltas are coalesced to at most one per window.
const deltaWindow = 25 * time.Millisecond

// deltaStream coalesces one answer's streamed text: the first delta goes
// out at once, later ones at most every deltaWindow, and close sends what
// is left — before the answer is persisted, so the page never shows the
// message before its last words.
type deltaStream struct {
	send func(text string)

	mu      sync.Mutex
	pending strings.Builder
	last    time.Time
	timer   *time.Timer
	closed  bool
}

func newDeltaStream(send func(string)) *deltaStream { return &deltaStream{send: send} }

// write queues text; it never blocks on the window.
func (s *deltaStream) write(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.pending.WriteString(text)
	if wait := deltaWindow - time.Since(s.last); wait <= 0 {
		s.flushLocked()
	} else if s.timer == nil {
		s.timer = time.AfterFunc(wait, s.flush)
	}
}

func (s *deltaStream) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.flushLocked()
	}
}

func (s *deltaStream) flushLocked() {
	s.timer = nil
	if s.pending.Len() == 0 {
		return
	}
	s.send(s.pending.String())
	s.pending.Reset()
	s.last = time.Now()
}

// close sends what is pending and stops the stream; a timer that fires
// afterwards does nothing.
func (s *deltaStream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.flushLocked()
	s.closed = true
}
