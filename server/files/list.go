package files

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"time"

	"herd/agent/tools"
)

// MaxListed bounds the files one list answers; a longer list says it
// was cut, and a prefix lists a folder alone.
const MaxListed = 10_000

// Entry is a file of a workspace as the API lists it.
type Entry struct {
	Path     string    `json:"path"` // slash-separated, from the workspace's root
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

// errListFull stops a walk that found MaxListed files and one more.
var errListFull = errors.New("files: list full")

// List lists the regular files of thread threadID's workspace below
// prefix ("" for all), sorted by path, at most MaxListed of them; cut
// says there were more. It walks as tools.WalkFiles does: symbolic links,
// FIFOs, sockets and devices are not listed and no link is followed. A
// prefix that is no folder (a link to one included) is ErrNotFound; a
// workspace not made yet lists nothing.
func (w *Workspaces) List(ctx context.Context, threadID, prefix string) (entries []Entry, cut bool, err error) {
	prefix, err = cleanPath(prefix, true)
	if err != nil {
		return nil, false, err
	}
	dir, err := w.workspace(threadID)
	if err != nil {
		return nil, false, err
	}
	entries = []Entry{}
	err = tools.WalkFiles(ctx, dir, prefix, func(f tools.File) error {
		if len(entries) == MaxListed {
			return errListFull
		}
		entries = append(entries, Entry{Path: f.Path, Size: f.Size, Modified: f.Modified})
		return nil
	})
	switch {
	case errors.Is(err, errListFull):
		cut = true
	case prefix == "" && errors.Is(err, fs.ErrNotExist):
		return entries, false, nil // no run or upload made the workspace yet
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, ErrNotFound
	case err != nil:
		return nil, false, err
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return entries, cut, nil
}
