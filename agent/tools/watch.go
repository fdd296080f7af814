package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// While a command runs, its workspace is watched (docs/DESIGN.md §4): a
// tally of every file's size is made before the command starts, then kept
// current from what inotify reports, and a command whose workspace
// crosses a limit — size, files, or the disk's free-space floor — is
// stopped with everything it started. The tally costs one fstatat per
// change, not a walk of the workspace, so what passes a limit does not
// grow with the workspace. Everything is looked at through descriptors
// opened one name at a time without following links (scan.go,
// notify.go): a command that renames, deepens or links its directories
// can neither hide a write nor lead herd outside the workspace, and what
// herd cannot look at stops the command. A single file cannot cross the
// size limit (RLIMIT_FSIZE is the room left when the command starts), no
// block can be reserved past a file's size (seccomp refuses fallocate's
// modes), and a file counts for its length at least (a shared mapping
// writes without telling inotify, never past the length). The CPU time
// of a command (its cgroup's count) is read when it could first have run
// out, and again as often as what is left allows.

// Watches are the kernel's to give (fs.inotify.max_user_watches, shared
// by every process of herd's uid): past these a workspace is measured
// whole on a timer instead, every pollEvery at most.
const (
	maxWatchesPerWorkspace = 4096
	maxWatches             = 16384
	pollEvery              = 250 * time.Millisecond
)

// maxPending is how many events a workspace's tally may fall behind
// before it counts them lost and measures the workspace afresh.
const maxPending = 1 << 16

// monitor watches the workspaces of the running commands with one
// inotify instance, made when the first command starts and closed when
// the last one ends.
type monitor struct {
	mu       sync.Mutex
	n        *notifier           // nil while no command runs, or where inotify fails
	readDone chan struct{}       // closed when the goroutine reading n ends
	owners   map[int32]*watched  // each watch's workspace
	spaces   map[string]*watched // by directory
	watches  int
}

// watched is one workspace with its running commands.
type watched struct {
	m   *monitor
	dir string
	q   quota
	// woken tells the tally there are events, ready that it is made; ctx
	// ends it.
	woken, ready chan struct{}
	ctx          context.Context
	cancel       context.CancelFunc
	ended        sync.WaitGroup

	// Guarded by m.mu.
	stops   map[int]func(reason string) // the commands running there
	next    int
	pending []event
	lost    bool
	watches int
}

func newMonitor() *monitor {
	return &monitor{owners: map[int32]*watched{}, spaces: map[string]*watched{}}
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
			woken: make(chan struct{}, 1), ready: make(chan struct{})}
		ws.ctx, ws.cancel = context.WithCancel(context.Background())
		m.spaces[dir] = ws
		ws.ended.Add(1)
		go ws.run()
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
	}
	m.mu.Unlock()
	if !last {
		return
	}
	ws.cancel()
	ws.ended.Wait()
	m.mu.Lock()
	var n *notifier
	var read chan struct{}
	if len(m.spaces) == 0 && m.n != nil {
		n, read, m.n = m.n, m.readDone, nil
	}
	m.mu.Unlock()
	if n != nil {
		// The kernel waits out an RCU grace period (10–20 ms) to close an
		// inotify instance, which the last command need not wait for: the
		// goroutine ends by itself once it is closed and read has ended.
		go func() {
			_ = n.Close()
			<-read
		}()
	}
}

// addWatch watches dir for ws, making the inotify instance if there is
// none; it fails past the watch limits or where the kernel refuses.
func (m *monitor) addWatch(ws *watched, dir *os.File) (int32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ws.watches >= maxWatchesPerWorkspace || m.watches >= maxWatches {
		return 0, errors.New("too many directories to watch")
	}
	if m.n == nil {
		n, err := newNotifier()
		if err != nil {
			return 0, err
		}
		m.n, m.readDone = n, make(chan struct{})
		go m.read(n, m.readDone)
	}
	wd, err := m.n.add(dir)
	if err != nil {
		return 0, err
	}
	if m.owners[wd] == nil {
		m.owners[wd] = ws
		ws.watches++
		m.watches++
	}
	return wd, nil
}

