package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// These tests run the real binary, kill or stop it mid-run, and start it
// again on the same data directory (docs/DESIGN.md §11).

// proc is a running herd.
type proc struct {
	t          *testing.T
	cmd        *exec.Cmd
	url        string
	metricsURL string // the metrics listener's /metrics
	log        *syncBuffer
	done       chan error
	// What started it, for startAgain.
	argv    []string
	dataDir string
	env     []string
}

var (
	listening        = regexp.MustCompile(`msg="herd is listening" url=(\S+)`)
	metricsListening = regexp.MustCompile(`msg="metrics are listening" url=(\S+)`)
)

func startHerd(t *testing.T, dataDir string) *proc {
	t.Helper()
	return startHerdWith(t, dataDir)
}

// startHerdWith starts herd with the test admin and further environment
// variables (config keys as HERD_…).
func startHerdWith(t *testing.T, dataDir string, env ...string) *proc {
	t.Helper()
	return startHerdEnv(t, dataDir, append([]string{"HERD_ADMIN_EMAIL=ops@example.com", "HERD_ADMIN_PASSWORD=long enough pw"}, env...)...)
}

// startHerdEnv starts herd with env added to the test's environment.
func startHerdEnv(t *testing.T, dataDir string, env ...string) *proc {
	t.Helper()
	return startHerdCmd(t, []string{herdBinary(t)}, dataDir, env...)
}

// startHerdCmd starts the herd binary, the last of argv (the others start
// it: a wrapper that drops privileges, say), on dataDir.
func startHerdCmd(t *testing.T, argv []string, dataDir string, env ...string) *proc {
	t.Helper()
	return startHerdAt(t, argv, dataDir, "127.0.0.1:0", env...)
}

// startAgain starts herd, which has ended, again as it was started, on
// the same data directory and the address it listened on: a page open on
// the old process reconnects to the new one.
func (p *proc) startAgain() *proc {
	p.t.Helper()
	if p.cmd.ProcessState == nil {
		p.t.Fatal("startAgain: herd is still running")
	}
	return startHerdAt(p.t, p.argv, p.dataDir, mustParse(p.url).Host, p.env...)
}

