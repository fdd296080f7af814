package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"herd/agent/tools"
	"herd/models"
)

func call(id, name string, args map[string]string) ToolCall {
	b, _ := json.Marshal(args)
	return ToolCall{ID: id, Name: name, Args: b}
}

func hostBash(t testing.TB) tools.Tool {
	t.Helper()
	bash, err := tools.NewBash(tools.SandboxConfig{Mode: tools.SandboxHost, AllowHostBash: true, BashTimeoutSeconds: 10, OutputLimitBytes: 2000})
	if err != nil {
		t.Fatal(err)
	}
	return bash
}

// workspaceEvents returns the thread's workspace.changed events, their
// task column beside their payload.
func (h *harness) workspaceEvents() (taskIDs []string, payloads []WorkspaceChanged) {
	h.t.Helper()
	es, _, err := h.store.Events(context.Background(), h.thread, models.EventFilter{EventTypes: []string{eventWorkspaceChanged}})
	if err != nil {
		h.t.Fatal(err)
	}
	for i := range es {
		ev, err := PayloadOf(&es[i])
		if err != nil {
			h.t.Fatal(err)
		}
		if es[i].Category != categoryWorkspace {
			h.t.Errorf("category %q", es[i].Category)
		}
		taskIDs = append(taskIDs, es[i].TaskID)
		payloads = append(payloads, ev.(WorkspaceChanged))
	}
	return taskIDs, payloads
}

