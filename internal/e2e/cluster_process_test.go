package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"herd/internal/pgtest"
)

// Several herds on one PostgreSQL database (docs/DESIGN.md §14): each
// test starts real binaries on loopback against a schema of its own.

// clusterEnv is the environment of an instance of the cluster on dsn:
// short leases, so failover is quick to watch.
func clusterEnv(dsn string, extra ...string) []string {
	return append(append(pgEnv(dsn), "HERD_CLUSTER_LEASE_SECONDS=3", "HERD_CLUSTER_RENEW_SECONDS=1"), extra...)
}

// dialStream opens threadID's stream on p for c, after seq after.
func dialStream(t *testing.T, p *proc, c *client, threadID string) *websocket.Conn {
	t.Helper()
	hdr := http.Header{"Origin": {p.url}}
	for _, ck := range c.http.Jar.Cookies(mustParse(p.url)) {
		hdr.Add("Cookie", ck.Name+"="+ck.Value)
	}
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(p.url, "http")+"/api/threads/"+threadID+"/stream", hdr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	t.Cleanup(func() { conn.Close() })
	return conn
}

// liveFrame is a frame as these tests read it.
type liveFrame struct {
	Seq       *int64          `json:"seq"`
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data"`
	CreatedAt *time.Time      `json:"created_at"`
}

func readFrame(t *testing.T, conn *websocket.Conn, p *proc) liveFrame {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	_, raw, err := conn.ReadMessage()
	if err != nil {
		t.Fatalf("stream: %v\n%s", err, p.log.String())
	}
	var f liveFrame
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestClusterLiveFramesAcrossInstances: a client on instance B sees a run
// started on instance A frame for frame: every committed frame in
// contiguous seq order, the streamed text too, and after a reload the
// same cards on either instance.
func TestClusterLiveFramesAcrossInstances(t *testing.T) {
	dsn := pgtest.DSN(t)
	env := clusterEnv(dsn, "HERD_MODELS_0_LATENCY_MS=20", "HERD_MODELS_1_LATENCY_MS=20")
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca, cb := a.signIn(), b.signIn()
	var th struct{ ID string }
	ca.call("POST", "/api/threads", map[string]string{"title": "across"}, &th)
	conn := dialStream(t, b, cb, th.ID)
	ca.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": "Check:\n- alpha\n- beta\n- researcher: gamma"}, nil)

	var (
		seqs []int64
		lags []time.Duration // from A's commit to B's client, same clock
	)
	deltas := 0
	cards := map[string]string{}
	for done := false; !done; {
		f := readFrame(t, conn, b)
		if f.Seq != nil {
			seqs = append(seqs, *f.Seq)
			lags = append(lags, time.Since(*f.CreatedAt))
		}
		var d struct {
			TaskID string `json:"task_id"`
			Status string `json:"status"`
		}
		_ = json.Unmarshal(f.Data, &d)
		switch f.Type {
		case "ai_delta":
			deltas++
		case "task_completed", "task_failed", "task_cancelled", "task_timed_out":
			cards[d.TaskID] = f.Type
		case "run.end":
			if d.Status != "completed" {
				t.Errorf("run ended %s", d.Status)
			}
			done = true
		}
	}
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("seqs on B %v: not contiguous from 1", seqs)
		}
	}
	if len(cards) != 3 || deltas == 0 {
		t.Errorf("on B: cards %v and %d text deltas; want 3 cards and streamed text", cards, deltas)
	}
	slices.Sort(lags)
	t.Logf("%d committed frames from A to a client on B: p50 %v, p99 %v, max %v", len(lags),
		lags[len(lags)/2], lags[len(lags)*99/100], lags[len(lags)-1])
	var sa, sb threadState
	ca.call("GET", "/api/threads/"+th.ID, nil, &sa)
	cb.call("GET", "/api/threads/"+th.ID, nil, &sb)
	if sa.LastSeq != int64(len(seqs)) || sb.LastSeq != sa.LastSeq {
		t.Errorf("last seq on A %d, on B %d; %d frames streamed", sa.LastSeq, sb.LastSeq, len(seqs))
	}
	if len(sa.Tasks) != 3 || len(sb.Tasks) != 3 {
		t.Fatalf("cards after reload: %d on A, %d on B", len(sa.Tasks), len(sb.Tasks))
	}
	for i := range sa.Tasks {
		if sa.Tasks[i] != sb.Tasks[i] {
			t.Errorf("card %d on A %+v, on B %+v", i, sa.Tasks[i], sb.Tasks[i])
		}
	}
	stopHerd(t, a)
	stopHerd(t, b)
}

