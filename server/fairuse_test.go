package server

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func withServer(f func(*Options)) appOption { return func(c *appConfig) { c.server = f } }

// openSockets is how many sockets the server counts for userID.
func (s *Server) openSockets(userID string) int {
	return s.socketCap.Open(userID)
}

func waitSockets(t *testing.T, s *Server, userID string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.openSockets(userID) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d sockets counted, want %d", s.openSockets(userID), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSocketCap: a user's 17th socket is refused (429 before the upgrade
// for a token, a close with the reason for a browser), another user is
// not affected, and a closed socket frees its slot at once.
func TestSocketCap(t *testing.T) {
	a := newApp(t, withServer(func(o *Options) { o.MaxSocketsPerUser = 16 }))
	ann := a.newUser("ann@example.com", false)
	bob := a.newUser("bob@example.com", false)
	th := ann.newThread("t")
	var conns []*websocket.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range 16 {
		c, err := ann.dial(th, 0)
		if err != nil {
			t.Fatalf("socket %d: %v", i+1, err)
		}
		conns = append(conns, c)
	}
	// A browser cannot read a refused handshake's status: its socket is
	// closed at once with the reason. An API client gets 429 before the
	// upgrade.
	refusedInBrowser(t, ann, th)
	var tok struct {
		Token string `json:"token"`
	}
	ann.mustJSON("POST", "/api/tokens", map[string]string{"name": "cli"}, http.StatusCreated, &tok)
	r := a.anonymous().do("GET", "/api/threads/"+th+"/stream", nil, "Authorization", "Bearer "+tok.Token,
		"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	if r.status != http.StatusTooManyRequests || r.errorCode() != "too_many_sockets" {
		t.Errorf("17th socket by token: %d %s, want 429 too_many_sockets", r.status, r.body)
	}
	bth := bob.newThread("b")
	bc, err := bob.dial(bth, 0)
	if err != nil {
		t.Fatalf("another user's socket: %v", err)
	}
	bc.Close()
	conns[0].Close()
	conns = conns[1:]
	waitSockets(t, a.srv, ann.id, 15)
	c, err := ann.dial(th, 0)
	if err != nil {
		t.Fatalf("socket after one closed: %v", err)
	}
	conns = append(conns, c)
	refusedInBrowser(t, ann, th)
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	waitSockets(t, a.srv, ann.id, 0)
	if n := a.srv.socketCap.Users(); n != 0 {
		t.Errorf("%d users left in the socket count, want 0", n)
	}
}

// refusedInBrowser checks that u's next socket is closed at once with
// CloseTooManySockets and its reason.
func refusedInBrowser(t *testing.T, u *user, th string) {
	t.Helper()
	c, err := u.dial(th, 0)
	if err != nil {
		t.Fatalf("socket over the cap: %v, want a socket closed with %d", err, CloseTooManySockets)
	}
	defer c.Close()
	_, _, err = readFrameErr(c, 5*time.Second)
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != CloseTooManySockets || !strings.Contains(ce.Text, "too many open streams") {
		t.Fatalf("socket over the cap: %v, want close %d with the reason", err, CloseTooManySockets)
	}
}

// TestConnectRateLimit: connects beyond the rate are refused with 429 per
// user, and per address for requests without a session; other users keep
// their own budget.
func TestConnectRateLimit(t *testing.T) {
	a := newApp(t, withServer(func(o *Options) { o.WSConnectsPerMinute = 3 }))
	ann := a.newUser("ann@example.com", false)
	bob := a.newUser("bob@example.com", false)
	th := ann.newThread("t")
	for i := range 3 {
		c, err := ann.dial(th, 0)
		if err != nil {
			t.Fatalf("connect %d: %v", i+1, err)
		}
		c.Close()
	}
	if _, err := ann.dial(th, 0); err == nil || !strings.Contains(err.Error(), "HTTP 429") {
		t.Fatalf("4th connect: %v, want HTTP 429", err)
	}
	bth := bob.newThread("b")
	c, err := bob.dial(bth, 0)
	if err != nil {
		t.Fatalf("another user's connect: %v", err)
	}
	c.Close()

	anon := a.anonymous()
	for i := range 3 {
		if r := anon.do("GET", "/api/threads/"+th+"/stream", nil); r.status != http.StatusUnauthorized {
			t.Fatalf("anonymous connect %d: %d, want 401", i+1, r.status)
		}
	}
	if r := anon.do("GET", "/api/threads/"+th+"/stream", nil); r.status != http.StatusTooManyRequests || r.errorCode() != "rate_limited" {
		t.Errorf("4th anonymous connect: %d %s, want 429 rate_limited", r.status, r.body)
	}
}

// TestThreadCreationLimit: a thread created empty and one created with
// its first message (the new-thread page) share one per-user budget of new
// threads; over it both answer 429 with a clear message and create nothing.
func TestThreadCreationLimit(t *testing.T) {
	a := newApp(t, withServer(func(o *Options) { o.ThreadsPerMinute = 2 }))
	ann := a.newUser("ann@example.com", false)
	bob := a.newUser("bob@example.com", false)
	ann.newThread("one")
	if r := ann.do("POST", "/api/threads", map[string]string{"content": "two"}); r.status != http.StatusCreated {
		t.Fatalf("with a message: %d %s, want 201", r.status, r.body)
	}
	r := ann.do("POST", "/api/threads", map[string]string{"title": "three"})
	if r.status != http.StatusTooManyRequests || r.errorCode() != "rate_limited" || !strings.Contains(string(r.body), "too many new threads") {
		t.Errorf("API over the limit: %d %s, want 429 rate_limited", r.status, r.body)
	}
	r = ann.do("POST", "/api/threads", map[string]string{"content": "four"})
	if r.status != http.StatusTooManyRequests || !strings.Contains(string(r.body), "too many new threads") {
		t.Errorf("with a message over the limit: %d %s, want 429 with the reason", r.status, r.body)
	}
	var list struct {
		Threads []threadJSON `json:"threads"`
	}
	ann.mustJSON("GET", "/api/threads", nil, http.StatusOK, &list)
	if len(list.Threads) != 2 {
		t.Errorf("%d threads, want 2", len(list.Threads))
	}
	bob.newThread("bob's")
}
