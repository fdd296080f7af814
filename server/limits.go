package server

import (
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"
)

// socketCounter counts each user's open WebSockets against a cap, so one
// account cannot hold an unbounded number of goroutines, buffers and file
// descriptors. A user's entry leaves with their last socket: memory
// follows the sockets open, whatever ids arrive.
type socketCounter struct {
	mu   sync.Mutex
	max  int
	open map[string]int
}

func newSocketCounter(max int) *socketCounter {
	return &socketCounter{max: max, open: map[string]int{}}
}

// acquire takes one of userID's slots, unless all are taken.
func (s *socketCounter) acquire(userID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[userID] >= s.max {
		return false
	}
	s.open[userID]++
	return true
}

// release frees a slot acquire took.
func (s *socketCounter) release(userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[userID]--; s.open[userID] <= 0 {
		delete(s.open, userID)
	}
}

// limitConnects limits WebSocket connects per user, or per client IP for
// a request without a session (which requireUser then refuses): a
// reconnect storm, scripted or not, costs at most this many handshakes
// and replays a minute.
func (s *Server) limitConnects(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		key := "ip:" + c.RealIP()
		if u := currentUser(c); u != nil {
			key = "user:" + u.ID
		}
		if !s.connLimiter.allow(key) {
			return &apiError{http.StatusTooManyRequests, "rate_limited", "too many stream connections in a minute; wait a moment and reload"}
		}
		return next(c)
	}
}
