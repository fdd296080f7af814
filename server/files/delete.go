package files

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"

	"herd/agent/tools"
)

// ErrFolder: a delete named a folder; only files are deleted, one at a
// time.
var ErrFolder = errors.New("files: only files can be deleted")

// Delete removes the regular file at name, relative to thread threadID's
// workspace, reached as Open reaches it (tools.RemoveRegular): a missing
// file, a symbolic link, a FIFO, socket or device is ErrNotFound and
// stays; a folder is ErrFolder. The folders it leaves empty go too, up
// to the workspace's root, so a tree shows no empty branch.
func (w *Workspaces) Delete(threadID, name string) error {
	name, err := cleanPath(name, false)
	if err != nil {
		return err
	}
	dir, err := w.workspace(threadID)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return openFailure(err)
	}
	defer root.Close()
	name = filepath.FromSlash(name)
	if err := tools.RemoveRegular(root, name); errors.Is(err, syscall.EISDIR) {
		return ErrFolder
	} else if err != nil {
		return openFailure(err)
	}
	tools.RemoveEmptyDirs(root, filepath.Dir(name))
	return nil
}
