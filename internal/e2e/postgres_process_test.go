package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"herd/internal/pgtest"
)

// pgEnv points herd at the PostgreSQL database dsn.
func pgEnv(dsn string) []string {
	return []string{"HERD_DATABASE_DRIVER=postgres", "HERD_DATABASE_DSN=" + dsn}
}

// frame is one WebSocket frame, as much as these tests read.
type frame struct {
	Seq  *int64 `json:"seq"`
	Type string `json:"type"`
	Data struct {
		TaskID string `json:"task_id"`
		Status string `json:"status"`
	} `json:"data"`
}

// streamRun opens threadID's stream, starts a run with content and reads
// frames until the run ends. It returns the sequenced frames' seqs and the
// terminal card frames by task.
func streamRun(t *testing.T, p *proc, c *client, threadID, content string) (seqs []int64, cards map[string]string) {
	t.Helper()
	hdr := map[string][]string{"Origin": {p.url}}
	for _, ck := range c.http.Jar.Cookies(mustParse(p.url)) {
		hdr["Cookie"] = append(hdr["Cookie"], ck.Name+"="+ck.Value)
	}
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(p.url, "http")+"/api/threads/"+threadID+"/stream", hdr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	defer conn.Close()
	c.call("POST", "/api/threads/"+threadID+"/runs", map[string]string{"content": content}, nil)
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	cards = map[string]string{}
	for {
		_, raw, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("stream ended before the run did: %v\n%s", err, p.log.String())
		}
		var f frame
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		if f.Seq != nil {
			seqs = append(seqs, *f.Seq)
		}
		switch f.Type {
		case "task_completed", "task_failed", "task_cancelled", "task_timed_out":
			cards[f.Data.TaskID] = f.Type
		case "run.end":
			if f.Data.Status != "completed" {
				t.Errorf("run ended %s", f.Data.Status)
			}
			return seqs, cards
		}
	}
}

// TestPostgresServeAndRestart: herd on PostgreSQL runs a message with
// three subagents to the end, every committed frame arrives live in
// contiguous seq order, and after a restart the thread reloads whole.
func TestPostgresServeAndRestart(t *testing.T) {
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	// Quick demo models: the run is the subject here, not its timing.
	env := append(pgEnv(dsn), "HERD_MODELS_0_LATENCY_MS=20", "HERD_MODELS_1_LATENCY_MS=20")
	p := startHerdWith(t, dir, env...)
	if !strings.Contains(p.log.String(), `msg=database driver=postgres`) {
		t.Errorf("no log line naming the database:\n%s", p.log.String())
	}
	c := p.signIn()
	var th struct{ ID string }
	c.call("POST", "/api/threads", map[string]string{"title": "on postgres"}, &th)
	seqs, cards := streamRun(t, p, c, th.ID, "Check:\n- alpha\n- beta\n- researcher: gamma")
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("live seqs %v: not contiguous from 1", seqs)
		}
	}
	if len(cards) != 3 {
		t.Fatalf("cards ended live: %v, want 3", cards)
	}
	for id, how := range cards {
		if how != "task_completed" {
			t.Errorf("card %s: %s", id, how)
		}
	}
	before := allSeqs(c, th.ID)
	stopHerd(t, p)

	p2 := startHerdWith(t, dir, env...)
	c2 := p2.signIn()
	after := allSeqs(c2, th.ID)
	if len(after) != len(seqs) {
		t.Errorf("%d records after the restart, %d streamed", len(after), len(seqs))
	}
	for seq, what := range before {
		if after[seq] != what {
			t.Errorf("seq %d (%s) is %q after the restart", seq, what, after[seq])
		}
	}
	var state threadState
	c2.call("GET", "/api/threads/"+th.ID, nil, &state)
	if state.Active != nil || state.LastSeq != int64(len(seqs)) {
		t.Errorf("after the restart: active run %v, last_seq %d; want none, %d", state.Active, state.LastSeq, len(seqs))
	}
	if len(state.Tasks) != 3 {
		t.Fatalf("%d cards after the restart, want 3", len(state.Tasks))
	}
	for _, task := range state.Tasks {
		if task.Status != "completed" {
			t.Errorf("card %s is %s after the restart", task.TaskID, task.Status)
		}
	}
	var usage struct {
		Total struct {
			Calls int64 `json:"calls"`
		} `json:"total"`
	}
	c2.call("GET", "/api/threads/"+th.ID+"/usage", nil, &usage)
	if usage.Total.Calls == 0 {
		t.Error("the usage ledger is empty after the run")
	}
	stopHerd(t, p2)
}

// TestPostgresTwoStartAtOnce: two herds started together on one empty
// database both migrate it without error (an advisory lock runs one
// migration after the other), and both serve it as instances of one
// cluster (docs/DESIGN.md §14).
func TestPostgresTwoStartAtOnce(t *testing.T) {
	dsn := pgtest.DSN(t)
	type result struct {
		listening bool
		log       string
		cmd       *exec.Cmd
	}
	start := func() chan result {
		cmd := exec.Command(herdBinary(t), "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), append(pgEnv(dsn), "HERD_METRICS_ADDR=", "HERD_ADMIN_EMAIL=ops@example.com", "HERD_ADMIN_PASSWORD=long enough pw")...)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})
		out := make(chan result, 1)
		go func() {
			var log strings.Builder
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				log.WriteString(sc.Text() + "\n")
				if strings.Contains(sc.Text(), "herd is listening") {
					out <- result{listening: true, log: log.String(), cmd: cmd}
					// Drain until the process ends, so it never blocks on stderr.
					for sc.Scan() {
					}
					return
				}
			}
			_ = cmd.Wait()
			out <- result{log: log.String(), cmd: cmd}
		}()
		return out
	}
	a, b := start(), start()
	var rs []result
	for _, ch := range []chan result{a, b} {
		select {
		case r := <-ch:
			rs = append(rs, r)
		case <-time.After(60 * time.Second):
			t.Fatal("a herd neither listened nor exited")
		}
	}
	for _, r := range rs {
		if strings.Contains(r.log, "migrate") {
			t.Errorf("a migration failed:\n%s", r.log)
		}
		if !r.listening || !strings.Contains(r.log, "cluster: instance registered") {
			t.Errorf("a herd did not serve as an instance of the cluster:\n%s", r.log)
		}
	}
	for _, r := range rs {
		if r.listening {
			_ = r.cmd.Process.Signal(os.Interrupt)
			_ = r.cmd.Wait()
		}
	}
}

// TestBackupOnPostgresPointsToPgDump: herd backup copies SQLite files; on
// PostgreSQL it says what to use instead and writes nothing.
func TestBackupOnPostgresPointsToPgDump(t *testing.T) {
	out := t.TempDir() + "/b.db"
	cmd := exec.Command(herdBinary(t), "backup", "--data-dir", t.TempDir(), out)
	cmd.Env = append(os.Environ(), pgEnv("postgres://herd@127.0.0.1:1/herd")...)
	b, err := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(b), "pg_dump") {
		t.Errorf("herd backup on postgres: %v\n%s", err, b)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a backup file was written")
	}
}
