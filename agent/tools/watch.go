package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// While a command runs, its workspace is watched (docs/DESIGN.md §4): a
// tally of every entry's size is made once, then kept current from the
// changes inotify reports (each changed path is looked at again), and a
// command whose workspace crosses a limit — size, entries, or the disk's
// free-space floor — is stopped with everything it started. The tally
// costs one look per change, not a walk of the workspace, so the margin
// does not grow with the workspace. A single file cannot cross the size
// limit at all (RLIMIT_FSIZE is the room left when the command starts)
// and blocks cannot be reserved past it (seccomp refuses fallocate's
// modes), so what gets past a limit is what the command wrote between a
// change and its tally: docs/SECURITY.md gives the figures. The CPU time
// of a command (its cgroup's count) is read when it could first have run
// out, at the command's CPU bandwidth, and again as often as what is left
// allows.

// fallbackEvery is how often a workspace is measured whole when inotify
// cannot watch it (the system's inotify limits reached).
const fallbackEvery = 100 * time.Millisecond

// monitor watches the workspaces of the running commands with one
// inotify instance, made when the first command starts and closed when
// the last one ends.
type monitor struct {
	mu     sync.Mutex
	w      *fsnotify.Watcher // nil while no command runs, or where inotify fails
	read   chan struct{}     // closed when the goroutine reading w ends
	spaces map[string]*watched
}

// watched is one workspace with its running commands.
type watched struct {
	m   *monitor
	dir string
	q   quota
	// woken tells the tally there are changes, ready that it is made;
	// ctx ends it (and a walk in progress).
	woken  chan struct{}
	ready  chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	ended  sync.WaitGroup

	// Guarded by m.mu.
	stops map[int]func(reason string) // the commands running there
	next  int
	poll  bool // inotify could not watch it all: measure on a timer
	// changed is every path changed since the tally last looked, with
	// what happened to it; a path changed many times is there once, so
	// it cannot overflow. lost: inotify dropped events, walk it all.
	changed map[string]fsnotify.Op
	lost    bool
}

func newMonitor() *monitor {
	return &monitor{spaces: map[string]*watched{}}
}

// watch holds the workspace dir to q while the caller's command runs:
// stop is called (from another goroutine) with the reason when the
// workspace crosses a limit. It returns once the workspace's tally is
// made, so the caller starts its command after; end is called when the
// command ended.
func (m *monitor) watch(dir string, q quota, stop func(reason string)) (end func()) {
	m.mu.Lock()
	ws := m.spaces[dir]
	if ws == nil {
		ws = &watched{m: m, dir: dir, q: q, stops: map[int]func(string){},
			woken: make(chan struct{}, 1), ready: make(chan struct{}), changed: map[string]fsnotify.Op{}}
		ws.ctx, ws.cancel = context.WithCancel(context.Background())
		m.spaces[dir] = ws
		ws.poll = !m.addTree(dir)
		ws.ended.Add(1)
		go ws.tally()
	}
	id := ws.next
	ws.next++
	ws.stops[id] = stop
	m.mu.Unlock()
	<-ws.ready
	var once sync.Once
	return func() { once.Do(func() { m.leave(ws, id) }) }
}

// leave forgets one command; the last one of a workspace ends its watch,
// and the last of all closes the inotify instance.
func (m *monitor) leave(ws *watched, id int) {
	m.mu.Lock()
	delete(ws.stops, id)
	last := len(ws.stops) == 0
	if last {
		delete(m.spaces, ws.dir)
		m.removeTree(ws.dir)
	}
	var w *fsnotify.Watcher
	var read chan struct{}
	if len(m.spaces) == 0 {
		w, m.w, read = m.w, nil, m.read
	}
	m.mu.Unlock()
	if last {
		ws.cancel()
		ws.ended.Wait()
	}
	if w != nil {
		// The kernel waits out an RCU grace period (10–20 ms) to close an
		// inotify instance, which the last command need not wait for: the
		// goroutine ends by itself once it is closed and read has ended.
		go func() {
			_ = w.Close()
			<-read
		}()
	}
}

// addTree watches dir and every directory below it, making the inotify
// instance if there is none. It reports false when inotify cannot watch
// the whole tree.
func (m *monitor) addTree(dir string) bool {
	if m.w == nil {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			return false
		}
		m.w, m.read = w, make(chan struct{})
		go m.readEvents(w, m.read)
	}
	ok := true
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if err := m.w.Add(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			ok = false
			return filepath.SkipAll
		}
		return nil
	})
	return ok
}

// removeTree stops watching the directories of dir.
func (m *monitor) removeTree(dir string) {
	if m.w == nil {
		return
	}
	for _, p := range m.w.WatchList() {
		if within(p, dir) {
			_ = m.w.Remove(p)
		}
	}
}

// readEvents takes w's events until it is closed and hands each to the tally
// of the workspace it concerns; a new directory is watched at once (what
// was made in it before that, its tally finds by walking it).
func (m *monitor) readEvents(w *fsnotify.Watcher, done chan struct{}) {
	defer close(done)
	for {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			m.changed(w, ev)
		case _, ok := <-w.Errors:
			if !ok {
				return
			}
			// An overflowed queue lost events: every tally starts again.
			m.mu.Lock()
			for _, ws := range m.spaces {
				ws.lost = true
				ws.wake()
			}
			m.mu.Unlock()
		}
	}
}

