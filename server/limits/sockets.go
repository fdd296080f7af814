package limits

import "sync"

// SocketCounter counts each user's open WebSockets against a cap, so one
// account cannot hold an unbounded number of goroutines, buffers and file
// descriptors. A user's entry leaves with their last socket: memory
// follows the sockets open, whatever ids arrive.
type SocketCounter struct {
	mu   sync.Mutex
	max  int
	open map[string]int
}

// NewSocketCounter caps each user at max sockets.
func NewSocketCounter(max int) *SocketCounter {
	return &SocketCounter{max: max, open: map[string]int{}}
}

// Acquire takes one of userID's slots, unless all are taken.
func (s *SocketCounter) Acquire(userID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[userID] >= s.max {
		return false
	}
	s.open[userID]++
	return true
}

// Release frees a slot Acquire took.
func (s *SocketCounter) Release(userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[userID]--; s.open[userID] <= 0 {
		delete(s.open, userID)
	}
}

// Open is how many of userID's slots are taken.
func (s *SocketCounter) Open(userID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[userID]
}

// Users is how many users hold a slot: the counter's memory.
func (s *SocketCounter) Users() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}
