package server

import (
	"net/http"
	"testing"
)

// TestThreadWithFirstMessage: POST /api/threads with content creates the
// thread with its run and titles it from the message; when the message or
// the run is refused, no thread is left behind. An empty thread made by
// the API is titled by its first message too, and a title given stays.
func TestThreadWithFirstMessage(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	count := func() int {
		var list struct {
			Threads []threadJSON `json:"threads"`
		}
		u.mustJSON("GET", "/api/threads", nil, http.StatusOK, &list)
		return len(list.Threads)
	}

	var created struct {
		Thread threadJSON        `json:"thread"`
		Run    map[string]string `json:"run"`
	}
	u.mustJSON("POST", "/api/threads", map[string]string{"content": "Compare these:\n- alpha\n- beta", "model": "demo-deep"}, http.StatusCreated, &created)
	if created.Thread.Title != "Compare these" || created.Run["run_id"] == "" || created.Run["model"] != "demo-deep" {
		t.Fatalf("created %+v", created)
	}
	a.waitIdle(created.Thread.ID)

	for _, bad := range []map[string]string{{"content": "  "}, {"content": "hi", "model": "gpt-nope"}} {
		if r := u.do("POST", "/api/threads", bad); r.status != http.StatusUnprocessableEntity {
			t.Errorf("POST /api/threads %v: %d %s, want 422", bad, r.status, r.body)
		}
	}
	if n := count(); n != 1 {
		t.Errorf("%d threads after two refused first messages, want 1", n)
	}

	empty := u.newThread("")
	u.startRun(empty, "## Plan the *launch*\nmore")
	a.waitIdle(empty)
	named := u.newThread("My own title")
	u.startRun(named, "something else")
	a.waitIdle(named)
	for id, want := range map[string]string{empty: "Plan the launch", named: "My own title"} {
		if got := u.thread(id).Thread.Title; got != want {
			t.Errorf("thread %s is titled %q, want %q", id, got, want)
		}
	}
}
