package limits

import (
	"bytes"
	"container/list"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// ConnLimit is a listener that holds at most max connections at once,
// hijacked WebSockets included until they close, so slow or idle clients
// cannot pile up goroutines and file descriptors (docs/OPERATIONS.md
// "Connection limits").
//
// At the cap a new connection is still accepted, and the connection that
// has waited longest outside a request (still sending its headers or
// body, or idle between requests) is closed to make room: a client that sends its
// request at once is served even while hundreds of slow ones are
// connected, and the slow ones lose their place first. Only when every
// connection is inside a request does Accept wait, holding the one it
// accepted, until another closes or goes idle; later ones wait in the
// kernel's queue.
//
// Install it on the http.Server that serves it, which tells it when a
// request starts (the handler runs) and ends (the connection goes idle).
type ConnLimit struct {
	net.Listener
	max  int
	done chan struct{}
	once sync.Once
	// changed wakes a waiting Accept: a connection closed or left its
	// request. Cap 1, never blocks.
	changed chan struct{}
	evicted atomic.Int64

	mu      sync.Mutex
	open    int
	waiting list.List // *limitedConn outside a request, longest-waiting first
}

// LimitConns wraps ln to hold at most max connections.
func LimitConns(ln net.Listener, max int) *ConnLimit {
	return &ConnLimit{Listener: ln, max: max, done: make(chan struct{}), changed: make(chan struct{}, 1)}
}

// Install makes srv report request starts and idle connections to l and
// serve through it. Call it before srv.Serve(l).
//
// A request's body, up to bodyMax bytes, is read before the request counts
// as started: a client that trickles its body loses its place like one
// that trickles its headers. Handlers would hold that much in memory
// anyway (a JSON object, a form); the rest, if any, they read as usual.
func (l *ConnLimit) Install(srv *http.Server, bodyMax int64) {
	next := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
			if r.ContentLength != 0 && r.Body != http.NoBody {
				r.Body = preRead(r.Body, bodyMax)
			}
			l.setWaiting(c, false)
		}
		next.ServeHTTP(w, r)
	})
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		if lc, ok := c.(*limitedConn); ok && st == http.StateIdle {
			l.setWaiting(lc, true)
		}
	}
	// Shutdown waits for connections it thinks active, and one still
	// sending its headers looks active for five seconds.
	srv.RegisterOnShutdown(l.closeWaiting)
}

// closeWaiting closes every connection outside a request.
func (l *ConnLimit) closeWaiting() {
	l.mu.Lock()
	var conns []*limitedConn
	for e := l.waiting.Front(); e != nil; e = e.Next() {
		conns = append(conns, e.Value.(*limitedConn))
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

type connKey struct{}

// preRead reads up to n bytes of body now and returns a body that yields
// them, then whatever the read stopped at: the rest of the body, or the
// error that ended it.
func preRead(body io.ReadCloser, n int64) io.ReadCloser {
	b, err := io.ReadAll(io.LimitReader(body, n))
	rest := io.Reader(body)
	if err != nil {
		rest = errReader{err}
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), rest), body}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// Open returns the connections held now.
func (l *ConnLimit) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Evicted returns how many waiting connections were closed to make room.
func (l *ConnLimit) Evicted() int64 { return l.evicted.Load() }

// Accept accepts the next connection, making room for it first.
func (l *ConnLimit) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			lc := &limitedConn{Conn: c, l: l}
			lc.elem = l.waiting.PushBack(lc)
			l.mu.Unlock()
			return lc, nil
		}
		var victim *limitedConn
		if front := l.waiting.Front(); front != nil {
			victim = l.waiting.Remove(front).(*limitedConn)
			victim.elem = nil
		}
		l.mu.Unlock()
		if victim != nil {
			l.evicted.Add(1)
			_ = victim.Close()
			continue
		}
		select {
		case <-l.changed:
		case <-l.done:
			_ = c.Close()
			return nil, net.ErrClosed
		}
	}
}

// Close stops accepting; connections already held stay open.
func (l *ConnLimit) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// setWaiting moves c into or out of the list eviction picks from; a
// connection that waits again goes to the back.
func (l *ConnLimit) setWaiting(c *limitedConn, waiting bool) {
	l.mu.Lock()
	if c.closed {
		l.mu.Unlock()
		return
	}
	if c.elem != nil {
		l.waiting.Remove(c.elem)
		c.elem = nil
	}
	if waiting {
		c.elem = l.waiting.PushBack(c)
	}
	l.mu.Unlock()
	if waiting {
		l.wake()
	}
}

func (l *ConnLimit) wake() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// release gives c's slot back, once however often c is closed.
func (l *ConnLimit) release(c *limitedConn) {
	l.mu.Lock()
	if c.closed {
		l.mu.Unlock()
		return
	}
	if c.elem != nil {
		l.waiting.Remove(c.elem)
		c.elem = nil
	}
	c.closed = true
	l.open--
	l.mu.Unlock()
	l.wake()
}

// limitedConn gives its slot back on its first Close, whoever calls it:
// the HTTP server, the WebSocket hub after a hijack, or an eviction.
type limitedConn struct {
	net.Conn
	l *ConnLimit
	// elem and closed are guarded by l.mu.
	elem   *list.Element
	closed bool
}

// NetConn returns the connection under the limit's accounting, as
// tls.Conn does: the hub writes frames on it with writev, which only a
// socket itself offers (client.flush).
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.l.release(c)
	return err
}

// CloseWrite keeps the TCP half-close the HTTP server uses to end a
// response cleanly before closing.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