// TestClusterControlAcrossInstances: with a run on A, B refuses a second
// run in the thread (409, the database's rule) and, the user's limit of
// one active run being reached, a run in another thread (429); B cancels
// one of A's cards and stops the run: the work on A ends within the
// cancel grace. Deleting a thread via B stops its run on A first.
func TestClusterControlAcrossInstances(t *testing.T) {
	dsn := pgtest.DSN(t)
	env := clusterEnv(dsn, "HERD_LEAD_MAX_ACTIVE_RUNS_PER_USER=1")
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca, cb := a.signIn(), b.signIn()
	th := runningSubagents(ca)

	code, body := cb.status("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "again"})
	if code != http.StatusConflict {
		t.Errorf("a second run via B: %d %s, want 409", code, body)
	}
	var other struct{ ID string }
	cb.call("POST", "/api/threads", map[string]string{"title": "other"}, &other)
	if code, body := cb.status("POST", "/api/threads/"+other.ID+"/runs", map[string]string{"content": "x"}); code != http.StatusTooManyRequests {
		t.Errorf("a run in another thread via B, beyond the user's limit: %d %s, want 429", code, body)
	}
	var state threadState
	cb.call("GET", "/api/threads/"+th, nil, &state)
	if state.Active == nil || len(state.Tasks) != 3 {
		t.Fatalf("B's view of A's run: active %v, %d cards", state.Active, len(state.Tasks))
	}
	if code, body := cb.status("POST", "/api/threads/"+th+"/tasks/no-such-task/cancel", nil); code != http.StatusNotFound {
		t.Errorf("cancel of a task that does not exist via B: %d %s, want 404", code, body)
	}
	victim := state.Tasks[0].TaskID
	start := time.Now()
	cb.call("POST", "/api/threads/"+th+"/tasks/"+victim+"/cancel", nil, nil)
	waitState(t, ca, th, 10*time.Second, func(s threadState) bool {
		for _, task := range s.Tasks {
			if task.TaskID == victim {
				return task.Status == "cancelled"
			}
		}
		return false
	})
	t.Logf("card cancelled via B ended on A in %v", time.Since(start))

	start = time.Now()
	cb.call("POST", "/api/threads/"+th+"/runs/"+state.Active.ID+"/cancel", nil, nil)
	waitState(t, cb, th, 10*time.Second, func(s threadState) bool { return s.Active == nil })
	t.Logf("Stop via B ended A's run in %v", time.Since(start))
	cb.call("GET", "/api/threads/"+th, nil, &state)
	for _, task := range state.Tasks {
		if task.Status == "running" || task.Status == "queued" {
			t.Errorf("card %s still %s after Stop", task.TaskID, task.Status)
		}
	}

	th2 := runningSubagents(ca)
	start = time.Now()
	if code, body := cb.status("DELETE", "/api/threads/"+th2, nil); code != http.StatusNoContent {
		t.Fatalf("delete via B: %d %s", code, body)
	}
	t.Logf("delete via B returned in %v", time.Since(start))
	if code, _ := cb.status("POST", "/api/threads/"+th2+"/runs", map[string]string{"content": "x"}); code != http.StatusNotFound {
		t.Errorf("the deleted thread via B: %d, want 404", code)
	}
	// The delete answered once the run's end was committed; A logs it
	// just after.
	cancelled := func() int {
		n := 0
		for _, line := range strings.Split(a.log.String(), "\n") {
			if strings.Contains(line, `msg="run ended"`) && strings.Contains(line, "status=cancelled") {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(5 * time.Second); cancelled() < 2 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if n := cancelled(); n != 2 {
		t.Errorf("%d runs ended cancelled on A, want 2:\n%s", n, a.log.String())
	}
	stopHerd(t, a)
	stopHerd(t, b)
}

// TestClusterFailover: A is killed with runs in flight; B resumes them
// within the lease plus 5 s (a "Resumed on another instance" step on each
// running card) and finishes them: every card completed, one terminal
// each, one run end. A restarting later changes nothing. With runs.resume
// off B closes them instead, as crash recovery would ("interrupted:
// instance lost").
func TestClusterFailover(t *testing.T) {
	for _, resume := range []bool{true, false} {
		t.Run(fmt.Sprint("resume=", resume), func(t *testing.T) {
			dsn := pgtest.DSN(t)
			dirA := t.TempDir()
			env := clusterEnv(dsn, fmt.Sprint("HERD_RUNS_RESUME=", resume))
			a := startHerdWith(t, dirA, env...)
			b := startHerdWith(t, t.TempDir(), env...)
			ca, cb := a.signIn(), b.signIn()
			th := runningSubagents(ca)
			if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = a.wait(10 * time.Second)
			killed := time.Now()
			const lease = 3 * time.Second
			if resume {
				for deadline := killed.Add(lease + 5*time.Second); len(cb.events(th, "run.resumed").Events) == 0; time.Sleep(50 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("B did not resume A's run within the lease plus 5 s:\n%s", b.log.String())
					}
				}
				t.Logf("B resumed A's run %v after the kill (lease %v)", time.Since(killed), lease)
				waitRunEnd(t, cb, th, 90*time.Second)
			} else {
				waitRunEnd(t, cb, th, lease+5*time.Second)
			}
			t.Logf("the run ended %v after the kill", time.Since(killed))

			var state threadState
			cb.call("GET", "/api/threads/"+th, nil, &state)
			if len(state.Tasks) != 3 {
				t.Fatalf("%d cards, want 3", len(state.Tasks))
			}
			for _, task := range state.Tasks {
				switch {
				case resume && task.Status != "completed":
					t.Errorf("card %s %s (%s), want completed", task.TaskID, task.Status, task.Error)
				case !resume && task.Status == "failed" && task.Error != "interrupted: instance lost":
					t.Errorf("card %s error %q", task.TaskID, task.Error)
				case task.Status == "queued" || task.Status == "running":
					t.Errorf("card %s still %s", task.TaskID, task.Status)
				}
			}
			oneTerminalEach(t, cb, th)
			before := allSeqs(cb, th)

			a2 := startHerdWith(t, dirA, env...)
			// Let A's first sweeps pass.
			time.Sleep(2 * lease)
			after := allSeqs(a2.signIn(), th)
			if len(after) != len(before) {
				t.Errorf("A's restart changed the thread: %d records before, %d after", len(before), len(after))
			}
			stopHerd(t, a2)
			stopHerd(t, b)
		})
	}
}

// TestClusterTokenSwitchReachesOtherInstance: the admin turns token
// figures off on A; a page open on B hears of it at once, and B's API
// applies it. Signing out on A closes the session's socket on B.
func TestClusterTokenSwitchReachesOtherInstance(t *testing.T) {
	dsn := pgtest.DSN(t)
	a := startHerdWith(t, t.TempDir(), clusterEnv(dsn)...)
	b := startHerdWith(t, t.TempDir(), clusterEnv(dsn)...)
	ca, cb := a.signIn(), b.signIn()
	var th struct{ ID string }
	cb.call("POST", "/api/threads", map[string]string{"title": "gate"}, &th)
	conn := dialStream(t, b, cb, th.ID)
	ca.call("PUT", "/api/admin/settings", map[string]bool{"token_usage_enabled": false}, nil)
	for {
		f := readFrame(t, conn, b)
		if f.Type != "settings" {
			continue
		}
		if string(f.Data) != `{"token_usage_enabled":false}` {
			t.Errorf("settings frame on B: %s", f.Data)
		}
		break
	}
	var usage map[string]any
	cb.call("GET", "/api/threads/"+th.ID+"/usage", nil, &usage)
	if usage["token_usage_enabled"] != false {
		t.Errorf("B's usage answer after the switch on A: %v", usage)
	}

	// Signing out through A (the same cookie) closes the session's socket
	// on B.
	cb.base = a.url
	cb.call("POST", "/api/auth/logout", nil, nil)
	for {
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _, err := conn.ReadMessage()
		if err == nil {
			continue
		}
		if !websocket.IsCloseError(err, 4401) {
			t.Errorf("B's socket after signing out on A: %v, want close 4401", err)
		}
		break
	}
	stopHerd(t, a)
	stopHerd(t, b)
}

// waitRunEnd polls threadID's events on c until one is a run.end.
func waitRunEnd(t *testing.T, c *client, threadID string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var p eventPage
		c.call("GET", "/api/threads/"+threadID+"/events?event_types=run.end", nil, &p)
		if len(p.Events) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run.end within %v", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitState polls threadID's state on c until ok or the timeout.
func waitState(t *testing.T, c *client, threadID string, timeout time.Duration, ok func(threadState) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var s threadState
		c.call("GET", "/api/threads/"+threadID, nil, &s)
		if ok(s) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread state not reached within %v: %+v", timeout, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// status sends a request and returns its status code and body, whatever
// they are.
func (c *client) status(method, path string, body any) (int, string) {
	c.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, c.base+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", c.csrf)
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// TestMigrateRefusesAServedTarget: herd migrate will not copy into a
// database an instance serves (its lease is live), and changes nothing.
func TestMigrateRefusesAServedTarget(t *testing.T) {
	dsn := pgtest.DSN(t)
	p := startHerdWith(t, t.TempDir(), clusterEnv(dsn)...)
	code, out := runMigrateCmd(t, nil, "--from", sourceDB(t), "--to", dsn)
	if code != 1 || !strings.Contains(out, "a herd is serving the target database") || !strings.Contains(out, strings.TrimPrefix(p.url, "http://")) {
		t.Errorf("migrate into a served database: exit %d\n%s", code, out)
	}
	stopHerd(t, p)
}
