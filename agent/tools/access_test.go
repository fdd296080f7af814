package tools

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestOpenRegular: the files API's open refuses what read_file refuses,
// with sentinels the API maps: every escape of TestWorkspaceEscapes, a
// FIFO (at once), a directory; and opens what read_file opens.
func TestOpenRegular(t *testing.T) {
	checkToolLeaks(t)
	f := newEscapeFixture(t)
	if err := syscall.Mkfifo(filepath.Join(f.ws, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(f.ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, c := range []struct {
		name string
		want error
	}{
		{"../outside/secret.txt", ErrOutsideWorkspace},
		{"leak", ErrOutsideWorkspace},
		{"relleak", ErrOutsideWorkspace},
		{"outdir/secret.txt", ErrOutsideWorkspace},
		{"sub/up/secret.txt", ErrOutsideWorkspace},
		{"absin", ErrOutsideWorkspace},
		{"pipe", ErrFileType},
		{"sub", ErrFileType},
		{"missing.txt", fs.ErrNotExist},
		{"in.txt", nil},
		{"inlink", nil},
	} {
		file, err := OpenRegular(root, c.name)
		if !errors.Is(err, c.want) || (c.want == nil) != (file != nil) {
			t.Errorf("OpenRegular(%q) = %v, %v; want %v", c.name, file, err, c.want)
		}
		if file != nil {
			b, _ := io.ReadAll(file)
			file.Close()
			if string(b) != "inside\n" {
				t.Errorf("OpenRegular(%q) read %q", c.name, b)
			}
		}
	}
	if _, err := OpenDir(root, "outdir"); !errors.Is(err, ErrOutsideWorkspace) {
		t.Errorf("OpenDir(outdir) = %v, want outside the workspace", err)
	}
	if _, err := OpenDir(root, "in.txt"); !errors.Is(err, ErrFileType) {
		t.Errorf("OpenDir(in.txt) = %v, want ErrFileType", err)
	}
}

// TestWalkFiles: a walk yields the regular files alone, sorted, never
// through a link; a folder through a link or with ".." is refused; and a
// file swapped for a link during its visit opens nothing.
func TestWalkFiles(t *testing.T) {
	f := newEscapeFixture(t)
	if err := syscall.Mkfifo(filepath.Join(f.ws, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(f.ws, "a.txt"), "a\n")
	writeTestFile(t, filepath.Join(f.ws, "b", "c.txt"), "c\n")
	walk := func(folder string) ([]string, error) {
		var got []string
		err := WalkFiles(context.Background(), f.ws, folder, func(file File) error {
			got = append(got, file.Path)
			return nil
		})
		return got, err
	}
	got, err := walk("")
	if want := []string{"a.txt", "b/c.txt", "in.txt", "sub/inner.txt"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("walk = %q, %v; want %q", got, err, want)
	}
	if got, err := walk("sub/"); err == nil || got != nil {
		t.Errorf("walk(sub/) = %q, %v; want a refusal (a folder is clean)", got, err)
	}
	if got, err := walk("sub"); err != nil || !slices.Equal(got, []string{"sub/inner.txt"}) {
		t.Errorf("walk(sub) = %q, %v", got, err)
	}
	for _, folder := range []string{"outdir", "sub/up", "in.txt", "missing"} {
		if _, err := walk(folder); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("walk(%q) = %v, want fs.ErrNotExist", folder, err)
		}
	}
	for _, folder := range []string{"..", "../outside", "sub/../..", "/etc", "sub//x"} {
		if _, err := walk(folder); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("walk(%q) = %v, want fs.ErrInvalid", folder, err)
		}
	}
	err = WalkFiles(context.Background(), f.ws, "", func(file File) error {
		if file.Path != "in.txt" {
			return nil
		}
		if err := os.Remove(filepath.Join(f.ws, "in.txt")); err != nil {
			return err
		}
		makeSymlink(t, filepath.Join(f.outside, "secret.txt"), filepath.Join(f.ws, "in.txt"))
		opened, err := file.Open()
		if !errors.Is(err, ErrFileType) {
			t.Errorf("opening a file swapped for a link out: %v, %v; want ErrFileType", opened, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRoomHoldsItsBytes: what an upload holds outside the workspace
// counts against its limits for the tools' writes and other uploads, is
// given back on Release, and counts as the workspace's once published.
func TestRoomHoldsItsBytes(t *testing.T) {
	ws := t.TempDir()
	limits := SandboxLimits{WorkspaceMB: 1}
	set := NewSet(WorkspaceTools(SandboxConfig{Limits: limits})...)
	write, _ := set.Get(WriteFile)
	writeFile := func(name string) error {
		_, err := write.Run(context.Background(), Env{Workspace: ws}, argsJSON(t, map[string]any{"path": name, "content": strings.Repeat("w", 400_000)}))
		return err
	}
	q := NewQuota(limits)
	room := q.Room(ws)
	if err := room.Take(context.Background(), 700_000, true); err != nil {
		t.Fatal(err)
	}
	if err := writeFile("a.txt"); err == nil {
		t.Error("a write that fits only without the upload's bytes was taken")
	}
	var le *LimitError
	if err := q.Room(ws).Take(context.Background(), 400_000, true); !errors.As(err, &le) || le.Limit != "sandbox.limits.workspace_mb" {
		t.Errorf("a second upload's bytes: %v, want a workspace_mb refusal", err)
	}
	room.Release()
	if err := writeFile("a.txt"); err != nil {
		t.Errorf("a write after the upload gave its room back: %v", err)
	}
	room = q.Room(ws)
	if err := room.Take(context.Background(), 500_000, true); err != nil {
		t.Fatal(err)
	}
	if err := room.Publish(func() error { return os.WriteFile(filepath.Join(ws, "up.bin"), make([]byte, 500_000), 0o644) }); err != nil {
		t.Fatal(err)
	}
	if err := writeFile("b.txt"); err == nil {
		t.Error("a write past what the published upload left was taken")
	}
}
