// Package fake is what herd's fake LLM servers (openaitest, anthropictest)
// share beside their wire formats: a script of replies taken in order with
// a fallback, a record of the requests received, and a test server that
// streams server-sent events and releases hanging replies when it closes.
package fake

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Server is a scripted test server: Rec is the record of one request, Reply
// the scripted answer to it. Its methods are safe for concurrent use;
// concurrent requests take replies from the script in arrival order.
type Server[Rec, Reply any] struct {
	srv       *httptest.Server
	quit      chan struct{} // closed by Close: releases hanging handlers
	closeOnce sync.Once

	mu       sync.Mutex
	script   []Reply
	fallback func(Rec) Reply
	requests []Rec
}

// NewServer returns a server with replies scripted; Start runs it.
func NewServer[Rec, Reply any](replies []Reply) *Server[Rec, Reply] {
	return &Server[Rec, Reply]{quit: make(chan struct{}), script: append([]Reply(nil), replies...)}
}

// Start serves h and closes the server when the test ends.
func (s *Server[Rec, Reply]) Start(t testing.TB, h http.Handler) {
	t.Helper()
	s.srv = httptest.NewServer(h)
	t.Cleanup(s.Close)
}

// BaseURL is the server's root URL.
func (s *Server[Rec, Reply]) BaseURL() string { return s.srv.URL }

// Client is an HTTP client for the server whose idle connections Close
// shuts, so a test leaves no connection goroutines behind.
func (s *Server[Rec, Reply]) Client() *http.Client { return s.srv.Client() }

// Enqueue appends replies to the script.
func (s *Server[Rec, Reply]) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, replies...)
}

// Fallback makes f answer every request that arrives once the script is
// exhausted.
func (s *Server[Rec, Reply]) Fallback(f func(Rec) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = f
}

// Pending is the number of scripted replies not yet used.
func (s *Server[Rec, Reply]) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script)
}

// Requests returns every request received so far, in arrival order.
func (s *Server[Rec, Reply]) Requests() []Rec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Rec(nil), s.requests...)
}

// Close releases hanging replies, drops open connections and stops the
// server. It is safe to call more than once.
func (s *Server[Rec, Reply]) Close() {
	s.closeOnce.Do(func() {
		close(s.quit)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// Next records the request and takes the reply for it: the next scripted
// one, else the fallback's; ok is false when there is neither.
func (s *Server[Rec, Reply]) Next(rec Rec) (reply Reply, ok bool) {
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	if len(s.script) > 0 {
		r := s.script[0]
		s.script = s.script[1:]
		s.mu.Unlock()
		return r, true
	}
	fallback := s.fallback
	s.mu.Unlock()
	// The fallback runs unlocked: it is test code and may call back into s.
	if fallback == nil {
		return reply, false
	}
	return fallback(rec), true
}

// AddHeader adds a reply's extra headers (e.g. Retry-After) to w.
func AddHeader(w http.ResponseWriter, h http.Header) {
	for k, vs := range h {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
}

// Stream starts an event-stream response and returns send, which writes
// one event (an `event:` line when name is set, then data) after waiting
// delay, and flushes it. send reports false once the client has gone, the
// server closes or a write fails.
func (s *Server[Rec, Reply]) Stream(w http.ResponseWriter, r *http.Request, delay time.Duration) (send func(name string, data []byte) bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()

	return func(name string, data []byte) bool {
		if delay > 0 {
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return false
			case <-s.quit:
				return false
			}
		}
		var err error
		if name != "" {
			_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		} else {
			_, err = fmt.Fprintf(w, "data: %s\n\n", data)
		}
		if err != nil {
			return false
		}
		return rc.Flush() == nil
	}
}

// Hang holds the response open until the client goes away or the server
// closes.
func (s *Server[Rec, Reply]) Hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.quit:
	}
}
