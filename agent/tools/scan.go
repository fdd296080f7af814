package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// A workspace is measured as herd runs — root, often — while commands of
// its own may be changing it, so it is never walked by path (a directory
// swapped for a symbolic link would lead the walk out of the workspace,
// and a path may be longer than the kernel takes): every directory is
// opened from its parent's descriptor, one name at a time, never
// following a symbolic link (docs/DESIGN.md §4).

// maxScanDepth is how deep a workspace's directories may nest. Deeper
// ones are neither measured nor watched, and a command that makes them
// is stopped (each level holds a descriptor while it is walked).
const maxScanDepth = 512

// errTooDeep marks a directory nested past maxScanDepth.
var errTooDeep = errors.New("nested deeper than 512 levels")

// fileKey names an inode: a file with two names is one file.
type fileKey struct{ dev, ino uint64 }

// openDirAt opens the directory name inside dir without following a
// symbolic link.
func openDirAt(dir *os.File, name string) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "openat", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// openBeneath opens the directory at rel (slash-separated, relative to
// root; "" is root itself) one name at a time.
func openBeneath(root *os.File, rel string) (*os.File, error) {
	dir, err := openDirAt(root, ".")
	if err != nil || rel == "" {
		return dir, err
	}
	for _, name := range strings.Split(rel, "/") {
		next, err := openDirAt(dir, name)
		dir.Close()
		if err != nil {
			return nil, err
		}
		dir = next
	}
	return dir, nil
}

// statAt looks at name inside dir without following a symbolic link.
func statAt(dir *os.File, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

func isDir(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFDIR }

// sizeOf is what an entry occupies: its allocated blocks, or for a
// regular file its length when that is more (a file written through a
// shared mapping, or sparse, counts as long as it is), so no way of
// writing makes a file count for less than it can hold.
func sizeOf(st *unix.Stat_t) int64 {
	used := st.Blocks * 512
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		used = max(used, st.Size)
	}
	return used
}

// visitFunc is called for each entry of a scan: dir is its directory
// (open for the call only), rel the directory's path from the scan's root.
type visitFunc func(dir *os.File, rel, name string, st *unix.Stat_t) error

// scan walks a tree depth first, calling visit for every entry. A part
// it cannot enter — nested past maxScanDepth, or a directory the server
// may not read (a command of the server's own uid can chmod 000) — is
// skipped and noted in partial rather than failing the whole walk.
type scan struct {
	ctx     context.Context
	visit   visitFunc
	partial []string // rel paths of what was skipped, and why
	sorted  bool     // each directory's names in order (WalkFiles)
}

// tree scans what lies below dir, whose path from the root is rel.
func (sc *scan) tree(dir *os.File, rel string, depth int) error {
	names, err := dir.Readdirnames(-1)
	if err != nil {
		sc.skip(rel, err)
		return nil
	}
	if sc.sorted {
		slices.Sort(names)
	}
	for _, name := range names {
		if err := sc.ctx.Err(); err != nil {
			return err
		}
		st, err := statAt(dir, name)
		if errors.Is(err, unix.ENOENT) {
			continue // removed meanwhile
		}
		if err != nil {
			sc.skip(joinRel(rel, name), err)
			continue
		}
		if err := sc.visit(dir, rel, name, &st); err != nil {
			return err
		}
		if isDir(&st) {
			if err := sc.dir(dir, joinRel(rel, name), name, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func (sc *scan) dir(parent *os.File, rel, name string, depth int) error {
	if depth >= maxScanDepth {
		sc.skip(rel, errTooDeep)
		return nil
	}
	sub, err := openDirAt(parent, name)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return nil // removed or replaced meanwhile
	}
	if err != nil {
		sc.skip(rel, err)
		return nil
	}
	defer sub.Close()
	return sc.tree(sub, rel, depth)
}

func (sc *scan) skip(rel string, err error) {
	if len(sc.partial) < 8 {
		sc.partial = append(sc.partial, fmt.Sprintf("%s: %v", rel, err))
	}
}

// joinRel joins a slash-separated relative path and a name.
func joinRel(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}
