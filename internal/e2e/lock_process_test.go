package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
)

// holdWriteLock takes SQLite's write lock on the database at path from a
// connection of the test's own, as another process (sqlite3's BEGIN
// IMMEDIATE) would, and returns its release.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("take the write lock: %v", err)
	}
	released := false
	release = func() {
		if released {
			return
		}
		released = true
		if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
			t.Errorf("release the write lock: %v", err)
		}
		_ = conn.Close()
		_ = db.Close()
	}
	t.Cleanup(release)
	return release
}

// TestHeldLockAnswersWithinTheBusyTimeout: while another process holds
// SQLite's write lock, a request that must write (a new run, a new
// thread) answers within the documented 5 s busy timeout, 503 with
// Retry-After (docs/OPERATIONS.md "Health and metrics"), whether herd was
// idle or its writer was already retrying a run's records; once the lock
// is released the run in flight ends whole and the same requests succeed.
// Each request comes from a browser the session was not last seen in, so
// it also touches the session: that write once waited out a busy timeout
// of its own first (10 s measured).
func TestHeldLockAnswersWithinTheBusyTimeout(t *testing.T) {
	t.Parallel() // it mostly waits: beside the others
	dir := t.TempDir()
	p := startHerd(t, dir)
	c := p.signIn()
	var th struct{ ID string }
	c.call("POST", "/api/threads", map[string]string{"title": "locked"}, &th)

	// Idle: nothing is being written when the lock is taken.
	release := holdWriteLock(t, filepath.Join(dir, "herd.db"))
	writesAnswerInTime(t, c, th.ID, "returning browser")
	release()
	c.call("POST", "/api/threads", map[string]string{"title": "after"}, nil)
	c.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": "Check:\n- alpha"}, nil)
	c.waitIdle(th.ID)

	// Mid-run: the writer is retrying the run's records through the lock.
	running := runningSubagents(c)
	release = holdWriteLock(t, filepath.Join(dir, "herd.db"))
	if !p.log.waitFor(`store: cannot write; keeping the records and retrying until it can" reason="the database is locked by another process"`, 30*time.Second) {
		t.Fatalf("the writer never met the held lock:\n%s", p.log.String())
	}
	writesAnswerInTime(t, c, th.ID, "another browser")
	release()
	c.waitIdle(running)
	var page eventPage
	c.call("GET", "/api/threads/"+running+"/events?limit=1000", nil, &page)
	ends, runEnds := map[string]int{}, 0
	for _, e := range page.Events {
		switch e.EventType {
		case "subagent.end":
			ends[e.TaskID]++
		case "run.end":
			runEnds++
		}
	}
	if runEnds != 1 || len(ends) != 3 {
		t.Errorf("after the lock was released: run.end ×%d, ends for %d tasks; want 1 and 3", runEnds, len(ends))
	}
	c.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": "Check:\n- alpha"}, nil)
	c.waitIdle(th.ID)
	stopHerd(t, p)
}

// writesAnswerInTime starts a run in threadID and creates a thread, from
// a browser with userAgent, and fails unless each answers 503 naming the
// lock, with Retry-After, within the busy timeout and some slack.
func writesAnswerInTime(t *testing.T, c *client, threadID, userAgent string) {
	t.Helper()
	const bound = 7 * time.Second // the 5 s busy timeout and a noisy machine's slack
	for _, tc := range []struct {
		name, path string
		body       any
	}{
		{"new run", "/api/threads/" + threadID + "/runs", map[string]string{"content": "Check:\n- alpha"}},
		{"new thread", "/api/threads", map[string]string{"title": "another"}},
	} {
		start := time.Now()
		code, hdr, body := c.statusHeader("POST", tc.path, tc.body, http.Header{"User-Agent": {userAgent}})
		took := time.Since(start)
		t.Logf("%s under a held lock: %d after %v", tc.name, code, took.Round(time.Millisecond))
		if took > bound {
			t.Errorf("%s under a held lock took %v; want at most %v", tc.name, took.Round(time.Millisecond), bound)
		}
		if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || !strings.Contains(body, "locked by another process") {
			t.Errorf("%s under a held lock: %d %s (Retry-After %q); want 503 naming the lock, with Retry-After", tc.name, code, body, hdr.Get("Retry-After"))
		}
	}
}

// statusHeader sends a request and returns its status, headers and body,
// whatever they are.
func (c *client) statusHeader(method, path string, body any, hdr http.Header) (int, http.Header, string) {
	c.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, c.base+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", c.csrf)
	for k, v := range hdr {
		req.Header[k] = v
	}
	// Longer than the client's own timeout, so a slow answer is measured
	// rather than cut off.
	hc := *c.http
	hc.Timeout = time.Minute
	resp, err := hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(out)
}
