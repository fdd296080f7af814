package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
)

func TestRemoveWorkspaceStaysInsideTheRoot(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "workspaces")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	keep := filepath.Join(outside, "keep.txt")
	if err := os.WriteFile(keep, []byte("not the thread's"), 0o600); err != nil {
		t.Fatal(err)
	}
	rt := &Runtime{runEnv: runEnv{wsRoot: root}}

	// A workspace with files, a nested folder and a symlink out.
	id := uuid.NewString()
	ws, err := rt.workspace(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "notes", "deep"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "notes", "deep", "a.md"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "escape")); err != nil {
		t.Fatal(err)
	}
	// A workspace that a command replaced by a symlink to elsewhere.
	swapped := uuid.NewString()
	if err := os.Symlink(outside, filepath.Join(root, swapped)); err != nil {
		t.Fatal(err)
	}
	other := uuid.NewString()
	if _, err := rt.workspace(other); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, id string
		wantErr  bool
	}{
		{"a workspace with files", id, false},
		{"a workspace that is a symlink out", swapped, false},
		{"a workspace never created", uuid.NewString(), false},
		{"a path instead of an id", "../outside", true},
		{"the root itself", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := rt.RemoveWorkspace(c.id)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if c.id != "" && !c.wantErr {
				if _, err := os.Lstat(filepath.Join(root, c.id)); !os.IsNotExist(err) {
					t.Errorf("%s still exists (%v)", c.id, err)
				}
			}
		})
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("a file outside the workspace root was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, other)); err != nil {
		t.Errorf("another thread's workspace was removed: %v", err)
	}
}
