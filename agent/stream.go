package agent

import (
	"strings"
	"sync"
	"time"
)

// deltaWindow is how long streamed text may gather before it is kept
// and sent. A provider emits a delta per token; every batch is a
// commit (answerStream) and a frame to every client of the thread, while
// a page renders an answer at most every 100 ms anyway (the hub's
// liveMinGap, server/hub/live.go): batches at that pace cost a reader
// nothing and the Writer a quarter of what 25 ms did (docs/PERFORMANCE.md,
// §Checkpoints and resume).
const deltaWindow = 100 * time.Millisecond

// answerStream is the lead's answer as it streams, shown only once kept
// (docs/DESIGN.md §11): each batch of its text and reasoning is
// committed as a checkpoint piece (keep) before it is published, so a run
// resumed after a crash continues the answer from exactly what the page
// showed. One batch is in flight at a time; what arrives meanwhile
// gathers into the next, so a slow database makes fewer, larger batches,
// never a queue, and batches go out at most every deltaWindow.
type answerStream struct {
	keep    func(text, reasoning string) error
	publish func(text, reasoning string)

	mu              sync.Mutex
	text, reasoning strings.Builder // not yet kept
	closed          bool            // set with closing: no more writes
	wake            chan struct{}
	closing         chan struct{}
	done            chan struct{}
}

// newAnswerStream starts the stream's goroutine; close stops it.
func newAnswerStream(keep func(text, reasoning string) error, publish func(text, reasoning string)) *answerStream {
	s := &answerStream{keep: keep, publish: publish, wake: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

// writeText and writeReasoning queue streamed text; they never block on
// the database.
func (s *answerStream) writeText(d string)      { s.write(&s.text, d) }
func (s *answerStream) writeReasoning(d string) { s.write(&s.reasoning, d) }

func (s *answerStream) write(b *strings.Builder, d string) {
	s.mu.Lock()
	if !s.closed {
		b.WriteString(d)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// close keeps and publishes what is pending and returns once that is
// done: the answer's message, persisted next, never comes before its
// last words.
func (s *answerStream) close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closing)
	}
	s.mu.Unlock()
	<-s.done
}

func (s *answerStream) run() {
	defer close(s.done)
	pause := time.NewTimer(deltaWindow)
	pause.Stop()
	for {
		select {
		case <-s.wake:
		case <-s.closing:
		}
		s.mu.Lock()
		text, reasoning, closed := s.text.String(), s.reasoning.String(), s.closed
		s.text.Reset()
		s.reasoning.Reset()
		s.mu.Unlock()
		sent := text != "" || reasoning != ""
		if sent && s.keep(text, reasoning) == nil {
			s.publish(text, reasoning)
		}
		if closed {
			return
		}
		if sent { // the next batch waits out the window, or the close
			pause.Reset(deltaWindow)
			select {
			case <-pause.C:
			case <-s.closing:
				pause.Stop()
			}
		}
	}
}
