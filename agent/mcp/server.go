package mcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// failedAfter is how many failed starts in a row turn restarting into
// failed on the admin page.
const failedAfter = 3

// server is one configured MCP server and its session, kept by loop.
type server struct {
	cfg   ServerConfig
	owner *Servers
	tried chan struct{} // closed once the first attempt has an outcome (markTried)
	once  sync.Once
	// probe marks a Test connection's server: its tool list is no
	// change of the servers' tools.
	probe bool
	// changed wakes the loop to list the tools again (tools/list_changed).
	changed chan struct{}

	// host is an HTTP server's host, all of its URL users and the model
	// see; scrub removes its secrets (secretsOf) from what it echoes.
	host  string
	scrub *strings.Replacer

	mu      sync.Mutex
	started bool // guarded by owner.mu, as are the three below
	retired bool // removed by Set: never started again
	halt    context.CancelFunc
	done    chan struct{} // closed when loop returned
	state   string
	since   time.Time
	// lastErr and lastPublic tell the latest failure to admins and to
	// users (failure); failures are the latest, newest first.
	lastErr, lastPublic string
	failures            []Failure
	fails               int
	downs               int // sessions that ended without herd closing them
	sess                *sdk.ClientSession
	tools               []*Tool
	skipped             []string
	stderr              *tail // a stdio server's, kept for admins only

	// callMu guards the calls in flight and when each owner's last call
	// ended, which route the server's log lines (onLog).
	callMu   sync.Mutex
	calls    map[uint64]*call
	nextCall uint64
	ended    map[string]time.Time
	// dropped counts log lines without an owner that no call was given.
	dropped atomic.Int64
}

func newServer(c ServerConfig, owner *Servers) *server {
	srv := &server{cfg: c, owner: owner, tried: make(chan struct{}), changed: make(chan struct{}, 1), state: StateIdle, since: time.Now(),
		scrub: newScrubber(secretsOf(c)), calls: map[uint64]*call{}, ended: map[string]time.Time{}}
	if c.Stdio() {
		srv.state = StateConnecting
		srv.stderr = newTail(2048)
	} else if u, err := url.Parse(c.URL); err == nil {
		srv.host = u.Host
	}
	return srv
}

// loop keeps a session with the server until ctx ends: connect, serve
// until the session ends, wait with backoff, again.
func (srv *server) loop(ctx context.Context) {
	log := srv.owner.opts.Logger.With("mcp_server", srv.cfg.Name)
	srv.setState(StateConnecting)
	tried := srv.markTried
	defer tried()
	for {
		sess, f := srv.connect(ctx)
		if ctx.Err() != nil {
			if sess != nil {
				_ = sess.Close()
			}
			return
		}
		if f != nil {
			srv.fail(*f)
		} else {
			log.Info("mcp server connected", "transport", srv.cfg.Transport(), "tools", len(srv.current()))
			tried()
			err := srv.serve(ctx, sess)
			if ctx.Err() != nil {
				return
			}
			srv.down(err)
		}
		tried()
		if !sleep(ctx, srv.backoff()) {
			return
		}
	}
}

// markTried says the first attempt has an outcome (or that there will
// be none: the server was removed).
func (srv *server) markTried() { srv.once.Do(func() { close(srv.tried) }) }

// serve holds sess until it ends or ctx does, listing the tools again
// whenever the server says they changed.
func (srv *server) serve(ctx context.Context, sess *sdk.ClientSession) error {
	ended := make(chan error, 1)
	go func() { ended <- sess.Wait() }()
	for {
		select {
		case err := <-ended:
			// Close even so: it ends what the session still runs for
			// itself (the subscriptions/listen call).
			_ = sess.Close()
			return err
		case <-srv.changed:
			if err := srv.list(ctx, sess); err != nil {
				_ = sess.Close()
				<-ended
				return fmt.Errorf("list tools: %w", err)
			}
		case <-ctx.Done():
			_ = sess.Close()
			<-ended
			return ctx.Err()
		}
	}
}

// connect starts a session and lists the tools, within the timeout; it
// returns the failure, recorded, unless ctx ended.
func (srv *server) connect(ctx context.Context) (*sdk.ClientSession, *failure) {
	client := sdk.NewClient(&sdk.Implementation{Name: "herd", Version: srv.owner.opts.Version}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case srv.changed <- struct{}{}:
			default:
			}
		},
	})
	x := &exchange{}
	cctx, cancel := context.WithTimeout(withExchange(ctx, x), srv.cfg.timeout())
	defer cancel()
	op := "connect"
	if srv.cfg.Stdio() {
		op = "start"
	}
	failed := func(op string, err error) *failure {
		if ctx.Err() != nil {
			return nil
		}
		f := srv.fault(cctx, op, err, x)
		return &f
	}
	t, err := srv.transport()
	if err != nil {
		return nil, failed(op, err)
	}
	sess, err := client.Connect(cctx, t, nil)
	if err != nil {
		return nil, failed(op, err)
	}
	if err := srv.list(cctx, sess); err != nil {
		_ = sess.Close()
		return nil, failed("list tools", err)
	}
	srv.askLogs(cctx, sess, x)
	return sess, nil
}

