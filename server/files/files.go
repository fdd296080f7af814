// Package files is a thread's workspace as its owner reaches it through
// the API (docs/DESIGN.md §4, docs/API.md "Files"): uploads into
// uploads/, the list of its files, one file's bytes and a zip of a
// folder. It confines every path with the file tools' own code
// (agent/tools: os.Root, walks by descriptor) and holds uploads to the
// workspace quota the tools and commands hold to. Who may reach which
// thread is the server's to check before.
package files

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"herd/agent"
	"herd/agent/tools"
)

// DefaultMaxUploadMB is files.max_upload_mb's default.
const DefaultMaxUploadMB = 100

// mib is a mebibyte, the unit of every size setting.
const mib = 1 << 20

// Options builds Workspaces.
type Options struct {
	// Root holds the threads' workspaces (workspaces.dir) and, in
	// .spool, the uploads on their way in and the large files a zip
	// copies out.
	Root string
	// Limits are the sandbox's workspace limits, which uploads count
	// against as the tools' writes do.
	Limits tools.SandboxLimits
	// Owner, set when herd runs as root with the bwrap sandbox, is the
	// account commands run as: uploads belong to it, as the rest of the
	// workspace does, so that commands can change them.
	Owner *tools.Account
	// MaxUploadMB bounds one uploaded file, in MiB; 0 is
	// DefaultMaxUploadMB.
	MaxUploadMB int
	Logger      *slog.Logger
}

// Workspaces serves the files of the threads' workspaces.
type Workspaces struct {
	root      string
	quota     tools.Quota
	owner     *tools.Account
	maxUpload int64 // bytes
	log       *slog.Logger
}

// New returns the files of the workspaces under o.Root.
func New(o Options) *Workspaces {
	if o.MaxUploadMB <= 0 {
		o.MaxUploadMB = DefaultMaxUploadMB
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Workspaces{
		root: o.Root, quota: tools.NewQuota(o.Limits), owner: o.Owner,
		maxUpload: int64(o.MaxUploadMB) * mib, log: o.Logger,
	}
}

// MaxUpload is the most bytes one uploaded file may have.
func (w *Workspaces) MaxUpload() int64 { return w.maxUpload }

// Errors the API maps to statuses (server/errors.go).
var (
	// ErrNotFound: no regular file, or no folder, at the path; or the
	// thread's workspace was removed meanwhile.
	ErrNotFound = errors.New("files: not found")
	// ErrOutside: a symbolic link on the path leads outside the
	// workspace.
	ErrOutside = errors.New("files: a symbolic link on the path leads outside the workspace")
	// ErrNotMultipart: an upload that is not multipart/form-data.
	ErrNotMultipart = errors.New("files: send the files as multipart/form-data")
	// ErrUploadsTaken: the workspace's uploads is not a folder.
	ErrUploadsTaken = errors.New("files: the workspace's uploads is not a folder")
)

// PathError is a path or prefix the API refuses as malformed.
type PathError struct{ Msg string }

func (e *PathError) Error() string { return e.Msg }

// UploadError is a malformed upload: a part not named "file", a file
// without a name, no file at all, a body that ends early.
type UploadError struct{ Msg string }

func (e *UploadError) Error() string { return e.Msg }

// RefusedError is an uploaded file a limit refused: File is the name the
// client gave it, Limit the setting. Nothing of the upload is kept.
type RefusedError struct {
	File  string
	Limit string
	Msg   string
}

func (e *RefusedError) Error() string { return e.Msg }

// workspace is thread threadID's workspace directory.
func (w *Workspaces) workspace(threadID string) (string, error) {
	return agent.WorkspaceDir(w.root, threadID)
}

// cleanPath checks a path or folder the API was given: relative,
// slash-separated, without ".", ".." or empty parts; a folder may end
// with "/", and "" or "." is the whole workspace for one.
func cleanPath(p string, folder bool) (string, error) {
	what := "path"
	if folder {
		what = "prefix"
		p = strings.TrimSuffix(p, "/")
		if p == "" || p == "." {
			return "", nil
		}
	}
	switch {
	case p == "" || p == ".":
		return "", &PathError{fmt.Sprintf("the %s is empty; name a file of the workspace", what)}
	case strings.ContainsRune(p, 0):
		return "", &PathError{fmt.Sprintf("the %s holds a NUL byte", what)}
	case strings.HasPrefix(p, "/"):
		return "", &PathError{fmt.Sprintf("the %s %q is absolute; give it relative to the workspace", what, p)}
	case !fs.ValidPath(p):
		return "", &PathError{fmt.Sprintf("the %s %q has a \".\", \"..\" or empty part", what, p)}
	}
	return p, nil
}

// openFailure is what the API says of a failed open of name.
func openFailure(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, tools.ErrFileType), errors.Is(err, fs.ErrInvalid):
		return ErrNotFound
	case errors.Is(err, tools.ErrOutsideWorkspace):
		return ErrOutside
	}
	return err
}

// Open opens the regular file at name, relative to thread threadID's
// workspace, for reading, as the read_file tool would
// (tools.OpenRegular): no path, symbolic link or FIFO leads it outside
// or blocks it.
func (w *Workspaces) Open(threadID, name string) (*os.File, fs.FileInfo, error) {
	name, err := cleanPath(name, false)
	if err != nil {
		return nil, nil, err
	}
	dir, err := w.workspace(threadID)
	if err != nil {
		return nil, nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, openFailure(err)
	}
	defer root.Close()
	f, err := tools.OpenRegular(root, filepath.FromSlash(name))
	if err != nil {
		return nil, nil, openFailure(err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, info, nil
}

// spoolDir is where uploads wait and a zip copies large files: beside
// the workspaces, in no sandbox, on their file system (an upload moves
// in by a hard link). No thread is named .spool: ids are UUIDs.
func (w *Workspaces) spoolDir() (*os.File, error) {
	dir := filepath.Join(w.root, ".spool")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("files: spool: %w", err)
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("files: spool: %w", err)
	}
	return f, nil
}
