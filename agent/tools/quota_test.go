package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestQuotaWalksSeldom: a run of growing writes into one workspace walks
// it once, not once per write (a walk per write made 1,000 subagents'
// writes quadratic), and a write past the limit is still refused on a
// fresh walk, even when the workspace grew behind the tools' back.
func TestQuotaWalksSeldom(t *testing.T) {
	ws := t.TempDir()
	set := NewSet(WorkspaceTools(SandboxConfig{Limits: SandboxLimits{WorkspaceMB: 1}})...)
	write, _ := set.Get(WriteFile)
	run := func(path, content string) error {
		_, err := write.Run(context.Background(), Env{Workspace: ws}, argsJSON(t, map[string]any{"path": path, "content": content}))
		return err
	}
	before := measured.walks.Load()
	for i := range 200 {
		if err := run(fmt.Sprintf("notes/%d.txt", i), "a note"); err != nil {
			t.Fatal(err)
		}
	}
	if n := measured.walks.Load() - before; n > 2 {
		t.Errorf("200 small writes walked the workspace %d times, want at most 2", n)
	}
	// The writes accepted since the walk count: the second 600 KB is
	// refused, on a fresh walk.
	if err := run("a.txt", strings.Repeat("a", 600_000)); err != nil {
		t.Fatalf("a write within the limit: %v", err)
	}
	walks := measured.walks.Load()
	if err := run("b.txt", strings.Repeat("b", 600_000)); err == nil || !strings.Contains(err.Error(), "would take the workspace to") {
		t.Errorf("a write past the limit: %v, want a refusal", err)
	}
	if measured.walks.Load() == walks {
		t.Error("the refusal was not decided on a fresh walk")
	}
	if _, err := os.Stat(filepath.Join(ws, "b.txt")); err == nil {
		t.Error("the refused write was written")
	}
}

// TestApart: a size just over a limit reads over it.
func TestApart(t *testing.T) {
	for _, c := range []struct {
		a, b         int64
		want1, want2 string
	}{
		{15 * mib, 10 * mib, "15.0 MiB", "10.0 MiB"},
		{10*mib + 20_000, 10 * mib, "10.02 MiB", "10.00 MiB"},
		{10*mib + 4096, 10 * mib, "10.004 MiB", "10.000 MiB"},
		{10*mib + 1, 10 * mib, "10485761 bytes", "10485760 bytes"},
	} {
		if x, y := apart(c.a, c.b); x != c.want1 || y != c.want2 {
			t.Errorf("apart(%d, %d) = %s, %s; want %s, %s", c.a, c.b, x, y, c.want1, c.want2)
		}
	}
}
