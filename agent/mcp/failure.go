package mcp

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// What goes wrong with a server is told in two ways (docs/DESIGN.md §4).
// Users and the model read what herd was doing, the server's host and
// what happened, in herd's own words, and a reference. Admins (the admin
// page, the log) read the same of an HTTP server; of a stdio server, the
// error itself and the last of its stderr. Neither ever holds an HTTP
// server's URL past its host, a header value or an env value: the SDK's
// and net/http's error texts quote the whole URL, so none of them is
// shown for an HTTP server, only what herd makes of them (describe).

// maxFailures is how many of a server's latest failures the admin page
// lists, so a reference a user was given can be looked up.
const maxFailures = 10

// Failure is one failure of a server as the admin page lists it: the
// reference users and the model were given with it, and what an admin
// may know of it.
type Failure struct {
	Ref   string    `json:"ref"`
	At    time.Time `json:"at"`
	Error string    `json:"error"`
}

// failure is a Failure with what users and the model read of it.
type failure struct {
	Failure
	public string
}

// fault records and logs that op failed with err, ctx being op's context
// and x what its HTTP requests met (nil for stdio), and returns the
// failure.
func (srv *server) fault(ctx context.Context, op string, err error, x *exchange) failure {
	f := failure{Failure: Failure{Ref: newRef(), At: time.Now()}}
	if srv.cfg.Stdio() {
		cause := "the server failed"
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cause = srv.noAnswer()
		}
		f.public = op + ": " + cause
		f.Error = op + ": " + srv.describe(ctx, err, x)
		if s := srv.stderr.String(); s != "" {
			f.Error += "; stderr: " + srv.redact(s)
		}
	} else {
		f.public = op + " (" + srv.host + "): " + srv.describe(ctx, err, x)
		f.Error = f.public
	}
	f.public += " (ref " + f.Ref + ")"
	f.Error += " (ref " + f.Ref + ")"
	// Logged before anyone can be given the reference.
	srv.owner.opts.Logger.Warn("mcp server failed", "mcp_server", srv.cfg.Name, "transport", srv.cfg.Transport(), "ref", f.Ref, "err", f.Error)
	srv.mu.Lock()
	srv.failures = append([]Failure{f.Failure}, srv.failures[:min(len(srv.failures), maxFailures-1)]...)
	srv.mu.Unlock()
	return f
}

// describe is what admins may read of err, which ended an operation
// with context ctx whose HTTP requests met x: a stdio server's error
// without its secrets; of an HTTP server's, only herd's account of it.
func (srv *server) describe(ctx context.Context, err error, x *exchange) string {
	if srv.cfg.Stdio() {
		return srv.redact(err.Error())
	}
	trouble, answered := x.result()
	switch {
	case trouble != "":
		return trouble
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return srv.noAnswer()
	case answered:
		// Answered, without trouble on the wire, and failed even so.
		return "its answer is not valid MCP"
	case x == nil, errors.Is(err, sdk.ErrConnectionClosed):
		return "the session ended"
	}
	return "the request failed"
}

func (srv *server) noAnswer() string {
	return fmt.Sprintf("no answer within %ds (timeout_seconds)", srv.cfg.TimeoutSeconds)
}

// newRef is a failure's reference: short, and unique enough to find in
// a server's latest failures and in the log.
func newRef() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// exchange is what the HTTP requests of one operation met: the latest
// thing that went wrong, in herd's words, and whether any was answered.
type exchange struct {
	mu       sync.Mutex
	trouble  string
	answered bool
}

type exchangeKey struct{}

// withExchange has the HTTP transport note what ctx's requests meet in x.
func withExchange(ctx context.Context, x *exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, x)
}

func exchangeOf(ctx context.Context) *exchange {
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	return x
}

// note records one request's outcome.
func (x *exchange) note(req *http.Request, resp *http.Response, err error) {
	if x == nil {
		return
	}
	var trouble string
	switch {
	case err != nil:
		trouble = netCause(err)
	case req.Method == http.MethodGet && resp.StatusCode == http.StatusMethodNotAllowed:
		// A server without the optional event stream of its own.
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		trouble = "it redirected, and herd follows no redirect (set url to the final address)"
	case resp.StatusCode >= 400:
		trouble = strings.TrimSpace(fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode)))
	case !mcpContent(resp):
		trouble = "its answer is not MCP (neither JSON nor an event stream)"
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if trouble != "" {
		x.trouble = trouble
	} else if err == nil && resp.StatusCode < 300 {
		x.answered = true
	}
}

func (x *exchange) result() (trouble string, answered bool) {
	if x == nil {
		return "", false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.trouble, x.answered
}

// mcpContent reports whether a 2xx answer can be MCP: JSON, an event
// stream, or nothing.
func mcpContent(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case mt == "application/json", mt == "text/event-stream":
		return true
	case resp.StatusCode == http.StatusAccepted, resp.StatusCode == http.StatusNoContent:
		return true
	}
	return mt == "" && resp.ContentLength == 0
}

// errOtherOrigin is the pinned transport's refusal of a request to an
// address that is not the configured one.
var errOtherOrigin = errors.New("refused a request to another address than the configured MCP server's")

// netCause names what a request's error was, in herd's words: the
// errors of net/http and crypto/tls are not shown, since some quote the
// request or the server's answer.
func netCause(err error) string {
	var (
		dns       *net.DNSError
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		record    tls.RecordHeaderError
		alert     tls.AlertError
		netErr    net.Error
	)
	switch {
	case errors.Is(err, errOtherOrigin):
		return "herd refused a request to another address"
	case errors.Is(err, context.Canceled):
		return "" // the call was stopped: not the server's trouble
	case errors.As(err, &dns):
		return "its host name does not resolve"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &unknownCA):
		return "TLS: its certificate is signed by an unknown authority"
	case errors.As(err, &hostname):
		return "TLS: its certificate is not for its host name"
	case errors.As(err, &invalid):
		return "TLS: its certificate is not valid (expired, or not for serving)"
	case errors.As(err, &record), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "TLS: it does not speak TLS"
	case errors.As(err, &alert):
		return "TLS: the handshake failed"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timed out"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection was closed"
	}
	return "the connection failed"
}
