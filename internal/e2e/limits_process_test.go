package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"herd/internal/config"
)

// These tests hold the server's limits against the real binary
// (docs/OPERATIONS.md "Connection limits", "Metrics").

// metric reads one series from herd's metrics listener.
func (p *proc) metric(series string) float64 {
	p.t.Helper()
	resp, err := http.Get(p.metricsURL)
	if err != nil {
		p.t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		p.t.Fatalf("no series %s in:\n%s", series, b)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// fds counts the process's open file descriptors.
func (p *proc) fds() int {
	p.t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
	if err != nil {
		p.t.Fatal(err)
	}
	return len(ents)
}

// slowloris opens n connections that each send part of a request's
// headers and then trickle one more header line every second, as the
// attack does to look alive. It returns when all are open; the test's end
// closes them.
func slowloris(t *testing.T, addr string, n int) {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		conns = append(conns, c)
		_, _ = io.WriteString(c, "GET /api/threads HTTP/1.1\r\nHost: "+addr+"\r\n")
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, c := range conns {
				_ = c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				_, _ = fmt.Fprintf(c, "X-Slow-%d: 1\r\n", i)
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
}

// timedGet is one request on a fresh connection and how long it took.
func timedGet(t *testing.T, url string) (int, time.Duration) {
	t.Helper()
	cl := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := cl.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v after %v", url, err, time.Since(start))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start)
}

// TestSlowlorisIsCappedAndOthersAreServed: 300 clients that never finish
// their headers hold at most server.max_connections connections (and the
// goroutines and descriptors behind them), with the shipped default and
// with a small cap, and a client that sends its request at once is still
// answered within a second.
func TestSlowlorisIsCappedAndOthersAreServed(t *testing.T) {
	const attackers = 300
	// The binary's built-in defaults: main.go embeds config.example.yaml.
	defaultConfig, err := os.ReadFile(repoPath(t, "config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := config.Load(defaultConfig, "", nil, config.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if defaults.Server.MaxConnections >= attackers {
		t.Fatalf("the default server.max_connections (%d) is not below %d attackers: raise them to keep this test meaningful", defaults.Server.MaxConnections, attackers)
	}
	for _, maxConns := range []int{defaults.Server.MaxConnections, 64} {
		t.Run(fmt.Sprintf("max_connections %d", maxConns), func(t *testing.T) {
			p := startHerdWith(t, t.TempDir(), fmt.Sprintf("HERD_SERVER_MAX_CONNECTIONS=%d", maxConns))
			slowlorisAgainst(t, p, attackers, maxConns)
		})
	}
}

func slowlorisAgainst(t *testing.T, p *proc, attackers, maxConns int) {
	c := p.signIn()
	baseGoroutines, baseFDs := p.metric("go_goroutines"), p.fds()

	slowloris(t, strings.TrimPrefix(p.url, "http://"), attackers)
	deadline := time.Now().Add(10 * time.Second)
	for p.metric("herd_http_connections_evicted_total") < float64(attackers-maxConns) {
		if time.Now().After(deadline) {
			t.Fatalf("only %v of %d slow clients were evicted past the cap", p.metric("herd_http_connections_evicted_total"), attackers-maxConns)
		}
		time.Sleep(50 * time.Millisecond)
	}

	t.Logf("with %d slow clients: %v connections held, %v evicted, goroutines %v (before %v), fds %d (before %d)",
		attackers, p.metric("herd_http_connections"), p.metric("herd_http_connections_evicted_total"), p.metric("go_goroutines"), baseGoroutines, p.fds(), baseFDs)
	if got := p.metric("herd_http_connections"); got > float64(maxConns) {
		t.Errorf("herd holds %v connections, above the cap %d", got, maxConns)
	}
	// One goroutine per held connection, besides what herd ran before;
	// the slack covers the scrape itself and the runtime's own.
	if got := p.metric("go_goroutines"); got > baseGoroutines+float64(maxConns)+20 {
		t.Errorf("%v goroutines with %d slow clients (%v before, cap %d)", got, attackers, baseGoroutines, maxConns)
	}
	if got := p.fds(); got > baseFDs+maxConns+10 {
		t.Errorf("%d open descriptors with %d slow clients (%d before, cap %d)", got, attackers, baseFDs, maxConns)
	}

	for _, path := range []string{"/healthz", "/login"} {
		status, took := timedGet(t, p.url+path)
		t.Logf("GET %s beside them: %d in %v", path, status, took)
		if status != http.StatusOK || took > time.Second {
			t.Errorf("GET %s beside %d slow clients: %d after %v, want 200 within 1s", path, attackers, status, took)
		}
	}
	var threads json.RawMessage
	start := time.Now()
	c.call("GET", "/api/threads", nil, &threads)
	if took := time.Since(start); took > time.Second {
		t.Errorf("a signed-in API call took %v beside %d slow clients", took, attackers)
	}
	// Slow clients do not hold up a graceful stop either.
	start = time.Now()
	stopHerd(t, p)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("stopping beside %d slow clients took %v", attackers, took)
	}
}

// TestTimeoutsCutSlowClientsButNotWebSockets runs herd with timeouts of
// one to three seconds: a client that never finishes its headers or its body and an
// idle keep-alive connection are closed, while a WebSocket stays open and
// carries frames long after every timeout has passed.
func TestTimeoutsCutSlowClientsButNotWebSockets(t *testing.T) {
	// Signing in checks a bcrypt hash, which a loaded machine may take
	// longer over than the write timeout below, and the sign-in is not
	// what this test is about: it signs in under the default timeouts,
	// and the session outlives a restart.
	dir := t.TempDir()
	first := startHerd(t, dir)
	c := first.signIn()
	stopHerd(t, first)
	p := startHerdWith(t, dir,
		"HERD_SERVER_READ_HEADER_TIMEOUT_SECONDS=1", "HERD_SERVER_READ_TIMEOUT_SECONDS=1",
		"HERD_SERVER_WRITE_TIMEOUT_SECONDS=3", "HERD_SERVER_IDLE_TIMEOUT_SECONDS=1")
	c.base = p.url // the cookie jar keys cookies by host, not port
	addr := strings.TrimPrefix(p.url, "http://")

	closedWithin := func(name string, conn net.Conn, within time.Duration) {
		t.Helper()
		start := time.Now()
		_ = conn.SetReadDeadline(time.Now().Add(within))
		_, err := io.Copy(io.Discard, conn)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s: still open after %v", name, within)
			return
		}
		t.Logf("%s: closed after %v", name, time.Since(start).Round(10*time.Millisecond))
	}
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	_, _ = io.WriteString(slow, "GET / HTTP/1.1\r\nHost: "+addr+"\r\n")
	closedWithin("a client that never finishes its headers", slow, 3*time.Second)

	body, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	_, _ = io.WriteString(body, "POST /api/auth/login HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"email\":")
	closedWithin("a client that never finishes its body", body, 3*time.Second)

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	_, _ = io.WriteString(idle, "GET /healthz HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(idle), nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("keep-alive request: %v", err)
	}
	closedWithin("an idle keep-alive connection", idle, 3*time.Second)

	var th struct{ ID string }
	c.call("POST", "/api/threads", map[string]string{"title": "long socket"}, &th)
	hdr := http.Header{"Origin": {p.url}}
	for _, ck := range c.http.Jar.Cookies(mustParse(p.url)) {
		hdr.Add("Cookie", ck.Name+"="+ck.Value)
	}
	ws, resp, err := websocket.DefaultDialer.Dial("ws://"+addr+"/api/threads/"+th.ID+"/stream", hdr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	defer ws.Close()
	frames := make(chan string, 256)
	readErr := make(chan error, 1)
	go func() {
		for {
			_, raw, err := ws.ReadMessage()
			if err != nil {
				readErr <- err
				close(frames)
				return
			}
			var f struct{ Type string }
			_ = json.Unmarshal(raw, &f)
			frames <- f.Type
		}
	}()
	// Past every timeout: read, write and idle.
	time.Sleep(4 * time.Second)
	// The idle timeout has closed the client's keep-alive connection; a
	// POST sent on it as it closes would fail with EOF (Go retries only
	// idempotent requests), so the run starts on a new one.
	c.http.CloseIdleConnections()
	c.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": "hello"}, nil)
	wait := time.After(10 * time.Second)
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatalf("the WebSocket closed after the timeouts: %v", <-readErr)
			}
			if f == "run.end" {
				stopHerd(t, p)
				return
			}
		case <-wait:
			t.Fatal("no run.end frame on the WebSocket")
		}
	}
}

