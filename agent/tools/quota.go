package tools

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// quota is the workspace limits (sandbox.limits.workspace_mb and
// workspace_files) and the free-space floor of its disk (min_free_mb). A
// thread's workspace is a directory of the server's file system with no
// quota of its own, so the limits are enforced where the tools meet it:
// bash and growing writes are refused while the workspace is over a
// limit, and while a command runs its workspace is watched and the
// command stopped as it crosses one (watch.go). A growing write is
// accepted on a measurement up to usageFresh old plus the writes accepted
// since (measured), so what grows the workspace besides the tools (an MCP
// server writing into it) is seen within that time; a refusal is always
// decided on a fresh walk.
type quota struct {
	limit int64 // bytes
	files int64 // files and directories
	floor int64 // bytes the disk keeps free
}

func workspaceQuota(l SandboxLimits) quota {
	l = l.withDefaults()
	return quota{limit: int64(l.WorkspaceMB) * mib, files: int64(l.WorkspaceFiles), floor: int64(l.MinFreeMB) * mib}
}

// du is what a walk of a workspace found.
type du struct {
	bytes, files int64
	// setID names the regular files with a set-user-ID or set-group-ID
	// bit, relative to the workspace.
	setID []string
	// unmeasured names what the walk could not enter (too deep, or not
	// readable by the server), which it did not count.
	unmeasured []string
}

// usage measures dir: every file, directory and link below it once
// (a file with two names is one), each for sizeOf. It walks by
// descriptor (scan.go), so nothing a command does to the workspace
// meanwhile leads it outside. It stops when ctx ends.
func usage(ctx context.Context, dir string) (du, error) {
	root, err := os.Open(dir)
	if err != nil {
		return du{}, fmt.Errorf("measure workspace: %w", err)
	}
	defer root.Close()
	var u du
	if st, err := statAt(root, "."); err == nil {
		u.bytes = sizeOf(&st)
	}
	seen := map[fileKey]bool{}
	sc := &scan{ctx: ctx, visit: func(_ *os.File, rel, name string, st *unix.Stat_t) error {
		key := fileKey{st.Dev, st.Ino}
		if seen[key] {
			return nil
		}
		seen[key] = true
		u.files++
		u.bytes += sizeOf(st)
		if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 && len(u.setID) < maxSetID {
			u.setID = append(u.setID, joinRel(rel, name))
		}
		return nil
	}}
	if err := sc.tree(root, "", 0); err != nil {
		return du{}, fmt.Errorf("measure workspace: %w", err)
	}
	u.unmeasured = sc.partial
	return u, nil
}

// maxSetID bounds the set-ID files one walk remembers; the next walk
// finds the rest.
const maxSetID = 1024

// freeSpace is what the file system holding dir has free for unprivileged
// writers, in bytes.
func freeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space: %w", err)
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// measured is what the tools last measured of each workspace, shared by
// every tool of the process. A growing write checks against it instead of
// walking the workspace each time: with 1,000 subagents writing into one
// thread's workspace, a walk per write made the writes quadratic in the
// files (~2 million lstat calls; BenchmarkThousandSubagents went from
// 1.4 s to 6–7 s, docs/PERFORMANCE.md §2).
var measured = usageCache{dirs: map[string]*dirUsage{}}

// usageFresh is how long a measurement is trusted to accept a write. A
// refusal is always decided on a fresh walk, and commands (the one way
// the workspace grows besides the write tools) measure after they run.
const usageFresh = 2 * time.Second

type usageCache struct {
	mu    sync.Mutex
	dirs  map[string]*dirUsage
	swept time.Time    // the last sweep of the workspaces not written lately
	walks atomic.Int64 // how many walks it made (TestQuotaWalksSeldom)
}

// dirUsage is one workspace's measured size plus the growth accepted
// since; mu serializes the checks of one workspace.
type dirUsage struct {
	mu   sync.Mutex
	used du
	at   time.Time // of the walk; zero: never measured
	// pending is what uploads hold outside the workspace until they move
	// it in (Room): no walk sees it, every check counts it.
	pending count
}

// count is bytes and files.
type count struct{ bytes, files int64 }

func (c *usageCache) dir(dir string) *dirUsage {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dirs[dir]
	if d == nil {
		// Forget the workspaces not written lately, at most once per
		// usageFresh, so that a map of live ones is not scanned on
		// every call.
		if len(c.dirs) >= 1024 && time.Since(c.swept) > usageFresh {
			c.swept = time.Now()
			for k, old := range c.dirs {
				if old.mu.TryLock() {
					if time.Since(old.at) > usageFresh && old.pending == (count{}) {
						delete(c.dirs, k)
					}
					old.mu.Unlock()
				}
			}
		}
		d = &dirUsage{}
		c.dirs[dir] = d
	}
	return d
}

