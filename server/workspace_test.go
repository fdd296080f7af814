package server

import (
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// workspaceFiles lists the files a thread's workspace holds, nil when the
// workspace does not exist.
func (a *testApp) workspaceFiles(threadID string) []string {
	a.t.Helper()
	var files []string
	err := filepath.WalkDir(filepath.Join(a.dir, "workspaces", threadID), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		a.t.Fatal(err)
	}
	return files
}

// writeFiles runs a message whose subagents write notes into the thread's
// workspace, and checks that they did.
func (u *user) writeFiles(threadID string) {
	u.a.t.Helper()
	u.startRun(threadID, "Compare:\n- alpha\n- beta")
	u.a.waitIdle(threadID)
	if len(u.a.workspaceFiles(threadID)) == 0 {
		u.a.t.Fatalf("the run wrote no files into thread %s's workspace", threadID)
	}
}

func TestDeletingAThreadRemovesItsWorkspace(t *testing.T) {
	purged := make(chan string, 8)
	a := newApp(t, withServer(func(o *Options) {
		o.UndoWindow = 20 * time.Millisecond
		o.OnThreadPurged = func(id string) { purged <- id }
	}))
	u := a.newUser("ann@example.com", false)
	for _, c := range []struct {
		name   string
		delete func(id string)
	}{
		{"API", func(id string) { u.mustJSON("DELETE", "/api/threads/"+id, nil, http.StatusNoContent, nil) }},
		{"page form", func(id string) {
			if r := u.do("POST", "/threads/"+id+"/delete", url.Values{}); r.status != http.StatusSeeOther {
				t.Fatalf("delete form: %d %s", r.status, r.body)
			}
		}},
		{"during a run", func(id string) {
			u.startRun(id, "Compare:\n- gamma\n- delta")
			u.mustJSON("DELETE", "/api/threads/"+id, nil, http.StatusNoContent, nil)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			th, kept := u.newThread("gone"), u.newThread("kept")
			u.writeFiles(th)
			u.writeFiles(kept)
			c.delete(th)
			a.waitIdle(th)
			select {
			case id := <-purged:
				if id != th {
					t.Fatalf("purged %s, want %s", id, th)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the deleted thread was not removed after its undo window")
			}
			if files := a.workspaceFiles(th); files != nil {
				t.Errorf("the deleted thread's workspace still holds %v", files)
			}
			if _, err := os.Stat(filepath.Join(a.dir, "workspaces", th)); !os.IsNotExist(err) {
				t.Errorf("the deleted thread's workspace directory is still there (%v)", err)
			}
			if len(a.workspaceFiles(kept)) == 0 {
				t.Error("another thread's workspace was emptied")
			}
		})
	}
}

func TestDeletingAUserRemovesTheirWorkspaces(t *testing.T) {
	a := newApp(t)
	admin := a.newUser("root@example.com", true)
	bob := a.newUser("bob@example.com", false)
	other := a.newUser("cy@example.com", false)
	one, two := bob.newThread("one"), bob.newThread("two")
	bob.writeFiles(one)
	bob.writeFiles(two)
	kept := other.newThread("kept")
	other.writeFiles(kept)

	admin.mustJSON("DELETE", "/api/admin/users/"+bob.id, nil, http.StatusNoContent, nil)
	for _, th := range []string{one, two} {
		if _, err := os.Stat(filepath.Join(a.dir, "workspaces", th)); !os.IsNotExist(err) {
			t.Errorf("deleted user's workspace %s is still there (%v)", th, err)
		}
	}
	if len(a.workspaceFiles(kept)) == 0 {
		t.Error("another user's workspace was emptied")
	}
}