// TestMetricsAreNotOnTheMainAddress: /metrics is served on the metrics
// address, and on the main one only to bearers of metrics.token.
func TestMetricsAreNotOnTheMainAddress(t *testing.T) {
	const token = "metrics-token-0123456789"
	// refused is any answer but 200: a bearer token on the main address
	// is taken for an API token and sent to sign in.
	const refused = -1
	get := func(url, auth string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		name  string
		env   []string
		cases []struct {
			where, auth string
			want        int
		}
	}{
		{name: "no token", cases: []struct {
			where, auth string
			want        int
		}{{"main", "", 404}, {"main", token, refused}, {"metrics", "", 200}}},
		{name: "with a token", env: []string{"HERD_METRICS_TOKEN=" + token}, cases: []struct {
			where, auth string
			want        int
		}{{"main", "", 401}, {"main", "wrong-token-wrong-token", 401}, {"main", token, 200}, {"metrics", "", 401}, {"metrics", token, 200}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := startHerdWith(t, t.TempDir(), c.env...)
			if p.metricsURL == "" {
				t.Fatalf("no metrics listener logged:\n%s", p.log.String())
			}
			for _, k := range c.cases {
				url := p.metricsURL
				if k.where == "main" {
					url = p.url + "/metrics"
				}
				status, body := get(url, k.auth)
				if status != k.want && (k.want != refused || status == http.StatusOK) {
					t.Errorf("%s address, token %q: %d, want %d", k.where, k.auth, status, k.want)
				}
				if shown := strings.Contains(body, "herd_llm_tokens_total") || strings.Contains(body, "go_goroutines"); shown != (k.want == http.StatusOK) {
					t.Errorf("%s address, token %q: figures shown = %v", k.where, k.auth, shown)
				}
			}
			stopHerd(t, p)
		})
	}
	// Empty metrics.addr: no metrics listener at all.
	p := startHerdWith(t, t.TempDir(), "HERD_METRICS_ADDR=")
	if p.metricsURL != "" || strings.Contains(p.log.String(), "metrics are listening") {
		t.Errorf("a metrics listener with metrics.addr empty:\n%s", p.log.String())
	}
	if status, _ := get(p.url+"/metrics", ""); status != http.StatusNotFound {
		t.Errorf("/metrics on the main address: %d, want 404", status)
	}
	stopHerd(t, p)
}