// dropWatches ends the watches of ws (its tally ended, or starts again).
func (m *monitor) dropWatches(ws *watched, wds []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, wd := range wds {
		if m.owners[wd] != ws {
			continue
		}
		delete(m.owners, wd)
		ws.watches--
		m.watches--
		if m.n != nil {
			m.n.remove(wd)
		}
	}
}

// forgetWatch drops a watch the kernel ended (its directory is gone).
func (m *monitor) forgetWatch(ws *watched, wd int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owners[wd] == ws {
		delete(m.owners, wd)
		ws.watches--
		m.watches--
	}
}

// read takes n's events until it is closed and hands each to the
// workspace whose watch it names.
func (m *monitor) read(n *notifier, done chan struct{}) {
	defer close(done)
	buf := make([]byte, 64<<10)
	for {
		evs, err := n.read(buf)
		if err != nil && len(evs) == 0 {
			return // closed
		}
		m.mu.Lock()
		if m.n != n {
			// A closing instance: its watch numbers may be a new
			// instance's already, and nothing of it is watched any more.
			m.mu.Unlock()
			continue
		}
		for _, ev := range evs {
			if ev.overflow() {
				for _, ws := range m.spaces {
					ws.lose()
				}
				continue
			}
			if ws := m.owners[ev.wd]; ws != nil {
				ws.pending = append(ws.pending, ev)
				if len(ws.pending) > maxPending {
					ws.lose()
				}
				ws.wake()
			}
		}
		m.mu.Unlock()
	}
}

// lose drops the pending events of ws: its tally starts again. m.mu is held.
func (ws *watched) lose() {
	ws.pending, ws.lost = nil, true
	ws.wake()
}

func (ws *watched) wake() {
	select {
	case ws.woken <- struct{}{}:
	default:
	}
}

// take hands the tally the events since it last looked.
func (ws *watched) take() (evs []event, lost bool) {
	ws.m.mu.Lock()
	defer ws.m.mu.Unlock()
	evs, lost = ws.pending, ws.lost
	ws.pending, ws.lost = nil, false
	return evs, lost
}

// run keeps the workspace's tally and stops its commands when it is over
// a limit, until the last of them ended.
func (ws *watched) run() {
	defer ws.ended.Done()
	t := newTally(ws)
	close(ws.ready)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	defer func() { t.release() }()
	for {
		ws.check(t)
		select {
		case <-ws.ctx.Done():
			return
		case <-ws.woken:
		case <-tick.C:
			if !t.polling {
				continue
			}
		}
		evs, lost := ws.take()
		if lost || t.polling {
			t.release()
			t = newTally(ws)
			continue
		}
		t.apply(evs)
	}
}

