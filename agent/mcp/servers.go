package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
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
// them, restarts them, and closes them all on Close. Set changes the
// list while herd runs (the admin console, docs/DESIGN.md §12).
type Servers struct {
	opts Options
	// listMu guards list, which Set swaps whole; setMu serializes Sets.
	listMu sync.RWMutex
	list   []*server
	setMu  sync.Mutex
	gen    atomic.Uint64 // bumped whenever a server's tools change
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
	for _, srv := range s.servers() {
		if srv.cfg.Stdio() {
			s.run(srv)
		}
	}
}

// servers is the list of the moment.
func (s *Servers) servers() []*server {
	s.listMu.RLock()
	defer s.listMu.RUnlock()
	return s.list
}

// run starts srv's loop once, unless Servers is closed or srv removed;
// each loop has its own context, so Set can stop one server alone.
func (s *Servers) run(srv *server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.close || srv.started || srv.retired {
		return
	}
	srv.started = true
	ctx, halt := context.WithCancel(s.ctx)
	srv.halt, srv.done = halt, make(chan struct{})
	done := srv.done
	s.wg.Go(func() {
		defer close(done)
		srv.loop(ctx)
	})
}

// Set makes cfgs the servers, in their order: a server whose settings
// did not change keeps its session; one removed or changed is stopped
// (a stdio server's process with it) before Set returns, and one added
// or changed starts as at Start. Runs see the new tools at their next
// model call, as after tools/list_changed; a call in flight on a server
// stopped fails as when a server goes away (docs/DESIGN.md §4).
func (s *Servers) Set(cfgs []ServerConfig) {
	s.setMu.Lock()
	defer s.setMu.Unlock()
	old := map[string]*server{}
	for _, srv := range s.servers() {
		old[srv.cfg.Name] = srv
	}
	next := make([]*server, 0, len(cfgs))
	var fresh []*server
	for _, c := range cfgs {
		c = c.WithDefaults()
		if srv, ok := old[c.Name]; ok && reflect.DeepEqual(srv.cfg, c) {
			next = append(next, srv)
			delete(old, c.Name)
			continue
		}
		srv := newServer(c, s)
		next = append(next, srv)
		fresh = append(fresh, srv)
	}
	s.listMu.Lock()
	s.list = next
	s.listMu.Unlock()
	for _, srv := range old { // removed, or replaced by its new settings
		s.retire(srv)
	}
	for _, srv := range fresh {
		if srv.cfg.Stdio() {
			s.run(srv)
		}
	}
	if len(old) > 0 || len(fresh) > 0 { // a reload that changed nothing leaves runs' toolboxes be
		s.bump()
	}
}

// retire stops srv for good and waits for its loop (and process) to end.
func (s *Servers) retire(srv *server) {
	s.mu.Lock()
	srv.retired = true
	halt, done := srv.halt, srv.done
	s.mu.Unlock()
	if halt != nil {
		halt()
		<-done
	}
	srv.mu.Lock()
	srv.setLocked(StateStopped, nil)
	srv.mu.Unlock()
	srv.markTried() // a Tools caller waiting on it goes on
}

// Test connects to the server c describes apart from the others, lists
// its tools and ends the session (a stdio server's process with it): the
// admin console's Test connection. It returns the tools' names as agents
// are given them, or what went wrong as admins read it.
func (s *Servers) Test(ctx context.Context, c ServerConfig) ([]string, error) {
	srv := newServer(c.WithDefaults(), s)
	srv.probe = true
	sess, f := srv.connect(ctx)
	switch {
	case f != nil:
		return nil, errors.New(f.Error)
	case sess == nil:
		return nil, fmt.Errorf("no answer: %w", context.Cause(ctx))
	}
	defer func() { _ = sess.Close() }()
	return srv.status().Tools, nil
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
	for _, srv := range s.servers() {
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
	list := s.servers()
	out := make([]ServerStatus, len(list))
	for i, srv := range list {
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
	StateStopped    = "stopped"    // removed or changed in the admin console: its session ended
)
