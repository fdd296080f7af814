package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd/agent"
	"herd/server/files"
)

// writeTree writes files (path → content) into thread th's workspace,
// as an agent's tools would, each with its own modification time.
func writeTree(t *testing.T, a *testApp, th string, tree map[string]string, modified map[string]time.Time) {
	t.Helper()
	for p, content := range tree {
		full := filepath.Join(a.workspace(th), filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if m, ok := modified[p]; ok {
			if err := os.Chtimes(full, m, m); err != nil {
				t.Fatal(err)
			}
		}
	}
}

type levelJSON struct {
	Files     []files.Entry  `json:"files"`
	Folders   []files.Folder `json:"folders"`
	Truncated bool           `json:"truncated"`
}

// TestFilesListDepth: ?depth=1 lists a folder's direct children, folders
// first with the count, bytes and newest change of every file below
// them; a folder's path lists it in turn; without depth the list is as
// it was, flat and without folders; a bad depth is 400, a file or a link
// as prefix 404.
func TestFilesListDepth(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("tree")
	u.upload(th, upload{name: "brief.txt", data: []byte("read me")})
	old, newer := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(2026, 6, 7, 8, 9, 10, 0, time.UTC)
	writeTree(t, a, th, map[string]string{
		"zeta.txt":             "z",
		"alpha.md":             "aa",
		"notes/b/plan.md":      "12345",
		"notes/a/deep/x.txt":   "123",
		"notes/index.md":       "1",
		"notes/a/deep/y/z.txt": "1234567",
	}, map[string]time.Time{"notes/b/plan.md": old, "notes/a/deep/x.txt": newer, "notes/index.md": old, "notes/a/deep/y/z.txt": old})
	ws := a.workspace(th)
	if err := os.Symlink("notes", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "empty/inner"), 0o755); err != nil {
		t.Fatal(err)
	}
	base := "/api/threads/" + th + "/files"

	level := func(prefix string) levelJSON {
		t.Helper()
		var lv levelJSON
		u.mustJSON("GET", base+"?depth=1&prefix="+prefix, nil, http.StatusOK, &lv)
		return lv
	}
	folders := func(lv levelJSON) []files.Folder {
		for i := range lv.Folders {
			lv.Folders[i].Modified = lv.Folders[i].Modified.UTC()
		}
		return lv.Folders
	}
	paths := func(es []files.Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Path)
		}
		return out
	}

	root := level("")
	if got, want := paths(root.Files), []string{"alpha.md", "zeta.txt"}; !slices.Equal(got, want) || root.Truncated {
		t.Errorf("the root's files: %v (truncated %v), want %v", got, root.Truncated, want)
	}
	rootFolders := folders(root)
	if len(rootFolders) != 2 || rootFolders[0].Path != "notes" || rootFolders[1].Path != "uploads" {
		t.Fatalf("the root's folders: %+v, want notes then uploads (no link, no folder without files)", rootFolders)
	}
	if n := rootFolders[0]; n.Files != 4 || n.Size != 16 || !n.Modified.Equal(newer) {
		t.Errorf("notes: %+v, want 4 files, 16 bytes, modified %v", n, newer)
	}
	if up := rootFolders[1]; up.Files != 1 || up.Size != 7 {
		t.Errorf("uploads: %+v, want 1 file of 7 bytes", up)
	}

	for _, prefix := range []string{"notes", "notes/"} {
		lv := level(prefix)
		fs := folders(lv)
		if got, want := paths(lv.Files), []string{"notes/index.md"}; !slices.Equal(got, want) {
			t.Errorf("%s: files %v, want %v", prefix, got, want)
		}
		if len(fs) != 2 || fs[0].Path != "notes/a" || fs[1].Path != "notes/b" ||
			fs[0].Files != 2 || fs[0].Size != 10 || !fs[0].Modified.Equal(newer) || fs[1].Files != 1 || !fs[1].Modified.Equal(old) {
			t.Errorf("%s: folders %+v", prefix, fs)
		}
	}
	// A folder's path is its own prefix, down to the leaves.
	if lv := level("notes/a/deep"); !slices.Equal(paths(lv.Files), []string{"notes/a/deep/x.txt"}) || len(lv.Folders) != 1 || lv.Folders[0].Path != "notes/a/deep/y" {
		t.Errorf("notes/a/deep: %+v", lv)
	}
	if lv := level("notes/a/deep/y"); len(lv.Folders) != 0 || len(lv.Files) != 1 {
		t.Errorf("a leaf folder: %+v", lv)
	}

	// Without depth: as before, flat, no folders key.
	r := u.do("GET", base+"?prefix=notes", nil)
	var flat map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &flat); err != nil || r.status != 200 {
		t.Fatalf("flat list: %d %s", r.status, r.body)
	}
	if _, ok := flat["folders"]; ok {
		t.Errorf("a flat list has folders: %s", r.body)
	}
	var fl listedFiles
	_ = json.Unmarshal(r.body, &fl)
	if len(fl.Files) != 4 {
		t.Errorf("the flat list of notes holds %d files, want 4", len(fl.Files))
	}

	for _, c := range []struct {
		name, query string
		status      int
		code        string
	}{
		{"depth 2", "?depth=2", 400, "bad_request"},
		{"depth word", "?depth=all&prefix=notes", 400, "bad_request"},
		{"depth 0", "?depth=0", 400, "bad_request"},
		{"a file as prefix", "?depth=1&prefix=zeta.txt", 404, "not_found"},
		{"a link as prefix", "?depth=1&prefix=link", 404, "not_found"},
		{"missing prefix", "?depth=1&prefix=nope", 404, "not_found"},
		{"prefix with ..", "?depth=1&prefix=notes/../..", 400, "bad_request"},
	} {
		r := u.do("GET", base+c.query, nil)
		if r.status != c.status || r.errorCode() != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.body, c.status, c.code)
		}
		if c.status == 400 && strings.HasPrefix(c.name, "depth") && !strings.Contains(string(r.body), "depth") {
			t.Errorf("%s: the error does not name depth: %s", c.name, r.body)
		}
	}
}