// TestMetricsNeedTheTokenOnTheHostNetwork: with sandbox.network host,
// sandboxed commands share the machine's network, loopback included:
// herd refuses to start without metrics.token, naming the keys, and with
// one a command reaches the metrics listener but reads nothing without
// the token.
func TestMetricsNeedTheTokenOnTheHostNetwork(t *testing.T) {
	skipBwrap(t, "bwrap")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, herdBinary(t), "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "HERD_SANDBOX_MODE=bwrap", "HERD_SANDBOX_NETWORK=host", "HERD_METRICS_ADDR=127.0.0.1:0")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Errorf("host network, metrics and no token: %v, want exit 2", err)
	}
	for _, key := range []string{"sandbox.network", "metrics.token", "metrics.addr"} {
		if !strings.Contains(string(out), key) {
			t.Errorf("the refusal does not name %s:\n%s", key, out)
		}
	}

	const token = "metrics-token-0123456789"
	p := startHerdWith(t, t.TempDir(), "HERD_SANDBOX_MODE=bwrap", "HERD_SANDBOX_NETWORK=host", "HERD_METRICS_TOKEN="+token)
	c := p.signIn()
	th := runCommand(c, fmt.Sprintf("curl -s -o /dev/null -w 'anonymous=%%{http_code} ' %s; curl -s -o /dev/null -w 'bearer=%%{http_code}' -H 'Authorization: Bearer %s' %s", p.metricsURL, token, p.metricsURL))
	result := taskResult(t, c, th)
	if !strings.Contains(result, "anonymous=401") || !strings.Contains(result, "bearer=200") {
		t.Errorf("a sandboxed command on the host network: %q, want anonymous=401 (and bearer=200: it does reach the listener)", result)
	}
	stopHerd(t, p)
}
