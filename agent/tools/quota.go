package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
)

// quota is the workspace size limit (sandbox.limits.workspace_mb). A
// thread's workspace is a directory of the server's file system with no
// quota of its own, so the limit is enforced where the tools meet it: bash
// and growing writes are refused while the workspace is over the limit,
// and a command that took it over says so. A single command can still
// write up to its file-size limit per file before the next check.
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

// refuseOver refuses the tool named what while the workspace is over the limit.
func (q quota) refuseOver(ctx context.Context, dir, what string) error {
	used, err := usage(ctx, dir)
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
	used, err := usage(ctx, dir)
	if err != nil {
		return err
	}
	if used+grow > q.limit {
		return fmt.Errorf("the write would take the workspace to %s, over its limit of %s (sandbox.limits.workspace_mb); "+
			"nothing was written", mebibytes(used+grow), mebibytes(q.limit))
	}
	return nil
}

// noteOver is the note added to a command's result when it left the
// workspace over the limit, or "".
func (q quota) noteOver(ctx context.Context, dir string) string {
	used, err := usage(ctx, dir)
	if err != nil || used <= q.limit {
		return ""
	}
	return fmt.Sprintf("the workspace now uses %s, over its limit of %s: further commands and growing writes are "+
		"refused until it is smaller", mebibytes(used), mebibytes(q.limit))
}

func mebibytes(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/mib)
}