// startHerdAt starts herd as startHerdCmd does, listening on addr.
func startHerdAt(t *testing.T, argv []string, dataDir, addr string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(argv[0], append(argv[1:], "--data-dir", dataDir, "--addr", addr)...)
	cmd.Env = append(os.Environ(),
		// Slow demo models, so a run is still in flight when the test strikes.
		"HERD_MODELS_0_LATENCY_MS=250", "HERD_MODELS_1_LATENCY_MS=250",
		"HERD_METRICS_ADDR=127.0.0.1:0",
	)
	cmd.Env = append(cmd.Env, env...)
	p := &proc{t: t, cmd: cmd, log: &syncBuffer{}, done: make(chan error, 1), argv: argv, dataDir: dataDir, env: env}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.log, line)
			if m := metricsListening.FindStringSubmatch(line); m != nil {
				p.metricsURL = m[1]
			}
			if m := listening.FindStringSubmatch(line); m != nil {
				urls <- m[1]
			}
		}
		p.done <- cmd.Wait()
	}()
	select {
	case p.url = <-urls:
	case err := <-p.done:
		t.Fatalf("herd exited at start: %v\n%s", err, p.log.String())
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("herd did not start:\n%s", p.log.String())
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait returns the process's exit error once it has ended.
func (p *proc) wait(timeout time.Duration) error {
	select {
	case err := <-p.done:
		return err
	case <-time.After(timeout):
		p.t.Fatalf("herd did not exit within %v:\n%s", timeout, p.log.String())
		return nil
	}
}

// client is a signed-in API client of a running herd.
type client struct {
	t    *testing.T
	base string
	http *http.Client
	csrf string
}

// signIn signs in the configured admin.
func (p *proc) signIn() *client {
	return p.signInAs("ops@example.com", "long enough pw")
}

func (c *client) call(method, path string, body, out any) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", c.csrf)
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		c.t.Fatalf("%s %s: %d %s (cookies %v)", method, path, resp.StatusCode, b, c.http.Jar.Cookies(mustParse(c.base)))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

type threadState struct {
	Messages []struct {
		ID  string `json:"id"`
		Seq int64  `json:"seq"`
	} `json:"messages"`
	Tasks []struct {
		TaskID string `json:"task_id"`
		Status string `json:"status"`
		Error  string `json:"error"`
		Model  string `json:"model_name"`
	} `json:"tasks"`
	Active *struct {
		ID string `json:"id"`
	} `json:"active_run"`
	LastSeq int64 `json:"last_seq"`
}

type eventPage struct {
	Events []struct {
		Seq       int64  `json:"seq"`
		EventType string `json:"event_type"`
		TaskID    string `json:"task_id"`
	} `json:"events"`
}

// runningSubagents starts a run of three subagents and waits until they
// have written steps.
func runningSubagents(c *client) (threadID string) {
	var th struct{ ID string }
	c.call("POST", "/api/threads", map[string]string{"title": "crash"}, &th)
	c.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": "Check:\n- alpha\n- beta\n- researcher: gamma"}, nil)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var p eventPage
		c.call("GET", "/api/threads/"+th.ID+"/events?event_types=subagent.step&limit=1000", nil, &p)
		tasks := map[string]bool{}
		for _, e := range p.Events {
			tasks[e.TaskID] = true
		}
		if len(tasks) == 3 {
			return th.ID
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatal("subagents never wrote steps")
	return ""
}

func allSeqs(c *client, threadID string) map[int64]string {
	out := map[int64]string{}
	var th threadState
	c.call("GET", "/api/threads/"+threadID, nil, &th)
	for _, m := range th.Messages {
		out[m.Seq] = "message " + m.ID
	}
	var p eventPage
	c.call("GET", "/api/threads/"+threadID+"/events?limit=1000", nil, &p)
	for _, e := range p.Events {
		out[e.Seq] = e.EventType
	}
	return out
}

// TestKillAndRestart: with runs.resume off, a restart closes what a kill
// left open, as before runs could resume (TestKillResumes has them go on).
func TestKillAndRestart(t *testing.T) {
	dir := t.TempDir()
	p := startHerdWith(t, dir, "HERD_RUNS_RESUME=false")
	c := p.signIn()
	th := runningSubagents(c)
	before := allSeqs(c, th)

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.wait(10 * time.Second)

	p2 := startHerdWith(t, dir, "HERD_RUNS_RESUME=false")
	if !strings.Contains(p2.log.String(), "crash recovery closed interrupted runs") {
		t.Errorf("no crash recovery at restart:\n%s", p2.log.String())
	}
	c2 := p2.signIn()
	after := allSeqs(c2, th)
	for seq, what := range before {
		if after[seq] != what {
			t.Errorf("seq %d (%s) persisted before the kill is gone after the restart (now %q)", seq, what, after[seq])
		}
	}
	var state threadState
	c2.call("GET", "/api/threads/"+th, nil, &state)
	if state.Active != nil {
		t.Errorf("a run is still active after the restart")
	}
	if len(state.Tasks) != 3 {
		t.Fatalf("%d cards, want 3", len(state.Tasks))
	}
	for _, task := range state.Tasks {
		if task.Status == "queued" || task.Status == "running" {
			t.Errorf("card %s still %s after the restart", task.TaskID, task.Status)
		}
		if task.Status == "failed" && task.Error != "interrupted: server restarted" {
			t.Errorf("card %s error %q", task.TaskID, task.Error)
		}
	}
	stopHerd(t, p2)
}

func stopHerd(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(20 * time.Second); err != nil {
		t.Errorf("herd exited with %v after SIGTERM:\n%s", err, p.log.String())
	}
}

// TestTerminateGracefully: with runs.resume off, a stop without a drain
// cancels the runs, every card ending live (TestTerminateReleases has
// them resume).
func TestTerminateGracefully(t *testing.T) {
	dir := t.TempDir()
	// No drain: the stop interrupts the runs at once (drain_process_test.go
	// lets them finish).
	p := startHerdWith(t, dir, "HERD_SERVER_DRAIN_SECONDS=0", "HERD_RUNS_RESUME=false")
	c := p.signIn()
	th := runningSubagents(c)

	hdr := http.Header{"Origin": {p.url}}
	for _, ck := range c.http.Jar.Cookies(mustParse(p.url)) {
		hdr.Add("Cookie", ck.Name+"="+ck.Value)
	}
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(p.url, "http")+"/api/threads/"+th+"/stream", hdr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	defer conn.Close()
	closed := make(chan error, 1)
	var terminal []string
	go func() {
		for {
			_, raw, err := conn.ReadMessage()
			if err != nil {
				closed <- err
				return
			}
			var f struct{ Type string }
			_ = json.Unmarshal(raw, &f)
			if strings.HasPrefix(f.Type, "task_") && f.Type != "task_running" && f.Type != "task_started" && f.Type != "task_queued" {
				terminal = append(terminal, f.Type)
			}
		}
	}()

	stopHerd(t, p)
	select {
	case err := <-closed:
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
			t.Errorf("socket ended with %v, want a going-away close frame", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the socket was not closed")
	}
	if len(terminal) != 3 {
		t.Errorf("terminal frames before the close: %v, want 3 (every card ends live)\n%s", terminal, p.log.String())
	}

	p2 := startHerd(t, dir)
	if strings.Contains(p2.log.String(), "crash recovery closed") {
		t.Error("a graceful stop left work for crash recovery")
	}
	c2 := p2.signIn()
	var state threadState
	c2.call("GET", "/api/threads/"+th, nil, &state)
	for _, task := range state.Tasks {
		if task.Status != "cancelled" {
			t.Errorf("card %s is %s after a graceful stop, want cancelled", task.TaskID, task.Status)
		}
	}
	stopHerd(t, p2)
}
