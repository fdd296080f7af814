package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"herd/agent/tools"
	"herd/models"
)

// Which task wrote which file of a workspace (docs/DESIGN.md §4): every
// tool call that changed files commits one workspace.changed event, so
// the Files panel, the cards and every instance learn it from the thread
// log, live and after a reload alike.

// MaxWatchedFiles is how many files a workspace may hold for a command
// or an MCP call to be watched: a snapshot costs a stat per file, taken
// before and after the call (BenchmarkWorkspaceSnapshot, 2 busy cores:
// 3 to 4 ms for 1,000 files, 17 to 22 ms for 5,000, docs/PERFORMANCE.md).
// Past it the call's changes are not recorded and the run logs so once;
// the walk stops at the cap.
// write_file and str_replace name their file and are always recorded.
const MaxWatchedFiles = 5_000

// FileChange is one file a tool call or an upload changed.
type FileChange struct {
	Path string `json:"path"` // slash-separated, from the workspace's root
	Size int64  `json:"size"`
	// TaskID is the task whose subagent's call changed it; "" for the
	// lead's own calls and uploads.
	TaskID  string `json:"task_id,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
	// Uploaded marks a file a user put in through the files API.
	Uploaded bool `json:"uploaded,omitempty"`
}

// WorkspaceChanged is workspace.changed: what one tool call of run RunID
// (or one upload, without a run) changed in the thread's workspace.
type WorkspaceChanged struct {
	RunID   string       `json:"run_id,omitempty" kind:"string"`
	Changes []FileChange `json:"changes" kind:"changes"`
}

// EventType names the payload's persisted type.
func (WorkspaceChanged) EventType() string { return eventWorkspaceChanged }

// Validate checks the payload against its fields' kinds.
func (e WorkspaceChanged) Validate() error { return validate(e) }

// Frame of a workspace change is its payload, as the "workspace" frame.
func (e WorkspaceChanged) Frame(FrameOptions) (string, any) { return frameWorkspace, e }

// checkChanges is the "changes" kind: at least one, each a clean
// relative path of a size ≥ 0, an upload of no task.
func checkChanges(cs []FileChange) error {
	if len(cs) == 0 {
		return errors.New("want at least one change")
	}
	for i, c := range cs {
		switch {
		case !fs.ValidPath(c.Path) || c.Path == ".":
			return fmt.Errorf("change %d: want a relative slash-separated path, got %q", i, c.Path)
		case c.Size < 0:
			return fmt.Errorf("change %d: want a size ≥ 0, got %d", i, c.Size)
		case c.Uploaded && (c.TaskID != "" || c.Deleted):
			return fmt.Errorf("change %d: an upload is of no task and deletes nothing", i)
		}
	}
	return nil
}

// EventLog is what FileWriters reads: a thread's events of some types
// (models.Store).
type EventLog interface {
	Events(ctx context.Context, threadID string, f models.EventFilter) ([]models.RunEvent, bool, error)
}

// FileWriters is the task that last wrote each file of thread threadID's
// workspace still there ("" for the lead and uploads), from its
// workspace.changed events in one query: the Files list's task_id.
func FileWriters(ctx context.Context, log EventLog, threadID string) (map[string]string, error) {
	es, _, err := log.Events(ctx, threadID, models.EventFilter{EventTypes: []string{eventWorkspaceChanged}})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for i := range es {
		ev, err := PayloadOf(&es[i])
		if err != nil {
			continue
		}
		for _, c := range ev.(WorkspaceChanged).Changes {
			if c.Deleted {
				delete(out, c.Path)
			} else {
				out[c.Path] = c.TaskID
			}
		}
	}
	return out, nil
}

// Uploaded is the event of files a user uploaded to thread threadID's
// workspace, committed before it returns, so every page and instance
// sees them (docs/DESIGN.md §7).
func (rt *Runtime) Uploaded(ctx context.Context, threadID string, files []FileChange) error {
	cs := make([]FileChange, len(files))
	for i, f := range files {
		cs[i] = FileChange{Path: f.Path, Size: f.Size, Uploaded: true}
	}
	rec, err := eventRecord(threadID, "", WorkspaceChanged{Changes: cs})
	if err != nil {
		return err
	}
	return rt.journal.Write(ctx, rec)
}

// Deleted is the event of a file a user deleted from thread threadID's
// workspace through the files API, of no task and no run, committed
// before it returns as Uploaded's is.
func (rt *Runtime) Deleted(ctx context.Context, threadID, path string) error {
	rec, err := eventRecord(threadID, "", WorkspaceChanged{Changes: []FileChange{{Path: path, Deleted: true}}})
	if err != nil {
		return err
	}
	return rt.journal.Write(ctx, rec)
}

// fileStat is what a snapshot keeps of a file: enough to see it changed.
type fileStat struct {
	size     int64
	modified int64 // Unix nanoseconds
}

// workspaceWatch sees what a run's tool calls change in its workspace.
// Calls run in parallel in one workspace, so a change is the first
// call's to see it: a command or MCP call compares the workspace after
// it with what the calls in flight last saw (seen), taken when the first
// of them began, and claims what differs; write_file and str_replace
// claim exactly their file, which the others leave to them while they
// run (exact). A change made meanwhile by another process (an upload
// through another instance) may be claimed by a command that was
// running then.
type workspaceWatch struct {
	log  *slog.Logger
	once sync.Once // the log line past MaxWatchedFiles

	mu       sync.Mutex
	watching int                 // commands and MCP calls in flight
	seen     map[string]fileStat // nil while none is, or past the cap
	exact    map[string]int      // files write_file and str_replace are writing
}

func newWorkspaceWatch(log *slog.Logger) *workspaceWatch {
	return &workspaceWatch{log: log, exact: map[string]int{}}
}

// exactPath is the file a call of t changes, cleaned as a walk names
// it; ok is false for a tool that names none.
func exactPath(t tools.Tool, args json.RawMessage) (p string, ok bool) {
	if n := t.Spec().Name; n != tools.WriteFile && n != tools.StrReplace {
		return "", false
	}
	var a struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(args, &a) != nil {
		return "", true
	}
	p = path.Clean(a.Path) // a backslash is a name's own on Linux
	if !fs.ValidPath(p) || p == "." {
		return "", true // the tool refuses it and writes nothing
	}
	return p, true
}

// begin is called before a call of t in workspace dir; the function it
// returns, after it, returns what the call changed. A tool that only
// reads (tools.IsRepeatable) is not watched.
func (w *workspaceWatch) begin(ctx context.Context, dir string, t tools.Tool, args json.RawMessage) (end func() []FileChange) {
	if tools.IsRepeatable(t) {
		return func() []FileChange { return nil }
	}
	if p, ok := exactPath(t, args); ok {
		return w.beginExact(dir, p)
	}
	w.mu.Lock()
	if w.watching++; w.watching == 1 {
		// Under the lock, so a call that ends meanwhile has it to compare.
		w.seen = w.snapshot(ctx, dir)
	}
	w.mu.Unlock()
	return func() []FileChange {
		after := w.snapshot(ctx, dir)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.watching--
		before := w.seen
		if w.watching == 0 {
			w.seen = nil
		} else {
			w.seen = after
		}
		if before == nil || after == nil {
			return nil
		}
		return w.diff(before, after)
	}
}

// diff is what changed from before to after, except the files an exact
// call is writing: theirs to claim.
func (w *workspaceWatch) diff(before, after map[string]fileStat) []FileChange {
	var out []FileChange
	for p, a := range after {
		if b, ok := before[p]; (!ok || b != a) && w.exact[p] == 0 {
			out = append(out, FileChange{Path: p, Size: a.size})
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok && w.exact[p] == 0 {
			out = append(out, FileChange{Path: p, Deleted: true})
		}
	}
	slices.SortFunc(out, func(a, b FileChange) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// beginExact watches a call that writes file p alone.
func (w *workspaceWatch) beginExact(dir, p string) func() []FileChange {
	if p == "" {
		return func() []FileChange { return nil }
	}
	before, had := statFile(dir, p)
	w.mu.Lock()
	w.exact[p]++
	w.mu.Unlock()
	return func() []FileChange {
		after, has := statFile(dir, p)
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.exact[p]--; w.exact[p] == 0 {
			delete(w.exact, p)
		}
		if w.seen != nil {
			// The commands in flight saw it as it is now.
			if has {
				w.seen[p] = after
			} else {
				delete(w.seen, p)
			}
		}
		if !has || (had && before == after) {
			return nil
		}
		return []FileChange{{Path: p, Size: after.size}}
	}
}

// statFile looks at file p of workspace dir without following a link
// out; ok is false unless it is a regular file.
func statFile(dir, p string) (fileStat, bool) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fileStat{}, false
	}
	defer root.Close()
	info, err := root.Lstat(p)
	if err != nil || !info.Mode().IsRegular() {
		return fileStat{}, false
	}
	return fileStat{size: info.Size(), modified: info.ModTime().UnixNano()}, true
}

// errTooMany stops a snapshot past MaxWatchedFiles.
var errTooMany = errors.New("agent: workspace too large to watch")

// snapshot is every regular file of workspace dir with its size and
// modification time; nil past MaxWatchedFiles (logged once) or when the
// walk fails.
func (w *workspaceWatch) snapshot(ctx context.Context, dir string) map[string]fileStat {
	snap := map[string]fileStat{}
	err := tools.WalkFiles(context.WithoutCancel(ctx), dir, "", func(f tools.File) error {
		if len(snap) == MaxWatchedFiles {
			return errTooMany
		}
		snap[f.Path] = fileStat{size: f.Size, modified: f.Modified.UnixNano()}
		return nil
	})
	switch {
	case errors.Is(err, errTooMany):
		w.once.Do(func() {
			w.log.Info("workspace over the watched size: commands' file changes are not recorded", "files_over", MaxWatchedFiles)
		})
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return snap
	case err != nil:
		w.log.Warn("workspace snapshot", "err", err)
		return nil
	}
	return snap
}
