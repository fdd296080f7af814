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
	"time"

	"github.com/fsnotify/fsnotify"
)

// While a command runs, its workspace is watched (docs/DESIGN.md §4):
// every change inotify reports wakes a measurement of the workspace (its
// size, its files and the disk's free space), and a command whose
// workspace crosses a limit is stopped with everything it started. A
// single file cannot cross the size limit at all (RLIMIT_FSIZE is the
// room left when the command starts) and blocks cannot be reserved past
// it (seccomp refuses fallocate's modes), so what a command can add past
// a limit is what it writes to several files between a change and the
// end of the measurement it wakes: docs/SECURITY.md gives the figures.
// The CPU time of a command (its cgroup's count) is read when it could
// first have run out, at the command's CPU bandwidth, and again as often
// as what is left allows.

// minWalkGap is the least time between two measurements of a workspace;
// a measurement that took longer is followed by a gap as long, so a
// workspace of many files costs at most half a core to watch.
const minWalkGap = 5 * time.Millisecond

// fallbackEvery is how often a workspace is measured when inotify cannot
// watch it (the system's inotify limits reached).
const fallbackEvery = 100 * time.Millisecond

// monitor watches the workspaces of the running commands with one
// inotify instance, made when the first command starts and closed when
// the last one ends.
type monitor struct {
	mu     sync.Mutex
	w      *fsnotify.Watcher // nil while no command runs, or where inotify fails
	events sync.WaitGroup    // the goroutine reading w
	spaces map[string]*watched
}

// watched is one workspace with its running commands.
type watched struct {
	m     *monitor
	dir   string
	q     quota
	dirty chan struct{} // a change since the last measurement
	// ctx ends the measuring goroutine (and a walk in progress).
	ctx    context.Context
	cancel context.CancelFunc
	ended  sync.WaitGroup

	// Guarded by m.mu.
	stops map[int]func(reason string) // the commands running there
	next  int
	poll  bool // inotify could not watch it: measure on a timer
}

func newMonitor() *monitor {
	return &monitor{spaces: map[string]*watched{}}
}

// watch holds the workspace dir to q while the caller's command runs:
// stop is called (once, from another goroutine) with the reason when the
// workspace crosses a limit. The returned end is called when the command
// ended.
func (m *monitor) watch(dir string, q quota, stop func(reason string)) (end func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ws := m.spaces[dir]
	if ws == nil {
		ws = &watched{m: m, dir: dir, q: q, stops: map[int]func(string){}, dirty: make(chan struct{}, 1)}
		ws.ctx, ws.cancel = context.WithCancel(context.Background())
		m.spaces[dir] = ws
		ws.poll = !m.addTree(dir)
		ws.ended.Add(1)
		go ws.measure()
	}
	id := ws.next
	ws.next++
	ws.stops[id] = stop
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
	if len(m.spaces) == 0 {
		w, m.w = m.w, nil
	}
	m.mu.Unlock()
	if last {
		ws.cancel()
		ws.ended.Wait()
	}
	if w != nil {
		_ = w.Close()
		m.events.Wait()
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
		m.w = w
		m.events.Add(1)
		go m.read(w)
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
		if p == dir || strings.HasPrefix(p, dir+string(filepath.Separator)) {
			_ = m.w.Remove(p)
		}
	}
}

// read takes w's events until it is closed, and wakes the measurement of
// the workspace each concerns; a new directory is watched at once (what
// was made in it before that is found by the measurement it wakes).
func (m *monitor) read(w *fsnotify.Watcher) {
	defer m.events.Done()
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
			// An overflowed queue lost events: measure everything watched.
			m.mu.Lock()
			for _, ws := range m.spaces {
				ws.wake()
			}
			m.mu.Unlock()
		}
	}
}

func (m *monitor) changed(w *fsnotify.Watcher, ev fsnotify.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for dir, ws := range m.spaces {
		if ev.Name != dir && !strings.HasPrefix(ev.Name, dir+string(filepath.Separator)) {
			continue
		}
		if ev.Has(fsnotify.Create) {
			if info, err := os.Lstat(ev.Name); err == nil && info.IsDir() && w.Add(ev.Name) != nil {
				ws.poll = true
			}
		}
		ws.wake()
		return
	}
}

func (ws *watched) wake() {
	select {
	case ws.dirty <- struct{}{}:
	default:
	}
}

// measure measures the workspace each time it changed (or on a timer
// where inotify cannot watch it) and stops its commands when it is over
// a limit.
func (ws *watched) measure() {
	defer ws.ended.Done()
	tick := time.NewTicker(fallbackEvery)
	defer tick.Stop()
	for {
		select {
		case <-ws.ctx.Done():
			return
		case <-ws.dirty:
		case <-tick.C:
			if !ws.polling() {
				continue
			}
		}
		start := time.Now()
		_, over, err := ws.q.check(ws.ctx, ws.dir)
		if err == nil && over != "" {
			ws.stopAll("the command was stopped: " + over)
		}
		gap := max(minWalkGap, time.Since(start))
		select {
		case <-ws.ctx.Done():
			return
		case <-time.After(gap):
		}
	}
}

func (ws *watched) polling() bool {
	ws.m.mu.Lock()
	defer ws.m.mu.Unlock()
	return ws.poll
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
