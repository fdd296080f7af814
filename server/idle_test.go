package server

import (
	"runtime"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"herd/agent/event"
	"herd/server/hub"
)

// TestIdleSocketHoldsOneGoroutine proves what makes 10,000 idle sockets
// fit in one process (make load-idle): once connected, a socket costs
// one goroutine, its read loop, and the goroutine that writes to it exists
// only while there is something to write.
func TestIdleSocketHoldsOneGoroutine(t *testing.T) {
	const n = 10
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	before := settledGoroutines(t, -1)
	conns := make([]*websocket.Conn, n)
	for i := range conns {
		c, err := u.dial(th, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	waitClients(t, a.hub, n)
	idle := settledGoroutines(t, before+n)
	if got := idle - before; got > n {
		t.Fatalf("%d idle sockets hold %d goroutines, want at most %d", n, got, n)
	}
	a.hub.Publish("", "", event.Settings{TokenUsage: false})
	for _, c := range conns {
		if f, err := readFrame(c, 5*time.Second); err != nil || f.Type != hub.FrameSettings {
			t.Fatalf("frame %+v, %v; want settings", f, err)
		}
	}
	if after := settledGoroutines(t, idle); after != idle {
		t.Fatalf("after a frame to every socket: %d goroutines, want %d again", after, idle)
	}
}

// settledGoroutines waits up to 5 s for the goroutine count to reach
// want (-1: to stop changing), and returns it.
func settledGoroutines(t *testing.T, want int) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	prev := runtime.NumGoroutine()
	for {
		time.Sleep(20 * time.Millisecond)
		n := runtime.NumGoroutine()
		if n == want || (want < 0 && n == prev) || time.Now().After(deadline) {
			return n
		}
		prev = n
	}
}
