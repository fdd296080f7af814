package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"herd/internal/pgtest"
)

// pgProxy stands between one herd and PostgreSQL, so a test can cut that
// herd's LISTEN connection (told from the others by its application_name
// in the startup message) and keep it from reconnecting while another
// instance acts, then let it back; the herd's other connections go on.
type pgProxy struct {
	ln     net.Listener
	target func() (net.Conn, error)
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool // → a listener's
	wg     sync.WaitGroup
}

// newPGProxy proxies to the server of dsn and returns the proxy and the
// DSN that connects through it (without TLS, so the startup message can
// be read).
func newPGProxy(t *testing.T, dsn string) (*pgProxy, string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	network, addr := "tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	if strings.HasPrefix(cfg.Host, "/") {
		network, addr = "unix", filepath.Join(cfg.Host, fmt.Sprintf(".s.PGSQL.%d", cfg.Port))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln, conns: map[net.Conn]bool{}, target: func() (net.Conn, error) { return net.Dial(network, addr) }}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Host = net.JoinHostPort(host, port)
		q := u.Query()
		q.Set("sslmode", "disable")
		u.RawQuery = q.Encode()
		return p, u.String()
	}
	return p, dsn + " host=" + host + " port=" + port + " sslmode=disable"
}

func (p *pgProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve reads the startup message, refuses a listener while cut, and
// pipes the connection.
func (p *pgProxy) serve(c net.Conn) {
	buf := make([]byte, 8192)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(buf)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		_ = c.Close()
		return
	}
	listener := bytes.Contains(buf[:n], []byte("herd listener"))
	up, err := p.target()
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if listener && p.cut {
		p.mu.Unlock()
		_, _ = c.Close(), up.Close()
		return
	}
	p.conns[c], p.conns[up] = listener, listener
	p.mu.Unlock()
	if _, err := up.Write(buf[:n]); err != nil {
		_, _ = c.Close(), up.Close()
	}
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_, _ = dst.Close(), src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}
	p.wg.Go(func() { pipe(up, c) })
	pipe(c, up)
}

// sever closes the listener's connection through the proxy and refuses
// a new one until restore.
func (p *pgProxy) sever() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c, listener := range p.conns {
		if listener {
			_ = c.Close()
		}
	}
}

func (p *pgProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *pgProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// TestClusterReconnectRechecksSockets: while instance B's LISTEN
// connection is cut and cannot reconnect, an admin on A promotes a user,
// which ends their sessions, and turns token figures off; the notices of
// both are lost to B. Once B listens again it re-checks every open
// socket: the user's session socket and their API-token socket (the token
// lives on, but its user's role changed) close with 4401, as on A, and a
// page open on B hears the token switch.
func TestClusterReconnectRechecksSockets(t *testing.T) {
	dsn := pgtest.DSN(t)
	proxy, viaProxy := newPGProxy(t, dsn)
	// A lease longer than the cut: B must not be declared dead meanwhile.
	a := startHerdWith(t, t.TempDir(), clusterEnv(dsn, "HERD_CLUSTER_LEASE_SECONDS=60")...)
	b := startHerdWith(t, t.TempDir(), clusterEnv(viaProxy, "HERD_CLUSTER_LEASE_SECONDS=60")...)
	admin := a.signIn()
	var x struct{ ID string }
	admin.call("POST", "/api/admin/users", map[string]string{"email": "x@example.com", "password": "tall ocean lantern", "role": "user"}, &x)
	cx := b.signInAs("x@example.com", "tall ocean lantern")
	var tok struct{ Token string }
	cx.call("POST", "/api/tokens", map[string]string{"name": "cli"}, &tok)
	var th struct{ ID string }
	cx.call("POST", "/api/threads", map[string]string{"title": "x"}, &th)
	session := dialStream(t, b, cx, th.ID)
	token, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(b.url, "http")+"/api/threads/"+th.ID+"/stream", http.Header{"Authorization": {"Bearer " + tok.Token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	defer token.Close()
	cb := b.signIn()
	var mine struct{ ID string }
	cb.call("POST", "/api/threads", map[string]string{"title": "admin"}, &mine)
	page := dialStream(t, b, cb, mine.ID)

	// Every socket is past its first replay and live before the cut: a run
	// in each thread, read to its end.
	cx.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": "hello"}, nil)
	cb.call("POST", "/api/threads/"+mine.ID+"/runs", map[string]string{"content": "hello"}, nil)
	for _, conn := range []*websocket.Conn{session, token, page} {
		for f := readFrame(t, conn, b); f.Type != "run.end"; f = readFrame(t, conn, b) {
		}
	}

	proxy.sever()
	admin.call("PATCH", "/api/admin/users/"+x.ID, map[string]string{"role": "admin"}, nil)
	admin.call("PUT", "/api/admin/settings", map[string]bool{"token_usage_enabled": false}, nil)
	proxy.restore()

	var seen []string
	for deadline := time.Now().Add(60 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatalf("no settings frame on B's page after the reconnect; got %v\n%s", seen, b.log.String())
		}
		f := readFrame(t, page, b)
		seen = append(seen, f.Type)
		if f.Type == "settings" {
			if string(f.Data) != `{"token_usage_enabled":false}` {
				t.Errorf("settings frame on B after the reconnect: %s", f.Data)
			}
			break
		}
	}
	for name, conn := range map[string]*websocket.Conn{"session": session, "API token": token} {
		_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
		for {
			_, raw, err := conn.ReadMessage()
			if err == nil {
				var f liveFrame
				_ = json.Unmarshal(raw, &f)
				continue
			}
			if !websocket.IsCloseError(err, 4401) {
				t.Errorf("the %s socket on B after the promotion on A: %v, want close 4401\n%s", name, err, b.log.String())
			}
			break
		}
	}
	if !strings.Contains(b.log.String(), "cluster: listening again") {
		t.Errorf("B's listener never reconnected:\n%s", b.log.String())
	}
	stopHerd(t, a)
	stopHerd(t, b)
}
