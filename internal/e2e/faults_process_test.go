package e2e

import (
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	_ "github.com/mattn/go-sqlite3"
)

// smallDisk mounts a tmpfs of size bytes for the test: a disk that can
// really fill up. It needs root (CI runs as root); elsewhere it skips.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root (CI runs this test as root)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes a file until the disk is full and returns its removal.
func fill(t *testing.T, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			break
		}
	}
	_ = f.Close()
	return func() {
		if err := os.Remove(path); err != nil {
			t.Error(err)
		}
	}
}

// A full disk mid-run: readiness turns 503 within its deadline, new runs
// are refused with the reason, and once space returns — without a restart
// — the in-flight run's terminal rows are committed and a live client sees
// run.end.
func TestDiskFullMidRun(t *testing.T) {
	t.Parallel()
	disk := smallDisk(t, "48m")
	p := startHerd(t, filepath.Join(disk, "data"))
	c := p.signIn()
	th := runningSubagents(c)
	conn := dialThread(t, p, c, th)
	runEnd := make(chan struct{})
	go func() {
		defer close(runEnd)
		for {
			_, raw, err := conn.ReadMessage()
			if err != nil {
				return
			}
			var f struct{ Type string }
			_ = json.Unmarshal(raw, &f)
			if f.Type == "run.end" {
				return
			}
		}
	}()

	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	truncateWAL(t, filepath.Join(disk, "data", "herd.db"))
	free := fill(t, disk)
	start := time.Now()
	resp, err := hc.Get(p.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || time.Since(start) > 2*time.Second || !strings.Contains(string(body), "the disk is full") {
		t.Errorf("readyz on a full disk: %d after %v: %s; want 503 naming the full disk within 2 s", resp.StatusCode, time.Since(start), body)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Error("readyz 503 without Retry-After")
	}

	if !p.log.waitFor(`store: cannot write; keeping the records and retrying until it can" reason="the disk is full"`, 20*time.Second) {
		t.Fatalf("the writer never met the full disk:\n%s", p.log.String())
	}
	// The subagents finish meanwhile; their ends cannot be written yet.
	for deadline := time.Now().Add(30 * time.Second); p.metric(`herd_subagents{status="queued"}`)+p.metric(`herd_subagents{status="running"}`) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the subagents never ended on the full disk:\n%s", p.log.String())
		}
	}
	select {
	case <-runEnd:
		t.Fatal("a live client saw run.end before it could be committed")
	default:
	}

	free()
	select {
	case <-runEnd:
	case <-time.After(30 * time.Second):
		t.Fatalf("no run.end reached the live client after space returned:\n%s", p.log.String())
	}
	if resp, err := hc.Get(p.url + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("readyz after space returned: %v", err)
	} else {
		resp.Body.Close()
	}
	if !strings.Contains(p.log.String(), "store: writing again") {
		t.Errorf("the writer never reported a fault and its recovery:\n%s", p.log.String())
	}
	var state threadState
	c.call("GET", "/api/threads/"+th, nil, &state)
	if state.Active != nil {
		t.Error("the run is still active after space returned")
	}
	for _, task := range state.Tasks {
		if task.Status == "queued" || task.Status == "running" {
			t.Errorf("card %s still %s", task.TaskID, task.Status)
		}
	}
	var page eventPage
	c.call("GET", "/api/threads/"+th+"/events?limit=1000", nil, &page)
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
		t.Errorf("after recovery: run.end ×%d, ends for %d tasks; want 1 and 3", runEnds, len(ends))
	}
	stopHerd(t, p)
}

// truncateWAL checkpoints the database's write-ahead log and cuts it to
// nothing, from outside the process (SQLite locks across processes). A
// checkpointed WAL otherwise keeps its size and takes the next commits in
// place, without a new byte of disk: a full disk would stop the writer
// only once it outgrew the old file, perhaps after the run ended.
func truncateWAL(t *testing.T, dbPath string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var busy, frames, copied int
	if err := db.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &copied); err != nil || busy != 0 {
		t.Fatalf("truncate the WAL: %v (busy %d)", err, busy)
	}
}

// dialThread opens the thread's WebSocket as the signed-in client.
func dialThread(t *testing.T, p *proc, c *client, threadID string) *websocket.Conn {
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
