package limits

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// limitedServer serves h through a ConnLimit of max on loopback.
func limitedServer(t *testing.T, max int, h http.Handler) (*ConnLimit, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := LimitConns(ln, max)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}
	lim.Install(srv, 1<<10)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lim) }()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return lim, ln.Addr().String()
}

// slowClient opens a connection that sends half a request's headers and
// then nothing.
func slowClient(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

// get sends one request on a fresh connection and returns its status.
func get(t *testing.T, addr string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitFor waits until cond holds; the limiter's counters change on other
// goroutines (the server's accept loop) with nothing to signal a test.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConnLimitEvictsSlowClientsForARealOne(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	lim, addr := limitedServer(t, 8, ok)
	slow := make([]net.Conn, 30)
	for i := range slow {
		slow[i] = slowClient(t, addr)
	}
	waitFor(t, "the slow clients to be accepted or evicted", func() bool { return lim.Evicted() == int64(len(slow)-8) })
	if got := lim.Open(); got != 8 {
		t.Errorf("open = %d, want the cap 8", got)
	}
	start := time.Now()
	if got := get(t, addr); got != http.StatusNoContent {
		t.Errorf("status %d, want 204", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a prompt client waited %v behind slow ones", d)
	}
	// The oldest slow clients lost their place first.
	// Closed with its headers unread, it may see a reset rather than EOF.
	_ = slow[0].SetReadDeadline(time.Now().Add(time.Second))
	if _, err := slow[0].Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the first slow client: read %v, want it closed to make room", err)
	}
	if got := lim.Open(); got > 8 {
		t.Errorf("open = %d after the request, above the cap 8", got)
	}
}

func TestConnLimitWaitsWhenEveryConnectionIsBusy(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 8)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
		w.WriteHeader(http.StatusNoContent)
	})
	lim, addr := limitedServer(t, 8, h)
	results := make(chan int, 9)
	for range 8 {
		go func() { results <- get(t, addr) }()
	}
	for range 8 {
		<-entered
	}
	go func() { results <- get(t, addr) }()
	select {
	case <-entered:
		t.Fatal("a ninth request was served while eight were busy at a cap of 8")
	case <-time.After(200 * time.Millisecond):
	}
	if lim.Evicted() != 0 {
		t.Errorf("evicted %d busy connections", lim.Evicted())
	}
	close(release)
	for range 9 {
		if got := <-results; got != http.StatusNoContent {
			t.Errorf("status %d, want 204", got)
		}
	}
	waitFor(t, "every connection to close", func() bool { return lim.Open() == 0 })
}

func TestConnLimitCountsHijackedConnectionsUntilClosed(t *testing.T) {
	hijacked := make(chan net.Conn, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		hijacked <- c
	})
	lim, addr := limitedServer(t, 8, h)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	sc := <-hijacked
	for range 20 {
		slowClient(t, addr)
	}
	waitFor(t, "the slow clients to be evicted", func() bool { return lim.Evicted() == 20-7 })
	if got := lim.Open(); got != 8 {
		t.Errorf("open = %d, want 8 (the socket and seven slow clients)", got)
	}
	// The hijacked socket is never the one evicted.
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the hijacked socket: read %v, want it open (a read timeout)", err)
	}
	_ = sc.Close()
	waitFor(t, "the socket's slot to be given back", func() bool { return lim.Open() == 7 })
}

func TestConnLimitTakesTheSlotOfAConnectionThatGoesIdle(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 9)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		if r.URL.Path == "/slow" {
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	})
	lim, addr := limitedServer(t, 8, h)
	// Eight keep-alive connections, each inside a request.
	conns := make([]net.Conn, 8)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
		_, _ = io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
		<-entered
	}
	served := make(chan int, 1)
	go func() { served <- get(t, addr) }()
	select {
	case <-entered:
		t.Fatal("served beyond the cap while every connection was busy")
	case <-time.After(100 * time.Millisecond):
	}
	// One request ends; its connection stays open, idle: the waiting
	// client takes its slot at once, not after the idle timeout.
	release <- struct{}{}
	if resp, err := http.ReadResponse(bufio.NewReader(conns[0]), nil); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("first response: %v", err)
	}
	select {
	case got := <-served:
		if got != http.StatusNoContent {
			t.Errorf("status %d, want 204", got)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the waiting client was not served when a connection went idle")
	}
	if lim.Evicted() != 1 {
		t.Errorf("evicted %d, want the one idle connection", lim.Evicted())
	}
	close(release)
}

func TestConnLimitEvictsClientsThatTrickleTheirBody(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = w.Write(b)
	})
	lim, addr := limitedServer(t, 8, echo)
	for range 20 {
		c := slowClient(t, addr)
		_, _ = io.WriteString(c, "Content-Length: 100\r\n\r\n0123456789")
	}
	waitFor(t, "the slow bodies to be evicted", func() bool { return lim.Evicted() == 20-8 })
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response beside slow bodies: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hello" || time.Since(start) > time.Second {
		t.Errorf("got %q after %v, want hello at once", b, time.Since(start))
	}
}

func TestPreReadKeepsTheBodyWhole(t *testing.T) {
	long := strings.Repeat("x", 3000)
	for _, c := range []struct {
		name string
		body io.Reader
		n    int64
		want string
		err  error
	}{
		{"shorter than n", strings.NewReader("hello"), 1024, "hello", nil},
		{"longer than n", strings.NewReader(long), 1024, long, nil},
		{"an error mid-body", io.MultiReader(strings.NewReader("hel"), iotest.ErrReader(io.ErrUnexpectedEOF)), 1024, "hel", io.ErrUnexpectedEOF},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := io.ReadAll(preRead(io.NopCloser(c.body), c.n))
			if string(got) != c.want || !errors.Is(err, c.err) {
				t.Errorf("read %d bytes, %v; want %d bytes, %v", len(got), err, len(c.want), c.err)
			}
		})
	}
}
