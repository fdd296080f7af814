package files

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"herd/agent/tools"
)

// Limits of one upload request beside the per-file limit and the quota.
const (
	// MaxFilesPerUpload bounds the files of one request, so that its
	// publishing (a hard link each) stays short.
	MaxFilesPerUpload = 1000
	// maxClashes bounds the names tried for a file whose name is taken.
	maxClashes = 10_000
	// bodySlack is what a request may carry beside its files' bytes
	// (boundaries, part headers) over the workspace's limit.
	bodySlack = 1 << 20
	// uploadChunk is what an upload reads, checks against the limits and
	// writes at a time.
	uploadChunk = 256 << 10
	// staleSpool is how old a spool file must be for an upload to remove
	// it: what a crash left; a live upload writes its file constantly.
	staleSpool = 24 * time.Hour
)

// UploadsDir is the folder of a workspace uploads land in.
const UploadsDir = "uploads"

// Saved is a file an upload put in the workspace.
type Saved struct {
	Path string `json:"path"` // "uploads/report.pdf", from the workspace's root
	Size int64  `json:"size"`
}

// chunks are the buffers uploads copy through.
var chunks = sync.Pool{New: func() any { b := make([]byte, uploadChunk); return &b }}

// Upload reads a multipart/form-data body (contentType names its
// boundary) and puts each part named "file" into thread threadID's
// uploads/ under its cleaned name (CleanName), " (2)" and on added when
// the name is taken: it never overwrites. Each file streams to a spool
// file outside the workspace, counted against its limits as it comes
// (tools.Room) and refused past files.max_upload_mb or a workspace limit
// (*RefusedError). All or nothing: only once every file is in are they
// linked into uploads/ together; a refusal or failure leaves nothing.
func (w *Workspaces) Upload(ctx context.Context, threadID, contentType string, body io.Reader) ([]Saved, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, ErrNotMultipart
	}
	dir, err := w.workspace(threadID)
	if err != nil {
		return nil, err
	}
	// The workspace is made now, not when the files move in: a thread
	// deleted and purged meanwhile has none then, and the upload fails
	// rather than bring it back (publish).
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("files: workspace: %w", err)
	}
	if err := tools.OwnWorkspace(dir, w.owner); err != nil {
		return nil, err
	}
	spool, err := w.spoolDir()
	if err != nil {
		return nil, err
	}
	defer spool.Close()
	sweepSpool(spool)
	up := &upload{w: w, ctx: ctx, dir: dir, spool: spool, room: w.quota.Room(dir)}
	defer up.discard()
	limit := w.quota.Bytes() + bodySlack
	mr := multipart.NewReader(&bounded{r: body, n: limit}, params["boundary"])
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, up.readFailure("", err)
		}
		err = up.add(part)
		part.Close()
		if err != nil {
			return nil, err
		}
	}
	if len(up.files) == 0 {
		return nil, &UploadError{`no file: send each as a part named "file" with a filename`}
	}
	return up.publish(dir)
}

// upload is one request's files on their way in.
type upload struct {
	w     *Workspaces
	ctx   context.Context
	dir   string // the workspace
	spool *os.File
	room  *tools.Room
	files []spooled
}

// spooled is a file of the upload, whole in the spool.
type spooled struct {
	name string // cleaned
	tmp  string // its name in the spool
	size int64
}

// add spools part.
func (up *upload) add(part *multipart.Part) error {
	if part.FormName() != "file" {
		return &UploadError{fmt.Sprintf(`unexpected part %q: send each file as a part named "file"`, part.FormName())}
	}
	given := strings.ToValidUTF8(givenName(part), "_")
	if given == "" {
		return &UploadError{`a part named "file" has no filename`}
	}
	if len(up.files) == MaxFilesPerUpload {
		return &RefusedError{File: given, Limit: "files per upload",
			Msg: fmt.Sprintf("%q: an upload takes at most %d files; send the rest in another", given, MaxFilesPerUpload)}
	}
	entries := 1
	if len(up.files) == 0 && !up.haveUploadsDir() {
		entries++ // uploads/ itself counts, as any directory does
	}
	for range entries {
		if err := up.room.Take(up.ctx, 0, true); err != nil {
			return up.refused(given, err)
		}
	}
	tmp, f, err := createSpoolFile(up.spool)
	if err != nil {
		return err
	}
	// Listed before it is written, so discard removes it whatever happens.
	up.files = append(up.files, spooled{name: CleanName(given), tmp: tmp})
	size, err := up.copy(f, part, given)
	if err == nil {
		err = up.own(f)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("files: spool: %w", cerr)
	}
	up.files[len(up.files)-1].size = size
	return err
}

// haveUploadsDir reports whether the workspace has its uploads/ already.
func (up *upload) haveUploadsDir() bool {
	_, err := os.Lstat(filepath.Join(up.dir, UploadsDir))
	return err == nil
}

// givenName is the filename a part's client gave, whole: Part.FileName
// keeps only what follows its last "/", CleanName wants it all.
func givenName(part *multipart.Part) string {
	_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

// copy streams part into f, holding room for each chunk first.
func (up *upload) copy(f *os.File, part io.Reader, given string) (int64, error) {
	bp := chunks.Get().(*[]byte)
	defer chunks.Put(bp)
	buf := *bp
	var size int64
	for {
		n, rerr := fill(part, buf)
		if n > 0 {
			size += int64(n)
			if size > up.w.maxUpload {
				return size, &RefusedError{File: given, Limit: "files.max_upload_mb",
					Msg: fmt.Sprintf("%q is larger than %d MiB, the limit for one uploaded file (files.max_upload_mb); nothing was kept",
						given, up.w.maxUpload/mib)}
			}
			if err := up.room.Take(up.ctx, int64(n), false); err != nil {
				return size, up.refused(given, err)
			}
			if _, err := f.Write(buf[:n]); err != nil {
				return size, fmt.Errorf("files: spool: %w", err)
			}
		}
		if errors.Is(rerr, io.EOF) {
			return size, nil
		}
		if rerr != nil {
			return size, up.readFailure(given, rerr)
		}
	}
}

// own gives a spooled file the mode and owner of what the file tools
// write, before it is linked into the workspace.
func (up *upload) own(f *os.File) error {
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("files: spool: %w", err)
	}
	if o := up.w.owner; o != nil {
		if err := f.Chown(o.UID, o.GID); err != nil {
			return fmt.Errorf("files: spool: %w", err)
		}
	}
	return nil
}

