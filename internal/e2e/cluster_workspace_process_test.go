package e2e

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"herd/internal/pgtest"
)

// TestClusterWorkspaceFramesAcrossInstances: a client on instance B sees
// the "workspace" frames of a run on instance A as its subagents write
// files, committed (with a seq), each naming its task; and B's cards,
// rebuilt from the database, list the same files (docs/DESIGN.md §14).
func TestClusterWorkspaceFramesAcrossInstances(t *testing.T) {
	env := clusterEnv(pgtest.DSN(t))
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca, cb := a.signIn(), b.signIn()
	var th struct{ ID string }
	ca.call("POST", "/api/threads", map[string]string{"title": "files across"}, &th)
	conn := dialStream(t, b, cb, th.ID)
	ca.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": "Compare:\n- alpha\n- beta"}, nil)

	type change struct {
		Path   string `json:"path"`
		Size   int64  `json:"size"`
		TaskID string `json:"task_id"`
	}
	framed := map[string]map[string]int64{} // task → path → size
	for done := false; !done; {
		f := readFrame(t, conn, b)
		switch f.Type {
		case "run.end":
			done = true
		case "workspace":
			if f.Seq == nil {
				t.Errorf("a workspace frame without a seq on B")
			}
			var d struct{ Changes []change }
			if err := json.Unmarshal(f.Data, &d); err != nil {
				t.Fatal(err)
			}
			for _, c := range d.Changes {
				if framed[c.TaskID] == nil {
					framed[c.TaskID] = map[string]int64{}
				}
				framed[c.TaskID][c.Path] = c.Size
			}
		}
	}
	if len(framed) < 2 {
		t.Fatalf("workspace frames on B name tasks %v; want the two subagents'", framed)
	}
	for task, files := range framed {
		if task == "" {
			continue // the lead's
		}
		for p := range files {
			if !strings.HasPrefix(p, "notes/") {
				t.Errorf("task %s framed %s", task, p)
			}
		}
	}

	var state struct {
		Tasks []struct {
			TaskID string `json:"task_id"`
			Files  []change
		} `json:"tasks"`
	}
	cb.call("GET", "/api/threads/"+th.ID, nil, &state)
	for _, c := range state.Tasks {
		got := map[string]int64{}
		for _, f := range c.Files {
			got[f.Path] = f.Size
		}
		if !maps.Equal(got, framed[c.TaskID]) {
			t.Errorf("card %s on B lists %v, framed %v", c.TaskID, got, framed[c.TaskID])
		}
	}
	stopHerd(t, a)
	stopHerd(t, b)
}
