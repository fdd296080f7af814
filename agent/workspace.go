package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/uuid"
)

// WorkspaceDir is where thread threadID's workspace lives under root
// (workspaces.dir), whether it exists yet or not: a directory named by
// the thread's id, which must be a UUID, so no id names anything else.
func WorkspaceDir(root, threadID string) (string, error) {
	if _, err := uuid.Parse(threadID); err != nil {
		return "", fmt.Errorf("agent: workspace: bad thread id %q", threadID)
	}
	return filepath.Join(root, threadID), nil
}

// RemoveWorkspace deletes the thread's workspace and everything in it (and
// the images its tools returned), for
// a deleted thread (docs/DESIGN.md §4). Call it only once the thread's run
// has ended: a running tool would write into it again. The removal goes
// through an os.Root on the workspace root, so neither the thread id nor a
// symlink a command left in the workspace can reach anything outside it.
// A workspace that was never created is not an error.
func (rt *Runtime) RemoveWorkspace(threadID string) error {
	if _, err := uuid.Parse(threadID); err != nil {
		return fmt.Errorf("agent: remove workspace: bad thread id %q", threadID)
	}
	if rt.images != nil {
		if err := rt.images.remove(threadID); err != nil {
			return fmt.Errorf("agent: remove tool images %s: %w", threadID, err)
		}
	}
	root, err := os.OpenRoot(rt.wsRoot)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("agent: remove workspace: %w", err)
	}
	defer root.Close()
	if err := root.RemoveAll(threadID); err != nil {
		return fmt.Errorf("agent: remove workspace %s: %w", threadID, err)
	}
	return nil
}

// ToolImage opens image name that a tool of thread threadID returned,
// with its Content-Type; fs.ErrNotExist when there is none.
func (rt *Runtime) ToolImage(threadID, name string) (*os.File, string, error) {
	if rt.images == nil {
		return nil, "", fs.ErrNotExist
	}
	return rt.images.Open(threadID, name)
}