// refused turns a limit's refusal of file given into the API's.
func (up *upload) refused(given string, err error) error {
	var le *tools.LimitError
	if errors.As(err, &le) {
		return &RefusedError{File: given, Limit: le.Limit, Msg: fmt.Sprintf("%q: %s", given, le.Error())}
	}
	return err
}

// readFailure says why reading the body failed, while reading file given
// ("" between files).
func (up *upload) readFailure(given string, err error) error {
	if errors.Is(err, errBodyTooLarge) {
		return &RefusedError{File: given, Limit: "sandbox.limits.workspace_mb",
			Msg: fmt.Sprintf("the upload is larger than the workspace may hold (%d MiB, sandbox.limits.workspace_mb); nothing was kept",
				up.w.quota.Bytes()/mib)}
	}
	// A body that breaks off (the client went away or stalled past the
	// read timeout) reads the same as one that is malformed; only the
	// first has nobody to tell, and neither is herd's fault.
	return &UploadError{fmt.Sprintf("the multipart body is malformed or was cut off: %v", err)}
}

// publish links every spooled file into uploads/, each under the first
// free name, or none.
func (up *upload) publish(dir string) ([]Saved, error) {
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound // the thread was purged meanwhile
	} else if err != nil {
		return nil, fmt.Errorf("files: workspace: %w", err)
	}
	defer root.Close()
	var saved []Saved
	err = up.room.Publish(func() error {
		uploads, err := up.uploadsDir(root)
		if err != nil {
			return err
		}
		defer uploads.Close()
		for _, f := range up.files {
			name, err := linkFree(up.spool, f.tmp, uploads, f.name)
			if err != nil {
				for _, s := range saved {
					_ = unix.Unlinkat(int(uploads.Fd()), strings.TrimPrefix(s.Path, UploadsDir+"/"), 0)
				}
				saved = nil
				return err
			}
			saved = append(saved, Saved{Path: UploadsDir + "/" + name, Size: f.size})
		}
		return nil
	})
	return saved, err
}

// uploadsDir opens the workspace's uploads/, making it (for the
// workspace's owner) when it is missing.
func (up *upload) uploadsDir(root *os.Root) (*os.File, error) {
	err := root.Mkdir(UploadsDir, 0o755)
	if err == nil && up.w.owner != nil {
		err = root.Lchown(UploadsDir, up.w.owner.UID, up.w.owner.GID)
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("files: make %s: %w", UploadsDir, err)
	}
	d, err := tools.OpenDir(root, UploadsDir)
	if errors.Is(err, tools.ErrFileType) || errors.Is(err, tools.ErrOutsideWorkspace) {
		return nil, ErrUploadsTaken
	} else if err != nil {
		return nil, fmt.Errorf("files: open %s: %w", UploadsDir, err)
	}
	return d, nil
}

// linkFree links tmp in spool into dir under name, or the first of its
// suffixed names that is free: a hard link fails rather than replace a
// name, so nothing is ever overwritten, whoever writes meanwhile.
func linkFree(spool *os.File, tmp string, dir *os.File, name string) (string, error) {
	for n := 1; n <= maxClashes; n++ {
		try := suffixed(name, n)
		err := unix.Linkat(int(spool.Fd()), tmp, int(dir.Fd()), try, 0)
		if err == nil {
			return try, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			return "", fmt.Errorf("files: link %s: %w", try, err)
		}
	}
	return "", fmt.Errorf("files: %q and %d more names like it are taken", name, maxClashes)
}

// discard removes what the upload spooled (linked files stay under their
// new names) and gives its room back.
func (up *upload) discard() {
	for _, f := range up.files {
		_ = unix.Unlinkat(int(up.spool.Fd()), f.tmp, 0)
	}
	up.room.Release()
}

// createSpoolFile makes a new file in the spool, under a random name.
func createSpoolFile(spool *os.File) (string, *os.File, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	name := hex.EncodeToString(b[:])
	fd, err := unix.Openat(int(spool.Fd()), name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return "", nil, fmt.Errorf("files: spool: %w", err)
	}
	return name, os.NewFile(uintptr(fd), name), nil
}

// sweepSpool removes the spool files a crash left, a day after.
func sweepSpool(spool *os.File) {
	names, err := spool.Readdirnames(-1)
	if err != nil {
		return
	}
	_, _ = spool.Seek(0, io.SeekStart)
	for _, name := range names {
		var st unix.Stat_t
		if unix.Fstatat(int(spool.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		if time.Since(time.Unix(st.Mtim.Unix())) > staleSpool {
			_ = unix.Unlinkat(int(spool.Fd()), name, 0)
		}
	}
}

// fill reads r until buf is full, r ends (io.EOF, and only then) or
// fails: unlike io.ReadFull, it tells a clean end from a cut one.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// errBodyTooLarge marks a body read past its bound.
var errBodyTooLarge = errors.New("files: the body is larger than its bound")

// bounded reads at most n bytes of r, then fails with errBodyTooLarge.
type bounded struct {
	r io.Reader
	n int64
}

func (b *bounded) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	return n, err
}
