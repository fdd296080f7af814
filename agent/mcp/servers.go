package mcp

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"herd/agent/tools"
)

// Options builds Servers.
type Options struct {
	Logger *slog.Logger
	// OutputLimit bounds one tool result in bytes, as a command's output
	// is bounded (sandbox.output_limit_bytes).
	OutputLimit int
	// MinBackoff and MaxBackoff bound the wait before a server is started
	// or connected again after it went away (1s and 30s by default).
	MinBackoff, MaxBackoff time.Duration
	// Version is herd's, told to servers at initialization.
	Version string
}

// Servers owns a session with each configured MCP server: it starts
// them, restarts them, and closes them all on Close.
type Servers struct {
	opts Options
	list []*server
	gen  atomic.Uint64 // bumped whenever a server's tools change
	// changedMu guards changed, closed and replaced on each bump.
	changedMu sync.Mutex
	changed   chan struct{}
	ctx       context.Context
	stop      context.CancelFunc
	wg        sync.WaitGroup
	mu        sync.Mutex
	close     bool
	// progress maps a call's progress token to its Env.Progress.
	progress sync.Map
	tokens   atomic.Uint64
}

// New prepares a session for each server of cfgs; Start starts them.
func New(cfgs []ServerConfig, o Options) *Servers {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.OutputLimit <= 0 {
		o.OutputLimit = 30000
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(30*time.Second, o.MinBackoff)
	}
	s := &Servers{opts: o, changed: make(chan struct{})}
	s.ctx, s.stop = context.WithCancel(context.Background())
	for _, c := range cfgs {
		s.list = append(s.list, newServer(c.WithDefaults(), s))
	}
	return s
}

// Start starts every stdio server; an HTTP server connects when its tools
// are first asked for.
func (s *Servers) Start() {
	for _, srv := range s.list {
		if srv.cfg.Stdio() {
			s.run(srv)
		}
	}
}

// run starts srv's loop once, unless Servers is closed.
func (s *Servers) run(srv *server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.close || srv.started {
		return
	}
	srv.started = true
	s.wg.Go(func() { srv.loop(s.ctx) })
}

// Close ends every session (and so every stdio server's process) and
// waits for them.
func (s *Servers) Close() {
	s.mu.Lock()
	s.close = true
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
}

// Generation changes whenever any server's tool list changes, so a
// holder of Tools' answer knows when to ask again.
func (s *Servers) Generation() uint64 { return s.gen.Load() }

// Changed is closed at the next change of any server's tools or state.
func (s *Servers) Changed() <-chan struct{} {
	s.changedMu.Lock()
	defer s.changedMu.Unlock()
	return s.changed
}

// bump records a change of a server's tools or state.
func (s *Servers) bump() {
	s.gen.Add(1)
	s.changedMu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.changedMu.Unlock()
}

// Tools are the tools a run may be offered now: those of every server
// the user may use (admin or not) that is connected. An HTTP server not
// yet used is connected first, waiting for its first attempt as long as
// ctx allows.
func (s *Servers) Tools(ctx context.Context, admin bool) []tools.Tool {
	var out []tools.Tool
	for _, srv := range s.list {
		if srv.cfg.Use == UseAdmins && !admin {
			continue
		}
		s.run(srv)
		select {
		case <-srv.tried:
		case <-ctx.Done():
		case <-s.ctx.Done():
		}
		for _, t := range srv.current() {
			out = append(out, t)
		}
	}
	return out
}

// Status describes every server for the admin page, in config order.
func (s *Servers) Status() []ServerStatus {
	out := make([]ServerStatus, len(s.list))
	for i, srv := range s.list {
		out[i] = srv.status()
	}
	return out
}

// ServerStatus is one server as the admin sees it.
type ServerStatus struct {
	Name      string `json:"name"`
	Transport string `json:"transport"` // stdio or http
	Use       string `json:"use"`
	State     string `json:"state"`
	LastError string `json:"last_error,omitempty"`
	// Restarts counts the sessions that ended without herd closing them.
	Restarts int       `json:"restarts"`
	Since    time.Time `json:"since"`
	Tools    []string  `json:"tools"` // the names agents are given, mcp:<server>/<tool>
	Skipped  []string  `json:"skipped,omitempty"`
	// Failures are the latest failures, newest first, with the references
	// users and the model were given (docs/DESIGN.md §4).
	Failures []Failure `json:"failures,omitempty"`
	// Stderr is the last of a stdio server's stderr: for admins only.
	Stderr string `json:"stderr,omitempty"`
	// LogLinesDropped counts the server's log lines without an owner that
	// reached no call, since calls of several users or runs were in
	// flight (docs/DESIGN.md §4).
	LogLinesDropped int64 `json:"log_lines_dropped"`
}

// States of a server.
const (
	StateIdle       = "idle"       // HTTP, not used yet
	StateConnecting = "connecting" // first attempt under way
	StateConnected  = "connected"
	StateRestarting = "restarting" // went away or failed once; trying again with backoff
	StateFailed     = "failed"     // failed several times in a row; still retried at the longest backoff
)
