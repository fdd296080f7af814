package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// quota is the workspace size limit (sandbox.limits.workspace_mb). A
// thread's workspace is a directory of the server's file system with no
// quota of its own, so the limit is enforced where the tools meet it: bash
// and growing writes are refused while the workspace is over the limit,
// and a command that took it over says so. A single command can still
// write up to its file-size limit per file before the next check, and a
// growing write is accepted on a measurement up to usageFresh old plus
// the writes accepted since (measured), so what grows the workspace
// besides the tools (an MCP server writing into it) is seen within that
// time; a refusal is always decided on a fresh walk.
type quota struct {
	limit int64 // bytes
}

func workspaceQuota(l SandboxLimits) quota {
	return quota{limit: int64(l.withDefaults().WorkspaceMB) * mib}
}

// usage is the disk space dir uses, counted as du does (allocated blocks,
// so a sparse file counts for what it occupies). It stops when ctx ends.
func usage(ctx context.Context, dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			// A file removed during the walk is simply not counted.
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measure workspace: %w", err)
	}
	return total, nil
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
	used int64
	at   time.Time // of the walk; zero: never measured
}

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
					if time.Since(old.at) > usageFresh {
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
func (c *usageCache) measure(ctx context.Context, dir string) (int64, error) {
	d := c.dir(dir)
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.walk(ctx, dir)
}

func (d *dirUsage) walk(ctx context.Context, dir string) (int64, error) {
	measured.walks.Add(1)
	used, err := usage(ctx, dir)
	if err != nil {
		d.at = time.Time{}
		return 0, err
	}
	d.used, d.at = used, time.Now()
	return used, nil
}

// refuseOver refuses the tool named what while the workspace is over the limit.
func (q quota) refuseOver(ctx context.Context, dir, what string) error {
	used, err := measured.measure(ctx, dir)
	if err != nil {
		return err
	}
	if used > q.limit {
		return fmt.Errorf("the workspace uses %s, over its limit of %s (sandbox.limits.workspace_mb); %s is refused "+
			"until it is smaller: shrink files with write_file", mebibytes(used), mebibytes(q.limit), what)
	}
	return nil
}

// refuseGrowth refuses a write that adds grow bytes to a workspace that
// would then be over the limit. A write that does not grow it is allowed
// even over the limit: that is how the model makes room.
func (q quota) refuseGrowth(ctx context.Context, dir string, grow int64) error {
	if grow <= 0 {
		return nil
	}
	d := measured.dir(dir)
	d.mu.Lock()
	defer d.mu.Unlock()
	used := d.used
	if d.at.IsZero() || time.Since(d.at) > usageFresh || used+grow > q.limit {
		var err error
		if used, err = d.walk(ctx, dir); err != nil {
			return err
		}
	}
	if used+grow > q.limit {
		return fmt.Errorf("the write would take the workspace to %s, over its limit of %s (sandbox.limits.workspace_mb); "+
			"nothing was written", mebibytes(used+grow), mebibytes(q.limit))
	}
	d.used += grow // the write about to happen, until the next walk
	return nil
}

// noteOver is the note added to a command's result when it left the
// workspace over the limit, or "".
func (q quota) noteOver(ctx context.Context, dir string) string {
	used, err := measured.measure(ctx, dir)
	if err != nil || used <= q.limit {
		return ""
	}
	return fmt.Sprintf("the workspace now uses %s, over its limit of %s: further commands and growing writes are "+
		"refused until it is smaller", mebibytes(used), mebibytes(q.limit))
}

func mebibytes(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/mib)
}
