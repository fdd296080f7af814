package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"herd/internal/pgtest"
)

// TestClusterFileDeleteAcrossInstances: on two instances sharing
// workspaces.dir, B lists a folder one level deep and previews a file
// uploaded through A; a delete through A reaches a page on B as a
// committed workspace frame, and B no longer lists the file or its
// emptied folder (docs/API.md "Files").
func TestClusterFileDeleteAcrossInstances(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	env := clusterEnv(pgtest.DSN(t), "HERD_WORKSPACES_DIR="+shared)
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca, cb := a.signIn(), b.signIn()
	var th struct{ ID string }
	ca.call("POST", "/api/threads", map[string]string{"title": "delete across"}, &th)
	ca.uploadFiles(th.ID, filePart{"notes.md", []byte("# Notes\n\n<script>x</script>\n")})

	type level struct {
		Files   []struct{ Path string }
		Folders []struct {
			Path  string
			Files int
			Size  int64
		}
	}
	var root level
	cb.call("GET", "/api/threads/"+th.ID+"/files?depth=1", nil, &root)
	if len(root.Files) != 0 || len(root.Folders) != 1 || root.Folders[0].Path != "uploads" || root.Folders[0].Files != 1 || root.Folders[0].Size != 28 {
		t.Fatalf("B lists the root as %+v, want the uploads folder with one file of 28 bytes", root)
	}
	resp := cb.raw("GET", "/threads/"+th.ID+"/preview/uploads/notes.md", "", nil)
	if body := string(readAll(t, resp)); resp.StatusCode != 200 || !strings.Contains(body, `data-kind="markdown"`) || !strings.Contains(body, "<h1>Notes</h1>") || strings.Contains(body, "<script>") {
		t.Errorf("B previews %d %.400s", resp.StatusCode, body)
	}

	conn := dialStream(t, b, cb, th.ID)
	resp = ca.raw("DELETE", "/api/threads/"+th.ID+"/files/uploads/notes.md", "", nil)
	if body := readAll(t, resp); resp.StatusCode != 204 {
		t.Fatalf("DELETE through A: %d %s", resp.StatusCode, body)
	}
	type change struct {
		Path    string `json:"path"`
		Deleted bool   `json:"deleted"`
	}
	// B's stream replays the upload's frame, then the delete's.
	for deleted := false; !deleted; {
		f := readFrame(t, conn, b)
		if f.Type != "workspace" {
			continue
		}
		var d struct{ Changes []change }
		if err := json.Unmarshal(f.Data, &d); err != nil {
			t.Fatal(err)
		}
		if len(d.Changes) == 1 && d.Changes[0].Deleted {
			deleted = true
			if f.Seq == nil || d.Changes[0].Path != "uploads/notes.md" {
				t.Errorf("B framed the delete as %+v (seq %v)", d.Changes, f.Seq)
			}
		}
	}
	var after level
	cb.call("GET", "/api/threads/"+th.ID+"/files?depth=1", nil, &after)
	if len(after.Files) != 0 || len(after.Folders) != 0 {
		t.Errorf("B lists %+v after the delete, want nothing", after)
	}
	stopHerd(t, a)
	stopHerd(t, b)
}