// measure walks dir and records what it found.
func (c *usageCache) measure(ctx context.Context, dir string) (du, error) {
	d := c.dir(dir)
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.walk(ctx, dir)
}

func (d *dirUsage) walk(ctx context.Context, dir string) (du, error) {
	measured.walks.Add(1)
	used, err := usage(ctx, dir)
	if err != nil {
		d.at = time.Time{}
		return du{}, err
	}
	d.used, d.at = used, time.Now()
	return used, nil
}

// over says which limit u breaks, as the end of a sentence whose start
// the caller writes, or "" when it breaks none.
func (q quota) over(u du, free int64) string {
	switch {
	case u.bytes > q.limit:
		used, limit := apart(u.bytes, q.limit)
		return fmt.Sprintf("the workspace uses %s, over its limit of %s (sandbox.limits.workspace_mb)", used, limit)
	case u.files > q.files:
		return fmt.Sprintf("the workspace holds %d files and directories, over its limit of %d (sandbox.limits.workspace_files)", u.files, q.files)
	case free < q.floor:
		return fmt.Sprintf("the disk of the workspaces has %s free, under the %s herd keeps free for everyone (sandbox.limits.min_free_mb)",
			mebibytes(free), mebibytes(q.floor))
	}
	return ""
}

// check measures dir afresh and says which limit it breaks, or "".
func (q quota) check(ctx context.Context, dir string) (du, string, error) {
	used, err := measured.measure(ctx, dir)
	if err != nil {
		return du{}, "", err
	}
	free, err := freeSpace(dir)
	if err != nil {
		return du{}, "", err
	}
	return used, q.over(used, free), nil
}

// refuseOver refuses the tool named what while the workspace is over a
// limit; else it returns what it measured.
func (q quota) refuseOver(ctx context.Context, dir, what string) (du, error) {
	used, over, err := q.check(ctx, dir)
	if err != nil {
		return du{}, err
	}
	if over != "" {
		return du{}, fmt.Errorf("%s; %s is refused until it is smaller: remove files with bash or shrink them with write_file", over, what)
	}
	return used, nil
}

// refuseGrowth refuses a write that adds grow bytes (and a new file when
// create) to a workspace that would then be over a limit, or to a disk
// under its floor. A write that does not grow it is allowed even over the
// limit: that is how the model makes room.
func (q quota) refuseGrowth(ctx context.Context, dir string, grow int64, create bool) error {
	if grow <= 0 && !create {
		return nil
	}
	newFiles := int64(0)
	if create {
		newFiles = 1
	}
	d := measured.dir(dir)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := q.fits(ctx, d, dir, grow, newFiles); err != nil {
		return err
	}
	d.used.bytes += grow // the write about to happen, until the next walk
	d.used.files += newFiles
	return nil
}

// fits refuses grow bytes and newFiles more in dir, with what uploads
// hold (d.pending), when that breaks a limit; d.mu is held. It trusts a
// measurement up to usageFresh old, and refuses only on a fresh one.
func (q quota) fits(ctx context.Context, d *dirUsage, dir string, grow, newFiles int64) error {
	over := func() bool {
		return d.used.bytes+d.pending.bytes+grow > q.limit || d.used.files+d.pending.files+newFiles > q.files
	}
	if d.at.IsZero() || time.Since(d.at) > usageFresh || over() {
		if _, err := d.walk(ctx, dir); err != nil {
			return err
		}
	}
	free, err := freeSpace(dir)
	if err != nil {
		return err
	}
	used := d.used.bytes + d.pending.bytes
	switch {
	case used+grow > q.limit:
		return &LimitError{Limit: "sandbox.limits.workspace_mb", msg: fmt.Sprintf("the write would take the workspace to %s, over its limit of %s (sandbox.limits.workspace_mb); "+
			"nothing was written", mebibytes(used+grow), mebibytes(q.limit))}
	case d.used.files+d.pending.files+newFiles > q.files:
		return &LimitError{Limit: "sandbox.limits.workspace_files", msg: fmt.Sprintf("the workspace holds %d files and directories, its limit (sandbox.limits.workspace_files); "+
			"nothing was written", d.used.files+d.pending.files)}
	case free-grow < q.floor:
		return &LimitError{Limit: "sandbox.limits.min_free_mb", msg: fmt.Sprintf("the disk of the workspaces has %s free, and herd keeps %s free for everyone "+
			"(sandbox.limits.min_free_mb); nothing was written", mebibytes(free), mebibytes(q.floor))}
	}
	return nil
}