func (srv *server) transport() (sdk.Transport, error) {
	if !srv.cfg.Stdio() {
		return httpTransport(srv.cfg, srv.observe)
	}
	cmd := exec.Command(srv.cfg.Command, srv.cfg.Args...)
	cmd.Env = childEnv(srv.cfg.Env)
	srv.stderr.reset()
	cmd.Stderr = srv.stderr
	// A server dies with herd even when herd is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// A stdio server's lines come on one stream, tied to no call.
	see := func(m jsonrpc.Message) { srv.observe(context.Background(), m) }
	return observedTransport{Transport: &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, see: see}, nil
}

// childEnv is a stdio server's whole environment: herd's own holds model
// keys and the admin's password, so only PATH, HOME and LANG pass.
func childEnv(extra map[string]string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// list fetches the tools and makes them current.
func (srv *server) list(ctx context.Context, sess *sdk.ClientSession) error {
	var got []*sdk.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return err
		}
		got = append(got, t)
	}
	serverTitle := ""
	if init := sess.InitializeResult(); init != nil && init.ServerInfo != nil {
		serverTitle = init.ServerInfo.Title
	}
	ts, skipped := srv.adapt(got, serverTitle)
	srv.mu.Lock()
	srv.sess, srv.tools, srv.skipped = sess, ts, skipped
	srv.state, srv.since, srv.lastErr, srv.lastPublic, srv.fails = StateConnected, time.Now(), "", "", 0
	srv.mu.Unlock()
	if !srv.probe {
		srv.owner.bump()
	}
	return nil
}

func (srv *server) fail(f failure) {
	srv.mu.Lock()
	srv.fails++
	state := StateRestarting
	if srv.fails >= failedAfter {
		state = StateFailed
	}
	srv.setLocked(state, &f)
	srv.mu.Unlock()
	srv.owner.bump()
}

// down records that the session ended with err.
func (srv *server) down(err error) {
	if err == nil {
		err = sdk.ErrConnectionClosed
	}
	f := srv.fault(context.Background(), "session", fmt.Errorf("the session ended: %w", err), nil)
	srv.mu.Lock()
	srv.fails++
	srv.downs++
	srv.setLocked(StateRestarting, &f)
	srv.mu.Unlock()
	srv.owner.bump()
}

func (srv *server) setState(state string) {
	srv.mu.Lock()
	srv.setLocked(state, nil)
	srv.mu.Unlock()
}

func (srv *server) setLocked(state string, f *failure) {
	srv.state, srv.since = state, time.Now()
	if f != nil {
		srv.lastErr, srv.lastPublic = f.Error, f.public
	}
	if state != StateConnected {
		srv.sess, srv.tools = nil, nil
	}
}

// backoff is the wait before the next attempt: doubling from MinBackoff
// with each failure in a row, up to MaxBackoff.
func (srv *server) backoff() time.Duration {
	srv.mu.Lock()
	n := max(srv.fails-1, 0)
	srv.mu.Unlock()
	d := srv.owner.opts.MinBackoff
	for range min(n, 16) {
		d *= 2
	}
	return min(d, srv.owner.opts.MaxBackoff)
}

// current is the tools while the server is connected, else none.
func (srv *server) current() []*Tool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.tools
}

// session is the live session, or an error saying why there is none.
func (srv *server) session() (*sdk.ClientSession, error) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.sess != nil {
		return srv.sess, nil
	}
	msg := fmt.Sprintf("the MCP server %s is %s", srv.cfg.Name, srv.state)
	if srv.lastPublic != "" {
		msg += " (last error: " + srv.lastPublic + ")"
	}
	return nil, errors.New(msg + "; its tools are unavailable until it is back, try again later or do without")
}

func (srv *server) status() ServerStatus {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	st := ServerStatus{
		Name: srv.cfg.Name, Transport: srv.cfg.Transport(), Use: srv.cfg.Use,
		State: srv.state, LastError: srv.lastErr, Since: srv.since, Restarts: srv.downs,
		Tools: []string{}, Skipped: srv.skipped, Failures: slices.Clone(srv.failures),
		LogLinesDropped: srv.dropped.Load(),
	}
	if srv.stderr != nil {
		st.Stderr = srv.redact(srv.stderr.String())
	}
	for _, t := range srv.tools {
		st.Tools = append(st.Tools, SelectorPrefix+srv.cfg.Name+"/"+t.name)
	}
	return st
}

// sleep waits d or until ctx ends, reporting whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