func (m *monitor) changed(w *fsnotify.Watcher, ev fsnotify.Event) {
	if ev.Op == fsnotify.Chmod {
		return // neither size nor count
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for dir, ws := range m.spaces {
		if !within(ev.Name, dir) {
			continue
		}
		if ev.Has(fsnotify.Create) {
			if info, err := os.Lstat(ev.Name); err == nil && info.IsDir() && w.Add(ev.Name) != nil {
				ws.poll = true
			}
		}
		ws.changed[ev.Name] |= ev.Op
		ws.wake()
		return
	}
}

func (ws *watched) wake() {
	select {
	case ws.woken <- struct{}{}:
	default:
	}
}

// takeChanges hands the tally what changed since it last looked.
func (ws *watched) takeChanges() (changed map[string]fsnotify.Op, lost, poll bool) {
	ws.m.mu.Lock()
	defer ws.m.mu.Unlock()
	changed, lost, poll = ws.changed, ws.lost, ws.poll
	ws.changed, ws.lost = map[string]fsnotify.Op{}, false
	return changed, lost, poll
}

// tally keeps the workspace's tally from its changes and stops its
// commands when it is over a limit.
func (ws *watched) tally() {
	defer ws.ended.Done()
	tick := time.NewTicker(fallbackEvery)
	defer tick.Stop()
	t := newTally(ws.ctx, ws.dir)
	close(ws.ready)
	for {
		ws.check(t)
		select {
		case <-ws.ctx.Done():
			return
		case <-ws.woken:
		case <-tick.C:
		}
		changed, lost, poll := ws.takeChanges()
		if lost || poll {
			t = newTally(ws.ctx, ws.dir)
		}
		for path, op := range changed {
			t.apply(path, op)
		}
	}
}

// check stops the workspace's commands when t, or the disk, is over a limit.
func (ws *watched) check(t *tally) {
	free, err := freeSpace(ws.dir)
	if err != nil {
		return
	}
	if over := ws.q.over(du{bytes: t.bytes, files: t.files}, free); over != "" {
		ws.stopAll("the command was stopped: " + over)
	}
}

// stopAll stops every command running in the workspace.
func (ws *watched) stopAll(reason string) {
	ws.m.mu.Lock()
	stops := make([]func(string), 0, len(ws.stops))
	for _, s := range ws.stops {
		stops = append(stops, s)
	}
	ws.m.mu.Unlock()
	for _, s := range stops {
		s(reason)
	}
}

// tally is what a workspace holds: every entry below its root with its
// size, counted as usage counts (allocated blocks), and the totals.
type tally struct {
	root         string
	bytes, files int64
	entries      map[string]*tallied
}

type tallied struct {
	size     int64
	children map[string]struct{} // a directory's entries, by name
}

// newTally walks dir into a tally.
func newTally(ctx context.Context, dir string) *tally {
	t := &tally{root: dir, entries: map[string]*tallied{dir: {children: map[string]struct{}{}}}}
	t.walk(ctx, dir)
	return t
}

// walk adds what lies below dir.
func (t *tally) walk(ctx context.Context, dir string) {
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if info, err := d.Info(); err == nil {
			t.set(path, info)
		}
		return nil
	})
}

// apply takes what happened to path since the tally last looked: the
// path is looked at as it is now. One made, removed or moved is
// forgotten with everything below it first, and a directory there now
// is walked whole (it may have been filled before its watch, or moved in
// full).
func (t *tally) apply(path string, op fsnotify.Op) {
	if path == t.root {
		return
	}
	if op.Has(fsnotify.Create) || op.Has(fsnotify.Remove) || op.Has(fsnotify.Rename) {
		t.forget(path)
	}
	info, err := os.Lstat(path)
	if err != nil {
		t.forget(path)
		return
	}
	_, known := t.entries[path]
	t.set(path, info)
	if info.IsDir() && !known {
		t.walk(context.Background(), path)
	}
}

func (t *tally) set(path string, info fs.FileInfo) {
	var size int64
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		size = st.Blocks * 512
	}
	e := t.entries[path]
	if e == nil {
		e = &tallied{}
		if info.IsDir() {
			e.children = map[string]struct{}{}
		}
		t.entries[path] = e
		t.files++
		if parent := t.entries[filepath.Dir(path)]; parent != nil && parent.children != nil {
			parent.children[filepath.Base(path)] = struct{}{}
		}
	}
	t.bytes += size - e.size
	e.size = size
}

func (t *tally) forget(path string) {
	e := t.entries[path]
	if e == nil || path == t.root {
		return
	}
	for name := range e.children {
		t.forget(path + string(filepath.Separator) + name)
	}
	delete(t.entries, path)
	t.files--
	t.bytes -= e.size
	if parent := t.entries[filepath.Dir(path)]; parent != nil {
		delete(parent.children, filepath.Base(path))
	}
}

// watchCPU stops a command (with the reason) once its processes have
// used limit of CPU time, by its cgroup's count. It reads the count when
// the limit could first have been reached at cpus cores, then as often
// as what is left allows. It does nothing where no cgroup counts CPU time
// (RLIMIT_CPU then holds each process).
func watchCPU(cg *commandCgroup, limit time.Duration, cpus float64, stop func(reason string)) (end func()) {
	if _, ok := cg.cpuTime(); !ok {
		return func() {}
	}
	done := make(chan struct{})
	var ended sync.WaitGroup
	ended.Add(1)
	go func() {
		defer ended.Done()
		for {
			used, _ := cg.cpuTime()
			if used >= limit {
				stop(fmt.Sprintf("the command was stopped: its processes used %s of CPU time, its limit (sandbox.limits.cpu_seconds)",
					limit.Round(time.Second)))
				return
			}
			wait := max(time.Duration(float64(limit-used)/cpus), 10*time.Millisecond)
			select {
			case <-done:
				return
			case <-time.After(wait):
			}
		}
	}()
	return func() {
		close(done)
		ended.Wait()
	}
}

// within reports whether path is base or lies inside it.
func within(path, base string) bool {
	return path == base || strings.HasPrefix(path, base+string(filepath.Separator))
}