// TestFilesDelete: DELETE removes one regular file and the folders it
// leaves empty, up to the workspace (which stays), records a
// workspace.changed of no task that a watching page gets as a frame, and
// the list no longer has it; a folder is 400, a missing file, a link or
// a FIFO 404 and a link out 403, each leaving everything as it was.
func TestFilesDelete(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("delete")
	u.upload(th, upload{name: "only.txt", data: []byte("x")})
	writeTree(t, a, th, map[string]string{"a/b/c/deep.txt": "d", "a/keep.txt": "k"}, nil)
	ws := a.workspace(th)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("S"), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"inside.txt": "a/keep.txt", "out": outside, "alink": "a"} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := "/api/threads/" + th + "/files/"
	conn := u.watch(th)

	refusals := []struct {
		name, path string
		status     int
		code       string
	}{
		{"a folder", "a/b", 400, "bad_request"},
		{"missing", "a/nope.txt", 404, "not_found"},
		{"a link to a file", "inside.txt", 404, "not_found"},
		{"a link to a folder", "alink", 404, "not_found"},
		{"a FIFO", "pipe", 404, "not_found"},
		{"through a link out", "out/secret.txt", 403, "outside_workspace"},
		{"escaped ..", "a/%2e%2e/%2e%2e/x", 400, "bad_request"},
	}
	before := tree(t, ws)
	for _, c := range refusals {
		r := u.do("DELETE", base+c.path, nil)
		if r.status != c.status || r.errorCode() != c.code {
			t.Errorf("DELETE %s (%s): %d %s, want %d %s", c.path, c.name, r.status, r.body, c.status, c.code)
		}
	}
	if after := tree(t, ws); !slices.Equal(after, before) {
		t.Errorf("refused deletes changed the workspace:\n%q\nwant\n%q", after, before)
	}
	if r := u.do("DELETE", base+"a/b", nil); !strings.Contains(string(r.body), "only files can be deleted") {
		t.Errorf("a folder's refusal says %s", r.body)
	}
	if _, err := os.Stat(filepath.Join(outside, "secret.txt")); err != nil {
		t.Errorf("the file outside: %v", err)
	}

	for _, p := range []string{"a/b/c/deep.txt", "uploads/only.txt"} {
		if r := u.do("DELETE", base+p, nil); r.status != http.StatusNoContent {
			t.Fatalf("DELETE %s: %d %s", p, r.status, r.body)
		}
		// The stream replays the upload's frame first: the next frame
		// that deletes is this delete's.
		var d agent.WorkspaceChanged
		for !slices.ContainsFunc(d.Changes, func(c agent.FileChange) bool { return c.Deleted }) {
			f, err := readFrame(conn, 10*time.Second)
			if err != nil {
				t.Fatalf("no workspace frame for the delete of %s: %v", p, err)
			}
			if f.Type != "workspace" {
				continue
			}
			if f.Seq == nil {
				t.Errorf("a workspace frame without its seq: it was not committed")
			}
			d = agent.WorkspaceChanged{}
			if err := json.Unmarshal(f.Data, &d); err != nil {
				t.Fatal(err)
			}
		}
		if len(d.Changes) != 1 || d.Changes[0] != (agent.FileChange{Path: p, Deleted: true}) {
			t.Errorf("the delete of %s framed as %+v", p, d.Changes)
		}
	}
	want := []string{"a/", "a/keep.txt", "alink", "inside.txt", "out", "pipe"}
	if got := tree(t, ws); !slices.Equal(got, want) {
		t.Errorf("after the deletes the workspace holds %q, want %q (empty folders gone, a/ kept)", got, want)
	}
	if r := u.do("DELETE", base+"a/keep.txt", nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE a/keep.txt: %d %s", r.status, r.body)
	}
	if _, err := os.Stat(ws); err != nil {
		t.Errorf("the workspace itself went: %v", err)
	}
	var list listedFiles
	u.mustJSON("GET", "/api/threads/"+th+"/files", nil, http.StatusOK, &list)
	if len(list.Files) != 0 {
		t.Errorf("listed after the deletes: %+v", list.Files)
	}
	if r := u.do("DELETE", base+"a/keep.txt", nil); r.status != http.StatusNotFound {
		t.Errorf("a second DELETE: %d, want 404", r.status)
	}
}
