package files

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"herd/agent/tools"
)

// inMemory is the largest file a zip copies through memory: 1 MiB, the
// most the file tools write at once. A larger one is copied to a spool
// file.
const inMemory = 1 << 20

// copyTries is how many times a zip copies a file that changes while it
// is copied before it settles for what it has (snapshot).
const copyTries = 3

// compareChunk is the piece a copy is compared with its file in.
const compareChunk = 64 << 10

// memory holds the buffers of one zip at a time each: a file's copy and
// the two pieces it is compared in.
var memory = sync.Pool{New: func() any {
	return &buffers{file: make([]byte, inMemory), a: make([]byte, compareChunk), b: make([]byte, compareChunk)}
}}

type buffers struct{ file, a, b []byte }

// stored are the extensions of files already compressed: deflating them
// again costs time and saves nothing.
var stored = map[string]bool{
	".png": true, ".jpg": true, ".jpeg": true, ".gif": true, ".webp": true, ".avif": true,
	".zip": true, ".gz": true, ".tgz": true, ".bz2": true, ".xz": true, ".zst": true, ".7z": true,
	".mp3": true, ".mp4": true, ".mov": true, ".webm": true, ".ogg": true, ".pdf": true,
}

// Zip writes to out a zip of the regular files of thread threadID's
// workspace below prefix ("" for all), each under its path from the
// workspace's root, in the order and with the confinement of
// tools.WalkFiles (no link followed, no FIFO, socket or device). It
// streams in constant memory: an entry at a time, through a 1 MiB buffer
// or a spool file. Each file is taken when two reads of it agree
// (snapshot), however it is written meanwhile. A prefix that is no folder
// is ErrNotFound, before anything is written; an empty workspace is an
// empty zip.
func (w *Workspaces) Zip(ctx context.Context, threadID, prefix string, out io.Writer) error {
	prefix, err := cleanPath(prefix, true)
	if err != nil {
		return err
	}
	dir, err := w.workspace(threadID)
	if err != nil {
		return err
	}
	a := &archive{w: w, zw: zip.NewWriter(out), mem: memory.Get().(*buffers)}
	defer a.close()
	a.zw.RegisterCompressor(zip.Deflate, a.deflater)
	err = tools.WalkFiles(ctx, dir, prefix, func(f tools.File) error { return a.add(ctx, f) })
	switch {
	case prefix == "" && errors.Is(err, fs.ErrNotExist) && a.entries == 0:
		// No run or upload made the workspace yet.
	case errors.Is(err, fs.ErrNotExist) && a.entries == 0:
		return ErrNotFound
	case err != nil:
		return err
	}
	return a.zw.Close()
}

// archive is one zip being written.
type archive struct {
	w       *Workspaces
	zw      *zip.Writer
	mem     *buffers
	fw      *flate.Writer // reused for every entry
	spool   *os.File      // unlinked; made for the first large file
	entries int
}

func (a *archive) close() {
	memory.Put(a.mem)
	if a.spool != nil {
		a.spool.Close()
	}
}

// deflater is the zip's Deflate compressor: the fastest level (a zip is
// for taking files home, not for storing them), one writer reset for
// each entry.
func (a *archive) deflater(out io.Writer) (io.WriteCloser, error) {
	if a.fw == nil {
		var err error
		a.fw, err = flate.NewWriter(out, flate.BestSpeed)
		return a.fw, err
	}
	a.fw.Reset(out)
	return a.fw, nil
}

// add writes one file's entry. A file that is gone, no longer regular or
// cannot be read is left out (and logged, but for the first two); only
// a failure to write the zip stops it.
func (a *archive) add(ctx context.Context, f tools.File) error {
	file, err := f.Open()
	if errors.Is(err, tools.ErrFileType) || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		a.w.log.Warn("a file was left out of a zip", "path", f.Path, "err", err)
		return nil
	}
	defer file.Close()
	snap, err := a.snapshot(file)
	if err != nil {
		a.w.log.Warn("a file was left out of a zip", "path", f.Path, "err", err)
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	method := zip.Deflate
	if stored[strings.ToLower(path.Ext(f.Path))] {
		method = zip.Store
	}
	fh := &zip.FileHeader{Name: f.Path, Method: method, Modified: snap.modified, NonUTF8: !utf8.ValidString(f.Path)}
	fh.SetMode(0o644)
	ew, err := a.zw.CreateHeader(fh)
	if err != nil {
		return err
	}
	a.entries++
	if _, err := io.CopyBuffer(ew, snap.r, a.mem.a); err != nil {
		return fmt.Errorf("files: zip %s: %w", f.Path, err)
	}
	return nil
}

