package server

import (
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"herd/agent"
)

// TestWorkspaceFramesAndWriters: an upload and each subagent's write
// reach a watching page live as "workspace" frames, and the files list
// names the task that wrote each file, the frames' own (docs/API.md
// "Files").
func TestWorkspaceFramesAndWriters(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("files")
	conn := u.watch(th)

	u.upload(th, upload{name: "brief.txt", data: []byte("read me")})
	u.startRun(th, "Compare:\n- alpha\n- beta")
	framed := map[string]agent.FileChange{} // by path, the latest frame's
	deadline := time.Now().Add(20 * time.Second)
	for ended := false; !ended; {
		f, err := readFrame(conn, time.Until(deadline))
		if err != nil {
			t.Fatalf("reading frames: %v (workspace frames so far: %v)", err, framed)
		}
		switch f.Type {
		case "run.end":
			ended = true
		case "workspace":
			if f.Seq == nil {
				t.Errorf("a workspace frame without its seq: it was not committed")
			}
			var d agent.WorkspaceChanged
			if err := json.Unmarshal(f.Data, &d); err != nil {
				t.Fatal(err)
			}
			for _, c := range d.Changes {
				framed[c.Path] = c
			}
		}
	}
	if up := framed["uploads/brief.txt"]; !up.Uploaded || up.Size != 7 || up.TaskID != "" {
		t.Errorf("the upload's frame: %+v", up)
	}
	notes := 0
	for p, c := range framed {
		if strings.HasPrefix(p, "notes/") {
			notes++
			if c.TaskID == "" || c.Size == 0 {
				t.Errorf("a subagent's file framed as %+v", c)
			}
		}
	}
	if notes == 0 {
		t.Fatalf("no subagent's file was framed: %v", framed)
	}

	// After a reload, each card lists what was framed as its task's.
	var thread struct {
		Tasks []agent.Card `json:"tasks"`
	}
	u.mustJSON("GET", "/api/threads/"+th, nil, http.StatusOK, &thread)
	if len(thread.Tasks) == 0 {
		t.Fatal("no cards")
	}
	for _, c := range thread.Tasks {
		want := map[string]int64{}
		for p, ch := range framed {
			if ch.TaskID == c.TaskID {
				want[p] = ch.Size
			}
		}
		got := map[string]int64{}
		for _, f := range c.Files {
			got[f.Path] = f.Size
		}
		if len(want) == 0 || !maps.Equal(got, want) {
			t.Errorf("card %s lists %v, framed %v", c.TaskID, got, want)
		}
	}

	var list struct {
		Files []struct {
			Path   string  `json:"path"`
			Size   int64   `json:"size"`
			TaskID *string `json:"task_id"`
		} `json:"files"`
	}
	u.mustJSON("GET", "/api/threads/"+th+"/files", nil, http.StatusOK, &list)
	if len(list.Files) != len(framed) {
		t.Errorf("listed %d files, framed %d", len(list.Files), len(framed))
	}
	for _, f := range list.Files {
		c, ok := framed[f.Path]
		switch {
		case !ok:
			t.Errorf("%s listed, never framed", f.Path)
		case c.TaskID == "" && f.TaskID != nil:
			t.Errorf("%s: task_id %q, want none", f.Path, *f.TaskID)
		case c.TaskID != "" && (f.TaskID == nil || *f.TaskID != c.TaskID):
			t.Errorf("%s: task_id %v, want %s", f.Path, f.TaskID, c.TaskID)
		case f.Size != c.Size:
			t.Errorf("%s: listed %d bytes, framed %d", f.Path, f.Size, c.Size)
		}
	}
}

// TestFilesListQueryCount: the files list finds every file's writer in
// one query, whatever the number of files and changes.
func TestFilesListQueryCount(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	counts := map[int]int64{}
	for _, n := range []int{1, 30} {
		th := u.newThread("files")
		for i := range n {
			u.upload(th, upload{name: strings.Repeat("f", i+1) + ".txt", data: []byte("x")})
		}
		before := a.store.Reads()
		u.mustJSON("GET", "/api/threads/"+th+"/files", nil, http.StatusOK, nil)
		counts[n] = a.store.Reads() - before
	}
	if counts[1] != counts[30] || counts[1] == 0 {
		t.Errorf("queries: %d for 1 file, %d for 30", counts[1], counts[30])
	}
}
