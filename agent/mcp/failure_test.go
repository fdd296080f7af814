package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"herd/agent/mcp/mcptest"
	"io"
	stdlog "log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd/agent/mcp"
)

// The secrets of an HTTP server's configuration: a token in its URL's
// path, an api_key in its query, a header value.
const (
	pathSecret   = "p4th-s3cret-0042"
	querySecret  = "qu3ry-s3cret-0042"
	headerSecret = "h3ader-s3cret-0042"
)

var secrets = []string{pathSecret, querySecret, headerSecret}

// leaks names every secret in text, in any case, as written or escaped.
func leaks(text string) []string {
	var out []string
	low := strings.ToLower(text)
	for _, s := range secrets {
		for _, form := range []string{s, url.QueryEscape(s), strings.ReplaceAll(s, "-", `\u002d`)} {
			if strings.Contains(low, strings.ToLower(form)) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// flaky is a real MCP server over HTTP (the test server, and leak, which
// answers with a JSON-RPC error quoting the secrets) that can be told to
// fail: refuse connections, answer 401 or 500, or answer something that
// is not MCP. Every failing answer quotes the request's URL and headers,
// as careless servers do.
type flaky struct {
	srv  *httptest.Server
	mcp  *sdk.Server
	mode atomic.Value // string: "" serves MCP
}

func serveFlaky(t *testing.T, tls bool) *flaky {
	t.Helper()
	f := &flaky{}
	f.mcp, _ = newTestServer()
	f.mcp.AddTool(&sdk.Tool{Name: "leak", Description: "Answers with an error quoting its secrets.", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32000, Message: "no such key " + querySecret + " at /t/" + pathSecret + "/mcp for Bearer " + headerSecret}
	})
	f.mode.Store("")
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return f.mcp }, nil)
	handler := mcptest.Failing(mcpHandler, func() string { return f.mode.Load().(string) })
	f.srv = httptest.NewUnstartedServer(handler)
	if tls {
		// herd's refused handshakes are the point, not news.
		f.srv.Config.ErrorLog = stdlog.New(io.Discard, "", 0)
		f.srv.StartTLS()
	} else {
		f.srv.Start()
	}
	t.Cleanup(f.stop)
	return f
}

// url is the server's address with a secret in the path and the query.
func (f *flaky) url() string {
	return f.srv.URL + "/t/" + pathSecret + "/mcp?api_key=" + querySecret
}

// fail makes it answer the way mode says from now on; "refused" closes
// it, so connecting is refused.
func (f *flaky) fail(mode string) {
	if mode == "refused" {
		f.stop()
		return
	}
	f.mode.Store(mode)
}

func (f *flaky) stop() {
	f.srv.Config.SetKeepAlivesEnabled(false)
	f.srv.CloseClientConnections()
	f.srv.Close()
	for ss := range f.mcp.Sessions() {
		_ = ss.Close()
	}
}