// LimitError is a write refused because the workspace would break one of
// its limits, or its disk go under the floor; Limit names the setting.
type LimitError struct {
	Limit string // "sandbox.limits.workspace_mb", "….workspace_files", "….min_free_mb"
	msg   string
}

func (e *LimitError) Error() string { return e.msg }

// Quota is the workspace limits for what grows a workspace besides the
// tools and commands: the files API's uploads (docs/DESIGN.md §4).
type Quota struct{ q quota }

// NewQuota returns the limits l, with their defaults, as the tools
// enforce them.
func NewQuota(l SandboxLimits) Quota { return Quota{workspaceQuota(l)} }

// Bytes is the most a workspace may hold (sandbox.limits.workspace_mb).
func (q Quota) Bytes() int64 { return q.q.limit }

// Room is what one upload holds of a workspace's limits while its bytes
// wait outside the workspace, where no walk of it sees them: they count
// as pending in every check (the tools' writes included) until Publish
// moves them in or Release gives them back. Its methods are for one
// goroutine.
type Room struct {
	q    quota
	dir  string
	d    *dirUsage
	held count
}

// Room returns an empty hold on the workspace dir.
func (q Quota) Room(dir string) *Room { return &Room{q: q.q, dir: dir, d: measured.dir(dir)} }

// Take holds n more bytes, and one more file when file, or refuses them
// with a *LimitError when the workspace with everything pending would
// break a limit or its disk go under the floor.
func (r *Room) Take(ctx context.Context, n int64, file bool) error {
	files := int64(0)
	if file {
		files = 1
	}
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	if err := r.q.fits(ctx, r.d, r.dir, n, files); err != nil {
		return err
	}
	r.d.pending.bytes += n
	r.d.pending.files += files
	r.held.bytes += n
	r.held.files += files
	return nil
}

// Publish runs move, which puts what r holds into the workspace, with no
// check of the workspace running meanwhile, so none counts it twice or
// not at all; what it moved then counts as the workspace's own until the
// next walk. r holds nothing after, whether move failed or not.
func (r *Room) Publish(move func() error) error {
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	err := move()
	if err == nil {
		r.d.used.bytes += r.held.bytes
		r.d.used.files += r.held.files
	}
	r.d.pending.bytes -= r.held.bytes
	r.d.pending.files -= r.held.files
	r.held = count{}
	return err
}

// Release gives back what r holds: the upload was refused or failed.
func (r *Room) Release() {
	r.d.mu.Lock()
	defer r.d.mu.Unlock()
	r.d.pending.bytes -= r.held.bytes
	r.d.pending.files -= r.held.files
	r.held = count{}
}

// noteOver is the note added to a command's result when it left the
// workspace over a limit, or "". It also takes the set-user-ID and
// set-group-ID bits off what the command left (docs/DESIGN.md §4).
func (q quota) noteOver(ctx context.Context, dir string) string {
	used, over, err := q.check(ctx, dir)
	if err != nil {
		return "herd could not measure the workspace after the command: " + err.Error()
	}
	stripSetID(dir, used.setID)
	if over == "" {
		return ""
	}
	return over + ": further commands and growing writes are refused until it is smaller"
}

// stripSetID clears the set-user-ID and set-group-ID bits of the regular
// files at paths (relative to dir, slash-separated). Each is opened through an
// os.Root on dir without following a final symlink, checked on the open
// file and changed through it, so a path swapped for a link meanwhile
// changes nothing outside the workspace.
func stripSetID(dir string, paths []string) {
	if len(paths) == 0 {
		return
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return
	}
	defer root.Close()
	for _, rel := range paths {
		f, err := root.OpenFile(filepath.FromSlash(rel), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		if info, err := f.Stat(); err == nil && info.Mode().IsRegular() {
			_ = f.Chmod(info.Mode() &^ (fs.ModeSetuid | fs.ModeSetgid))
		}
		f.Close()
	}
}

// apart formats two sizes so that they read different: "10.0 MiB, over
// its limit of 10.0 MiB" says nothing.
func apart(a, b int64) (string, string) {
	for _, f := range []string{"%.1f MiB", "%.2f MiB", "%.3f MiB"} {
		if x, y := fmt.Sprintf(f, float64(a)/mib), fmt.Sprintf(f, float64(b)/mib); x != y {
			return x, y
		}
	}
	return fmt.Sprintf("%d bytes", a), fmt.Sprintf("%d bytes", b)
}

func mebibytes(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/mib)
}