// snapshot is a copy of a file as it was at one moment.
type snapshot struct {
	r        io.Reader
	modified time.Time
}

// errUnsettled: a file that kept changing, and not only by growing.
var errUnsettled = errors.New("it changed while it was copied, each of 3 times")

// snapshot copies f as it is at one moment, however it is written
// meanwhile: it copies exactly the size f has (fstat), then reads f again
// and takes the copy only if both reads agree and f's size, times and
// inode did not move. The times alone would not do: a file system
// updates them once per clock tick (about 4 ms), so a rewrite within the
// tick of a copy leaves them as they were. A file that changes on every
// one of copyTries copies is taken as its last copy if that is still
// f's beginning (a file being appended to: what was there stays); else it
// is left out (errUnsettled).
func (a *archive) snapshot(f *os.File) (snapshot, error) {
	var src io.ReaderAt
	var n int64
	for range copyTries {
		var before, after unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &before); err != nil {
			return snapshot{}, err
		}
		var err error
		if src, n, err = a.copy(f, before.Size); err != nil {
			return snapshot{}, err
		}
		same, err := a.matches(f, src, n)
		if err != nil {
			return snapshot{}, err
		}
		if err := unix.Fstat(int(f.Fd()), &after); err != nil {
			return snapshot{}, err
		}
		if same && n == before.Size && sameFile(&before, &after) {
			return a.taken(src, n, &after), nil
		}
	}
	if n > 0 {
		var now unix.Stat_t
		same, err := a.matches(f, src, n)
		if err == nil {
			err = unix.Fstat(int(f.Fd()), &now)
		}
		if err != nil || same {
			return a.taken(src, n, &now), err
		}
	}
	return snapshot{}, errUnsettled
}

// taken is the snapshot of the n bytes of src, modified as st says.
func (a *archive) taken(src io.ReaderAt, n int64, st *unix.Stat_t) snapshot {
	return snapshot{r: io.NewSectionReader(src, 0, n), modified: time.Unix(st.Mtim.Unix())}
}

// copy copies the first size bytes of f (fewer if it shrank) into memory
// or, past inMemory, into the spool file.
func (a *archive) copy(f *os.File, size int64) (io.ReaderAt, int64, error) {
	if size <= inMemory {
		n, err := f.ReadAt(a.mem.file[:size], 0)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return bytes.NewReader(a.mem.file[:n]), int64(n), err
	}
	if err := a.openSpool(); err != nil {
		return nil, 0, err
	}
	if err := a.spool.Truncate(0); err != nil {
		return nil, 0, err
	}
	if _, err := a.spool.Seek(0, io.SeekStart); err != nil {
		return nil, 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, 0, err
	}
	// From an *os.File through a LimitedReader: copy_file_range, in the
	// kernel, where the file system allows.
	n, err := io.Copy(a.spool, io.LimitReader(f, size))
	return a.spool, n, err
}

// openSpool makes the zip's spool file: unlinked at once, so that it
// goes with the zip, whatever becomes of herd.
func (a *archive) openSpool() error {
	if a.spool != nil {
		return nil
	}
	dir, err := a.w.spoolDir()
	if err != nil {
		return err
	}
	defer dir.Close()
	name, f, err := createSpoolFile(dir)
	if err != nil {
		return err
	}
	_ = unix.Unlinkat(int(dir.Fd()), name, 0)
	a.spool = f
	return nil
}

// matches reports whether f's first n bytes are src's.
func (a *archive) matches(f *os.File, src io.ReaderAt, n int64) (bool, error) {
	for off := int64(0); off < n; off += compareChunk {
		m := min(compareChunk, n-off)
		x, y := a.mem.a[:m], a.mem.b[:m]
		if _, err := f.ReadAt(x, off); err != nil {
			if errors.Is(err, io.EOF) {
				return false, nil // it shrank
			}
			return false, err
		}
		if _, err := src.ReadAt(y, off); err != nil {
			return false, err
		}
		if !bytes.Equal(x, y) {
			return false, nil
		}
	}
	return true, nil
}

// sameFile reports whether nothing wrote to or replaced the file between
// two fstats: same inode, size, modification and change times.
func sameFile(a, b *unix.Stat_t) bool {
	return a.Ino == b.Ino && a.Size == b.Size && a.Mtim == b.Mtim && a.Ctim == b.Ctim
}