// check stops the workspace's commands when t, or the disk, is over a
// limit, or when t could not look at part of it.
func (ws *watched) check(t *tally) {
	if t.broken != "" {
		ws.stopAll("the command was stopped: herd could not measure the workspace (" + t.broken +
			"), and stops what it cannot measure")
		return
	}
	free, err := freeSpace(ws.dir)
	if err != nil {
		return
	}
	if over := ws.q.over(du{bytes: t.bytes, files: t.count}, free); over != "" {
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

// tally is what a workspace holds, kept from inotify's events: every
// file once (by inode, a file with two names once) with its size, and
// every directory with its watch and its entries.
type tally struct {
	ws       *watched
	root     *os.File
	dirs     map[int32]*dirNode
	dirByKey map[fileKey]*dirNode
	files    map[fileKey]*inode
	// bytes and count are the totals the limits hold.
	bytes, count int64
	// broken says what could not be looked at: the commands are stopped.
	broken string
	// polling: there are no watches for it (the limits reached, or no
	// inotify); it is measured whole every pollEvery.
	polling bool
}

type dirNode struct {
	wd    int32
	rel   string // from the workspace, slash-separated
	key   fileKey
	depth int
	kids  map[string]fileKey
}

type inode struct {
	size  int64
	names int
}

// newTally watches and measures the workspace of ws; where it cannot
// watch it, it measures it once and polls.
func newTally(ws *watched) *tally {
	t := &tally{ws: ws, dirs: map[int32]*dirNode{}, dirByKey: map[fileKey]*dirNode{}, files: map[fileKey]*inode{}}
	root, err := os.Open(ws.dir)
	if err != nil {
		t.broken = err.Error()
		return t
	}
	t.root = root
	st, err := statAt(root, ".")
	if err != nil {
		t.broken = err.Error()
		return t
	}
	t.bytes = sizeOf(&st)
	if rootNode := t.watchDir(root, "", fileKey{st.Dev, st.Ino}, 0); rootNode != nil {
		t.scanInto(root, rootNode)
	}
	if t.polling {
		t.measureWhole()
	}
	return t
}

// measureWhole counts the workspace by a walk, without watches.
func (t *tally) measureWhole() {
	t.drop()
	u, err := usage(t.ws.ctx, t.ws.dir)
	if err != nil {
		if t.ws.ctx.Err() == nil {
			t.broken = err.Error()
		}
		return
	}
	t.bytes, t.count = u.bytes, u.files
}

// watchDir watches dir (at rel) and records it; nil when it cannot be
// watched (the tally then polls).
func (t *tally) watchDir(dir *os.File, rel string, key fileKey, depth int) *dirNode {
	if t.polling {
		return nil
	}
	wd, err := t.ws.m.addWatch(t.ws, dir)
	if err != nil {
		t.polling = true
		return nil
	}
	if d := t.dirs[wd]; d != nil {
		return d
	}
	d := &dirNode{wd: wd, rel: rel, key: key, depth: depth, kids: map[string]fileKey{}}
	t.dirs[wd], t.dirByKey[key] = d, d
	return d
}

// scanInto looks at every entry of dir (the directory of d).
func (t *tally) scanInto(dir *os.File, d *dirNode) {
	names, err := dir.Readdirnames(-1)
	if err != nil {
		t.broken = fmt.Sprintf("%s: %v", orRoot(d.rel), err)
		return
	}
	for _, name := range names {
		if t.broken != "" || t.polling {
			return
		}
		t.look(dir, d, name)
	}
}

// apply takes a batch of events, in order. A directory is opened once a
// batch, by its path from the workspace one name at a time; its
// descriptor stays right through a rename later in the batch.
func (t *tally) apply(evs []event) {
	open := map[int32]*os.File{}
	defer func() {
		for _, f := range open {
			f.Close()
		}
	}()
	for _, ev := range evs {
		if t.broken != "" || t.polling {
			return
		}
		d := t.dirs[ev.wd]
		switch {
		case d == nil:
		case ev.mask&unix.IN_IGNORED != 0:
			t.forgetDir(d)
		case ev.name == "":
		case ev.mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0:
			t.unlink(d, ev.name)
		default:
			dir := open[ev.wd]
			if dir == nil {
				var err error
				dir, err = openBeneath(t.root, d.rel)
				if errors.Is(err, unix.ENOENT) {
					continue // gone: its IN_IGNORED follows
				}
				if err != nil {
					t.broken = fmt.Sprintf("%s: %v", orRoot(d.rel), err)
					return
				}
				open[ev.wd] = dir
			}
			t.look(dir, d, ev.name)
			if t.bytes > t.ws.q.limit || t.count > t.ws.q.files {
				// Stopped at the event that crossed, not at the end of
				// the batch: a batch grows when herd is slow to read.
				t.ws.check(t)
			}
		}
	}
}

// look takes name in d (open as dir) as it is now.
func (t *tally) look(dir *os.File, d *dirNode, name string) {
	st, err := statAt(dir, name)
	if errors.Is(err, unix.ENOENT) {
		t.unlink(d, name)
		return
	}
	if err != nil {
		t.broken = fmt.Sprintf("%s: %v", joinRel(d.rel, name), err)
		return
	}
	key := fileKey{st.Dev, st.Ino}
	if old, ok := d.kids[name]; ok && old != key {
		t.unlink(d, name)
	}
	if _, ok := d.kids[name]; ok {
		t.resize(key, sizeOf(&st))
	} else {
		d.kids[name] = key
		t.ref(key, sizeOf(&st))
	}
	if !isDir(&st) {
		return
	}
	rel := joinRel(d.rel, name)
	if sub := t.dirByKey[key]; sub != nil {
		t.moveDir(sub, rel, d.depth+1) // moved here whole, or seen again
		return
	}
	t.enter(dir, rel, name, key, d.depth+1)
}

// enter watches a directory new to the tally and everything in it (made
// before its watch, or moved in whole).
func (t *tally) enter(parent *os.File, rel, name string, key fileKey, depth int) {
	if depth >= maxScanDepth {
		t.broken = rel + ": " + errTooDeep.Error()
		return
	}
	sub, err := openDirAt(parent, name)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return // replaced meanwhile: its own event follows
	}
	if err != nil {
		t.broken = fmt.Sprintf("%s: %v", rel, err)
		return
	}
	defer sub.Close()
	if d := t.watchDir(sub, rel, key, depth); d != nil {
		t.scanInto(sub, d)
	}
}

// moveDir gives d (and every directory below it) its path after a rename.
func (t *tally) moveDir(d *dirNode, rel string, depth int) {
	if d.rel == rel {
		return
	}
	old, shift := d.rel, depth-d.depth
	for _, o := range t.dirs {
		if o == d || strings.HasPrefix(o.rel, old+"/") {
			o.rel, o.depth = rel+strings.TrimPrefix(o.rel, old), o.depth+shift
			if o.depth >= maxScanDepth {
				t.broken = o.rel + ": " + errTooDeep.Error()
			}
		}
	}
}

func (t *tally) ref(key fileKey, size int64) {
	n := t.files[key]
	if n == nil {
		t.files[key] = &inode{size: size, names: 1}
		t.count++
		t.bytes += size
		return
	}
	n.names++
	t.resize(key, size)
}

func (t *tally) resize(key fileKey, size int64) {
	if n := t.files[key]; n != nil {
		t.bytes += size - n.size
		n.size = size
	}
}

// unlink forgets name in d; its file goes with its last name.
func (t *tally) unlink(d *dirNode, name string) {
	key, ok := d.kids[name]
	if !ok {
		return
	}
	delete(d.kids, name)
	n := t.files[key]
	if n == nil {
		return
	}
	if n.names--; n.names == 0 {
		delete(t.files, key)
		t.count--
		t.bytes -= n.size
	}
}

// forgetDir forgets a directory whose watch the kernel ended, and
// whatever of it is still counted.
func (t *tally) forgetDir(d *dirNode) {
	for name := range d.kids {
		t.unlink(d, name)
	}
	delete(t.dirs, d.wd)
	if t.dirByKey[d.key] == d {
		delete(t.dirByKey, d.key)
	}
	t.ws.m.forgetWatch(t.ws, d.wd)
}

// drop ends the tally's watches and forgets what it counted.
func (t *tally) drop() {
	wds := make([]int32, 0, len(t.dirs))
	for wd := range t.dirs {
		wds = append(wds, wd)
	}
	t.ws.m.dropWatches(t.ws, wds)
	t.dirs, t.dirByKey, t.files = map[int32]*dirNode{}, map[fileKey]*dirNode{}, map[fileKey]*inode{}
	t.bytes, t.count = 0, 0
}

// release ends the tally: its watches and its descriptor.
func (t *tally) release() {
	t.drop()
	if t.root != nil {
		t.root.Close()
		t.root = nil
	}
}

func orRoot(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
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
