package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// What the server's files API (uploads, downloads, zips) takes of the
// tools' confinement, so that there is one of it (docs/DESIGN.md §4): a
// user reaches in a workspace what the file tools reach, by the same code.

// OpenRegular opens name, relative to root, for reading, only if it is a
// regular file, as read_file does: through root, so neither ".." nor a
// symlink leads outside (ErrOutsideWorkspace), and without blocking on a
// FIFO swapped in meanwhile (ErrFileType). A missing file is
// fs.ErrNotExist.
func OpenRegular(root *os.Root, name string) (*os.File, error) {
	return openChecked(root, name, os.O_RDONLY, wantFile)
}

// RemoveRegular removes name, relative to root, only if it is a regular
// file: through root, as OpenRegular reaches it (ErrOutsideWorkspace,
// fs.ErrNotExist), but the last part is never followed, so a symbolic
// link, FIFO, socket or device is ErrFileType and a directory
// syscall.EISDIR, each left as it is. A name swapped meanwhile for
// another kind loses its name alone, inside the workspace.
func RemoveRegular(root *os.Root, name string) error {
	info, err := root.Lstat(name)
	switch {
	case err != nil:
		return workspaceError(name, err)
	case info.IsDir():
		return &fs.PathError{Op: "remove", Path: name, Err: syscall.EISDIR}
	case !info.Mode().IsRegular():
		return fmt.Errorf("%s: %w", name, ErrFileType)
	}
	if err := root.Remove(name); err != nil {
		return workspaceError(name, err)
	}
	return nil
}

// RemoveEmptyDirs removes dir, relative to root, and then each folder
// above it while they are empty directories (never a link to one), up to
// root, which stays.
func RemoveEmptyDirs(root *os.Root, dir string) {
	for ; dir != "." && dir != ""; dir = filepath.Dir(dir) {
		info, err := root.Lstat(dir)
		if err != nil || !info.IsDir() || root.Remove(dir) != nil {
			return
		}
	}
}

// OpenDir opens the directory name, relative to root, as ls does: through
// root, so neither ".." nor a symlink leads outside
// (ErrOutsideWorkspace); anything but a directory is ErrFileType.
func OpenDir(root *os.Root, name string) (*os.File, error) {
	return openChecked(root, name, os.O_RDONLY|unix.O_DIRECTORY, wantDir)
}

// File is a regular file a walk of a workspace found.
type File struct {
	// Path is slash-separated, from the workspace's root.
	Path     string
	Size     int64
	Modified time.Time
	dir      *os.File // its directory, open during the visit only
	name     string
}

// Open opens the file for reading, during its visit only: from its
// directory's descriptor, without following a symbolic link, without
// blocking, and only while it is still a regular file (else ErrFileType),
// so a name swapped for a link or a FIFO since the walk saw it opens
// nothing else.
func (f File) Open() (*os.File, error) {
	fd, err := unix.Openat(int(f.dir.Fd()), f.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s: %w", f.Path, ErrFileType)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: f.Path, Err: err}
	}
	file := os.NewFile(uintptr(fd), f.Path)
	info, err := file.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = fmt.Errorf("%s: %w", f.Path, ErrFileType)
	}
	if err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}

// WalkFiles calls fn for every regular file below folder in the
// workspace dir, depth first, each directory's entries sorted by name.
// folder is slash-separated and relative ("" is the whole workspace). It
// walks as the quota does (scan.go): by descriptor, one name at a time,
// never through a symbolic link, so nothing swapped in meanwhile leads it
// out; links, FIFOs, sockets and devices are not files to it, and what it
// cannot enter is left out. A folder that is not a directory reached
// without links is fs.ErrNotExist; one with "..", "." or empty parts
// fs.ErrInvalid. It stops at fn's first error, or when ctx ends.
func WalkFiles(ctx context.Context, dir, folder string, fn func(File) error) error {
	if folder == "" {
		folder = "."
	}
	if !fs.ValidPath(folder) {
		return fmt.Errorf("%q: %w", folder, fs.ErrInvalid)
	}
	if folder == "." {
		folder = ""
	}
	root, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	start, err := openBeneath(root, folder)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("%s: %w", folder, fs.ErrNotExist)
	} else if err != nil {
		return err
	}
	defer start.Close()
	sc := &scan{ctx: ctx, sorted: true, visit: func(d *os.File, rel, name string, st *unix.Stat_t) error {
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil
		}
		return fn(File{
			Path: joinRel(rel, name), Size: st.Size,
			Modified: time.Unix(st.Mtim.Unix()).UTC(), dir: d, name: name,
		})
	}}
	return sc.tree(start, folder, 0)
}
