package files

import (
	"context"
	"errors"
	"io/fs"
	"path"
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

// Folder is a folder of a workspace as a listing one level deep shows it:
// Path is what a client passes back as the prefix that lists it
// (slash-separated, from the workspace's root, no trailing slash); Files,
// Size and Modified are the count, total bytes and newest change of the
// regular files below it, at any depth.
type Folder struct {
	Path     string    `json:"path"`
	Files    int       `json:"files"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

// Level is a folder's direct children: its folders, then its files, each
// sorted by name, at most MaxListed together; Cut says there were more.
type Level struct {
	Files   []Entry
	Folders []Folder
	Cut     bool
}

// ListLevel lists the direct children of the folder prefix ("" for the
// workspace's root) of thread threadID's workspace, for a tree that
// opens one folder at a time. It walks what List walks, with the same
// confinement and errors, so a folder holding no regular file (only
// links, say) is not listed.
func (w *Workspaces) ListLevel(ctx context.Context, threadID, prefix string) (Level, error) {
	prefix, err := cleanPath(prefix, true)
	if err != nil {
		return Level{}, err
	}
	dir, err := w.workspace(threadID)
	if err != nil {
		return Level{}, err
	}
	lv := Level{Files: []Entry{}, Folders: []Folder{}}
	byName := map[string]int{} // index in lv.Folders
	err = tools.WalkFiles(ctx, dir, prefix, func(f tools.File) error {
		rel := f.Path
		if prefix != "" {
			rel = strings.TrimPrefix(f.Path, prefix+"/")
		}
		name, _, deeper := strings.Cut(rel, "/")
		if !deeper {
			lv.Files = append(lv.Files, Entry{Path: f.Path, Size: f.Size, Modified: f.Modified})
			return nil
		}
		i, ok := byName[name]
		if !ok {
			i = len(lv.Folders)
			byName[name] = i
			lv.Folders = append(lv.Folders, Folder{Path: path.Join(prefix, name)})
		}
		d := &lv.Folders[i]
		d.Files++
		d.Size += f.Size
		if f.Modified.After(d.Modified) {
			d.Modified = f.Modified
		}
		return nil
	})
	switch {
	case prefix == "" && errors.Is(err, fs.ErrNotExist):
		return lv, nil // no run or upload made the workspace yet
	case errors.Is(err, fs.ErrNotExist):
		return Level{}, ErrNotFound
	case err != nil:
		return Level{}, err
	}
	slices.SortFunc(lv.Folders, func(a, b Folder) int { return strings.Compare(a.Path, b.Path) })
	slices.SortFunc(lv.Files, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	if len(lv.Folders) > MaxListed {
		lv.Folders, lv.Cut = lv.Folders[:MaxListed], true
	}
	if n := MaxListed - len(lv.Folders); len(lv.Files) > n {
		lv.Files, lv.Cut = lv.Files[:n], true
	}
	return lv, nil
}