// syncBuffer is a log destination safe for the server's goroutines and
// the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startLogged runs cfg's server with short backoffs, logging to log.
func startLogged(t *testing.T, log *syncBuffer, cfg mcp.ServerConfig) *mcp.Servers {
	t.Helper()
	s := mcp.New([]mcp.ServerConfig{cfg}, mcp.Options{Logger: slog.New(slog.NewTextHandler(log, nil)), MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// waitDown waits until the server has failed to connect again since it
// went away: it is not connected, and its last error is a connect's.
func waitDown(t *testing.T, s *mcp.Servers) mcp.ServerStatus {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		changed := s.Changed()
		st := s.Status()[0]
		if st.State != mcp.StateConnected && strings.HasPrefix(st.LastError, "connect") {
			return st
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the server never failed to connect: %+v", st)
		}
	}
}

var refIn = regexp.MustCompile(`ref ([0-9a-f]{8})\)`)

// An HTTP server whose URL holds secrets fails in each way a server
// fails, after herd connected: what the model reads of the failed call
// and of the next one (the server's state), the admin's status and the
// log say what herd was doing, the host and what went wrong, with a
// reference the admin's status lists, and no secret (docs/DESIGN.md §4).
func TestHTTPFailuresKeepTheURLSecret(t *testing.T) {
	tests := []struct {
		mode string
		want string // in what the model reads
	}{
		{mode: "refused", want: "connection refused"},
		{mode: "401", want: "HTTP 401 Unauthorized"},
		{mode: "500", want: "HTTP 500 Internal Server Error"},
		{mode: "html", want: "its answer is not MCP (neither JSON nor an event stream)"},
		{mode: "json", want: "its answer is not valid MCP"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			f := serveFlaky(t, false)
			var log syncBuffer
			s := startLogged(t, &log, mcp.ServerConfig{Name: "fx", URL: f.url(), Headers: map[string]string{"Authorization": "Bearer " + headerSecret}, TimeoutSeconds: 5})
			echo := toolsOf(t, s, false)["mcp__fx__echo"]
			if got, err := call(t, echo, `{"text":"hi"}`); got != "echo: hi" || err != nil {
				t.Fatalf("before the failure: %q, %v", got, err)
			}
			host := strings.TrimPrefix(f.srv.URL, "http://")

			f.fail(tt.mode)
			_, callErr := call(t, echo, `{"text":"hi"}`)
			if callErr == nil {
				t.Fatal("a call to a failing server succeeded")
			}
			// A failed call may leave the session up: end it, so herd
			// connects again, and fails.
			f.srv.CloseClientConnections()
			st := waitDown(t, s)
			_, stateErr := call(t, echo, `{"text":"hi"}`)
			if stateErr == nil {
				t.Fatal("a call to a server that is down succeeded")
			}
			status, _ := json.Marshal(s.Status())
			model := callErr.Error() + "\n" + stateErr.Error()
			for name, text := range map[string]string{"the model": model, "the admin's status": string(status), "the log": log.String()} {
				if l := leaks(text); len(l) > 0 {
					t.Errorf("%s shows %v:\n%s", name, l, text)
				}
			}
			if !strings.Contains(callErr.Error(), "call echo ("+host+"): ") || !strings.Contains(model, tt.want) {
				t.Errorf("the model reads %q, want the call, the host %s and %q", model, host, tt.want)
			}
			if !strings.Contains(stateErr.Error(), "connect ("+host+"): ") || !strings.Contains(st.LastError, "connect ("+host+"): ") {
				t.Errorf("the next call reads %q, the admin %q: want the failed connect", stateErr, st.LastError)
			}
			// Each reference the model was given is the admin's to look up.
			for _, e := range []error{callErr, stateErr} {
				m := refIn.FindStringSubmatch(e.Error())
				if m == nil || !slices.ContainsFunc(st.Failures, func(f mcp.Failure) bool { return f.Ref == m[1] }) {
					t.Errorf("%q: its reference is not among the admin's failures %+v", e, st.Failures)
				} else if !strings.Contains(log.String(), "ref="+m[1]) {
					t.Errorf("the log lacks the reference %s", m[1])
				}
			}
		})
	}
}

// A server whose certificate herd does not trust, from the start: the
// admin and the log read that TLS failed, and no secret.
func TestHTTPSFailureKeepsTheURLSecret(t *testing.T) {
	f := serveFlaky(t, true)
	var log syncBuffer
	s := startLogged(t, &log, mcp.ServerConfig{Name: "fx", URL: f.url(), Headers: map[string]string{"Authorization": "Bearer " + headerSecret}, TimeoutSeconds: 5})
	if got := toolsOf(t, s, false); len(got) != 0 {
		t.Fatalf("tools of an untrusted server: %v", names(got))
	}
	st := waitDown(t, s)
	if !strings.Contains(st.LastError, "TLS: its certificate is signed by an unknown authority") {
		t.Errorf("last error = %q, want the TLS failure", st.LastError)
	}
	status, _ := json.Marshal(s.Status())
	for name, text := range map[string]string{"the admin's status": string(status), "the log": log.String()} {
		if l := leaks(text); len(l) > 0 {
			t.Errorf("%s shows %v:\n%s", name, l, text)
		}
	}
}

// A server's own error answer reaches the model, without the secrets of
// the server's configuration should it quote them.
func TestErrorAnswerLosesTheSecrets(t *testing.T) {
	f := serveFlaky(t, false)
	s := start(t, mcp.ServerConfig{Name: "fx", URL: f.url(), Headers: map[string]string{"Authorization": "Bearer " + headerSecret}, TimeoutSeconds: 5})
	_, err := call(t, toolsOf(t, s, false)["mcp__fx__leak"], `{}`)
	if err == nil {
		t.Fatal("leak succeeded")
	}
	want := "the MCP server fx answered the call with an error: no such key [redacted] at [redacted] for [redacted]"
	if err.Error() != want {
		t.Errorf("the model reads %q, want %q", err, want)
	}
}

// A stdio server's stderr is for admins only (docs/DESIGN.md §4): a
// server that prints on stderr and exits mid-call, then fails to start
// again, gives the model and the user "the server failed" with a
// reference; the admin's status has what it printed under that
// reference, and its stderr, without the values of its env.
func TestStdioStderrIsForAdmins(t *testing.T) {
	const token = "env-t0ken-0042"
	cfg := stdioServer("kid")
	cfg.Env[envToken] = token
	cfg.Env[envBroken] = t.TempDir() + "/broken"
	var log syncBuffer
	s := startLogged(t, &log, cfg)
	ts := toolsOf(t, s, true)

	_, callErr := call(t, ts["mcp__kid__crash"], `{"note":"crash-note-0042"}`)
	if callErr == nil {
		t.Fatal("a call whose server exited succeeded")
	}
	deadline := time.After(15 * time.Second)
	var st mcp.ServerStatus
	for {
		changed := s.Changed()
		if st = s.Status()[0]; strings.HasPrefix(st.LastError, "start: ") {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("the server never failed to start again: %+v", st)
		}
	}
	_, stateErr := call(t, ts["mcp__kid__echo"], `{"text":"hi"}`)
	if stateErr == nil {
		t.Fatal("a call to a server that failed to start succeeded")
	}

	for _, e := range []error{callErr, stateErr} {
		text := e.Error()
		for _, printed := range []string{"crash-note-0042", "the disk is gone", token, "exit status"} {
			if strings.Contains(text, printed) {
				t.Errorf("the model reads %q: it holds %q, of the server's stderr or process", text, printed)
			}
		}
		m := refIn.FindStringSubmatch(text)
		if m == nil || !strings.Contains(text, "the server failed") {
			t.Errorf("the model reads %q, want the server failed and a reference", text)
			continue
		}
		i := slices.IndexFunc(st.Failures, func(f mcp.Failure) bool { return f.Ref == m[1] })
		if i < 0 {
			t.Errorf("%s is not among the admin's failures %+v", m[1], st.Failures)
		}
	}
	if !strings.Contains(st.LastError, "stderr: cannot start: the disk is gone; token [redacted]") || !strings.Contains(st.Stderr, "cannot start: the disk is gone; token [redacted]") {
		t.Errorf("the admin's status = %+v, want the failed start's stderr, its env values redacted", st)
	}
	status, _ := json.Marshal(st)
	if !strings.Contains(string(status), "crash-note-0042") {
		t.Errorf("the admin's failures lack what the server printed as it exited: %s", status)
	}
	for name, text := range map[string]string{"the admin's status": string(status), "the log": log.String()} {
		if strings.Contains(text, token) {
			t.Errorf("%s shows the env value %s:\n%s", name, token, text)
		}
	}
}