// TestWorkspaceChanges: each tool call that changes the workspace
// commits one workspace.changed with what it changed and whose it was
// (the lead's bash, a subagent's write_file, bash with a deletion,
// str_replace); a read, a command that changes nothing and a write that
// fails commit none (docs/DESIGN.md §4).
func TestWorkspaceChanges(t *testing.T) {
	sub := llmFunc(func(_ context.Context, req Request, _ func(string)) (Response, error) {
		switch usedTurns(req) {
		case 0:
			return reply("", nil, call("w", tools.WriteFile, map[string]string{"path": "./notes//a.md", "content": "hello"})), nil
		case 1:
			return reply("", nil,
				call("b", tools.Bash, map[string]string{"command": "rm old.txt && mkdir -p out && printf abc > out/b.txt"}),
				call("l", tools.Ls, map[string]string{"path": "."})), nil
		case 2:
			return reply("", nil,
				call("n", tools.Bash, map[string]string{"command": "cat notes/a.md"}),
				call("f", tools.WriteFile, map[string]string{"path": "../escape.txt", "content": "x"})), nil
		case 3:
			return reply("", nil, call("s", tools.StrReplace, map[string]string{"path": "notes/a.md", "old_str": "hello", "new_str": "hello world"})), nil
		}
		return reply("done", nil), nil
	})
	lead := llmFunc(func(_ context.Context, req Request, _ func(string)) (Response, error) {
		if !isLead(req) {
			return sub(context.Background(), req, nil)
		}
		switch usedTurns(req) {
		case 0:
			return reply("", nil, call("lb", tools.Bash, map[string]string{"command": "printf old > old.txt"})), nil
		case 1:
			return reply("", nil, taskCall("t1", "write", SubagentGeneral)), nil
		}
		return reply("ok", nil), nil
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("m", lead)}, tools: append(tools.Workspace(), hostBash(t)), admin: true})
	st := h.run("go")
	_ = h.writer.Flush(context.Background())

	taskIDs, got := h.workspaceEvents()
	want := []WorkspaceChanged{
		{RunID: st.RunID, Changes: []FileChange{{Path: "old.txt", Size: 3}}},
		{RunID: st.RunID, Changes: []FileChange{{Path: "notes/a.md", Size: 5, TaskID: "t1"}}},
		{RunID: st.RunID, Changes: []FileChange{{Path: "old.txt", TaskID: "t1", Deleted: true}, {Path: "out/b.txt", Size: 3, TaskID: "t1"}}},
		{RunID: st.RunID, Changes: []FileChange{{Path: "notes/a.md", Size: 11, TaskID: "t1"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events:\n got %+v\nwant %+v", got, want)
	}
	if wantIDs := []string{"", "t1", "t1", "t1"}; !reflect.DeepEqual(taskIDs, wantIDs) {
		t.Errorf("task_id columns = %q, want %q", taskIDs, wantIDs)
	}
	if w, _ := FileWriters(context.Background(), h.store, h.thread); !reflect.DeepEqual(w, map[string]string{"notes/a.md": "t1", "out/b.txt": "t1"}) {
		t.Errorf("FileWriters = %v, want notes/a.md and out/b.txt of t1", w)
	}
}

// TestWorkspaceChangesOfParallelTasks: a file write_file writes is its
// task's even while another task's command runs in the same workspace
// and sees it appear; the command's own file is the command's.
func TestWorkspaceChangesOfParallelTasks(t *testing.T) {
	lead := llmFunc(func(_ context.Context, req Request, _ func(string)) (Response, error) {
		if !isLead(req) {
			if usedTurns(req) > 0 {
				return reply("done", nil), nil
			}
			if lastHuman(req) == "do writer" {
				return reply("", nil, call("w", tools.WriteFile, map[string]string{"path": "shared/a.txt", "content": "aaaa"})), nil
			}
			return reply("", nil, call("b", tools.Bash, map[string]string{"command": "sleep 0.3; mkdir -p shared; printf b > shared/b.txt"})), nil
		}
		if usedTurns(req) == 0 {
			return reply("", nil, taskCall("tb", "commander", SubagentGeneral), taskCall("tw", "writer", SubagentGeneral)), nil
		}
		return reply("ok", nil), nil
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("m", lead)}, tools: append(tools.Workspace(), hostBash(t)), admin: true})
	h.run("go")
	_ = h.writer.Flush(context.Background())
	_, got := h.workspaceEvents()
	owners := map[string][]string{}
	for _, ev := range got {
		for _, c := range ev.Changes {
			owners[c.Path] = append(owners[c.Path], c.TaskID)
		}
	}
	if want := map[string][]string{"shared/a.txt": {"tw"}, "shared/b.txt": {"tb"}}; !reflect.DeepEqual(owners, want) {
		t.Errorf("writers = %v, want %v", owners, want)
	}
}

// TestWorkspaceWatchFirstObserver: of two commands in flight, the one
// that ends first claims what either changed: the rule DESIGN.md §4
// states, and the cap past MaxWatchedFiles records nothing.
func TestWorkspaceWatchFirstObserver(t *testing.T) {
	dir := t.TempDir()
	w := newWorkspaceWatch(slog.New(slog.DiscardHandler))
	cmd := fakeTool{name: "cmd"}
	ctx := context.Background()
	endA := w.begin(ctx, dir, cmd, nil)
	endB := w.begin(ctx, dir, cmd, nil)
	if err := os.WriteFile(filepath.Join(dir, "x"), []byte("by A"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := endB(), []FileChange{{Path: "x", Size: 4}}; !reflect.DeepEqual(got, want) {
		t.Errorf("B, ending first, claimed %v, want %v", got, want)
	}
	if got := endA(); got != nil {
		t.Errorf("A claimed %v again", got)
	}
	if got := w.begin(ctx, dir, cmd, nil)(); got != nil {
		t.Errorf("a command that changed nothing: %v", got)
	}
}

type fakeTool struct{ name string }

func (f fakeTool) Spec() tools.Spec { return tools.Spec{Name: f.name} }
func (f fakeTool) Run(context.Context, tools.Env, json.RawMessage) (string, error) {
	return "", nil
}

// BenchmarkWorkspaceSnapshot measures what a watched command adds to its
// call, twice (before and after): a snapshot of a workspace of n files
// in 100 folders; past MaxWatchedFiles it gives up at that cost.
func BenchmarkWorkspaceSnapshot(b *testing.B) {
	for _, n := range []int{1_000, MaxWatchedFiles, 10_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			dir := b.TempDir()
			for i := range n {
				sub := filepath.Join(dir, fmt.Sprintf("d%02d", i%100))
				_ = os.MkdirAll(sub, 0o700)
				if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d.txt", i)), []byte("x"), 0o600); err != nil {
					b.Fatal(err)
				}
			}
			w := newWorkspaceWatch(slog.New(slog.DiscardHandler))
			b.ResetTimer()
			for b.Loop() {
				snap := w.snapshot(context.Background(), dir)
				if n > MaxWatchedFiles && snap != nil || n <= MaxWatchedFiles && len(snap) != n {
					b.Fatalf("snapshot of %d files has %d", n, len(snap))
				}
			}
		})
	}
}
