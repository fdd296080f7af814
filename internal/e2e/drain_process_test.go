package e2e

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"herd/internal/pgtest"
)

// A stop that lets runs finish (docs/OPERATIONS.md "Rolling upgrade").

// readyz is the status and error code of p's readiness endpoint.
func readyz(t *testing.T, p *proc) (int, string) {
	t.Helper()
	resp, err := http.Get(p.url + "/readyz")
	if err != nil {
		t.Fatalf("readyz: %v", err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Error.Code
}

// TestClusterRollingUpgrade: SIGTERM to instance A of two takes A out of
// rotation at once (/readyz 503 "draining", a new run on A refused with
// 503) while the run it executes finishes normally, its cards completed
// and watched live on A to the end; then A's sockets close with
// going-away, A exits 0 long before its grace, and the page, reconnecting
// to B after the last seq it has, misses nothing and gets nothing twice.
func TestClusterRollingUpgrade(t *testing.T) {
	dsn := pgtest.DSN(t)
	// Slower models: the run is still going when A is told to stop.
	env := clusterEnv(dsn, "HERD_SERVER_DRAIN_SECONDS=120", "HERD_MODELS_0_LATENCY_MS=400", "HERD_MODELS_1_LATENCY_MS=400")
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca, cb := a.signIn(), b.signIn()
	var other struct{ ID string }
	ca.call("POST", "/api/threads", map[string]string{"title": "later"}, &other)
	th := runningSubagents(ca)
	conn := dialStream(t, a, ca, th)

	stopped := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, why := readyz(t, a)
		if code == http.StatusServiceUnavailable && why == "draining" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's /readyz still %d %q after SIGTERM", code, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := ca.status("POST", "/api/threads/"+other.ID+"/runs", map[string]string{"content": "hello"}); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Errorf("a new run on the draining instance: %d %s, want 503", code, body)
	}
	if code, _ := readyz(t, b); code != http.StatusOK {
		t.Errorf("B's /readyz: %d", code)
	}

	// A's socket sees the run to its end, then going-away.
	var last int64
	cards := map[string]string{}
	runEnd := false
	for {
		_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
		_, raw, err := conn.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
				t.Fatalf("A's socket ended with %v, want going-away\n%s", err, a.log.String())
			}
			break
		}
		var f frame
		_ = json.Unmarshal(raw, &f)
		if f.Seq != nil {
			if *f.Seq <= last {
				t.Fatalf("seq %d after %d on A", *f.Seq, last)
			}
			last = *f.Seq
		}
		switch f.Type {
		case "task_completed", "task_failed", "task_cancelled":
			cards[f.Data.TaskID] = f.Type
		case "run.end":
			runEnd = true
		}
	}
	if err := a.wait(60 * time.Second); err != nil {
		t.Fatalf("A exited with %v\n%s", err, a.log.String())
	}
	if took := time.Since(stopped); took > 90*time.Second {
		t.Errorf("A took %v to stop: it waited out its grace instead of its run", took)
	}
	if !strings.Contains(a.log.String(), "every run has finished") {
		t.Errorf("A's log does not say its runs finished:\n%s", a.log.String())
	}
	if !runEnd || len(cards) != 3 {
		t.Errorf("on A before the close: run end %v, cards %v; want the end and 3 cards", runEnd, cards)
	}
	for id, how := range cards {
		if how != "task_completed" {
			t.Errorf("card %s ended %s during the drain, want completed", id, how)
		}
	}

	// The page reconnects to B after the last seq it has: nothing is
	// missing and nothing comes twice.
	var state threadState
	cb.call("GET", "/api/threads/"+th, nil, &state)
	if state.Active != nil {
		t.Errorf("B still sees an active run on %s", th)
	}
	for _, task := range state.Tasks {
		if task.Status != "completed" {
			t.Errorf("card %s is %s on B", task.TaskID, task.Status)
		}
	}
	hdr := http.Header{"Origin": {b.url}}
	for _, ck := range cb.http.Jar.Cookies(mustParse(b.url)) {
		hdr.Add("Cookie", ck.Name+"="+ck.Value)
	}
	resumed, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(b.url, "http")+"/api/threads/"+th+"/stream?after_seq="+strconv.FormatInt(last, 10), hdr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	defer resumed.Close()
	if state.LastSeq != last {
		t.Errorf("A's socket ended at seq %d, the thread's last is %d", last, state.LastSeq)
	}
	// A run on B after the upgrade streams from the next seq on.
	cb.call("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "hello again"}, nil)
	f := readFrame(t, resumed, b)
	for f.Seq == nil {
		f = readFrame(t, resumed, b)
	}
	if *f.Seq != last+1 {
		t.Errorf("first frame on B after seq %d: seq %d", last, *f.Seq)
	}
	waitRunEnd(t, cb, th, 30*time.Second)
	stopHerd(t, b)
}

// TestDrainGraceInterrupts: with runs.resume off, a run that outlasts
// server.drain_seconds is interrupted as a stop without a drain interrupts it: every card ends
// cancelled, live, before the socket closes with going-away.
func TestDrainGraceInterrupts(t *testing.T) {
	dir := t.TempDir()
	p := startHerdWith(t, dir, "HERD_SERVER_DRAIN_SECONDS=1", "HERD_MODELS_0_LATENCY_MS=2000", "HERD_MODELS_1_LATENCY_MS=2000", "HERD_RUNS_RESUME=false")
	c := p.signIn()
	th := runningSubagents(c)
	conn := dialStream(t, p, c, th)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	cards := map[string]string{}
	for {
		_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
		_, raw, err := conn.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
				t.Fatalf("socket ended with %v, want going-away\n%s", err, p.log.String())
			}
			break
		}
		var f frame
		_ = json.Unmarshal(raw, &f)
		if strings.HasPrefix(f.Type, "task_") && f.Type != "task_running" && f.Type != "task_started" && f.Type != "task_queued" {
			cards[f.Data.TaskID] = f.Type
		}
	}
	if err := p.wait(60 * time.Second); err != nil {
		t.Fatalf("herd exited with %v\n%s", err, p.log.String())
	}
	if !strings.Contains(p.log.String(), "runs still going after server.drain_seconds are interrupted") {
		t.Errorf("the log does not say the grace ran out:\n%s", p.log.String())
	}
	if len(cards) != 3 {
		t.Errorf("cards ended live: %v, want 3", cards)
	}
	for id, how := range cards {
		if how != "task_cancelled" {
			t.Errorf("card %s ended %s, want cancelled", id, how)
		}
	}
}
