package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"herd/internal/pgtest"
)

// TestRestoreResyncsOldTabs restores a backup the way docs/OPERATIONS.md
// says, on each engine, under a tab that saw more than the backup holds:
// back up, write more (the tab's cursor advances), stop herd, restore,
// start, write past the tab's cursor. The tab resuming with its cursor and
// its page's restore generation gets a resync, not the restored history's
// records; a page of the restored herd resumes from the same cursor as
// before.
func TestRestoreResyncsOldTabs(t *testing.T) {
	for _, engine := range []struct {
		name string
		// env is herd's environment; backup backs the running herd up and
		// returns what restores that backup once herd has stopped.
		env    func(t *testing.T) []string
		backup func(t *testing.T, dataDir string, env []string) (restore func())
	}{
		{"sqlite", func(*testing.T) []string { return nil }, backupSQLite},
		{"postgres", func(t *testing.T) []string { return pgEnv(pgtest.DSN(t)) }, backupPostgres},
	} {
		t.Run(engine.name, func(t *testing.T) {
			dir := t.TempDir()
			// Quick demo models: the runs only write records.
			env := append(engine.env(t), "HERD_MODELS_0_LATENCY_MS=0", "HERD_MODELS_0_CHUNK_MS=0")
			p := startHerdWith(t, dir, env...)
			c := p.signIn()
			var th struct{ ID string }
			c.call("POST", "/api/threads", map[string]string{"title": "restored"}, &th)
			c.send(th.ID, "before the backup")
			restore := engine.backup(t, dir, env)
			c.send(th.ID, "after the backup")
			var tab struct {
				LastSeq    int64  `json:"last_seq"`
				Generation string `json:"restore_generation"`
			}
			c.call("GET", "/api/threads/"+th.ID, nil, &tab)
			stopHerd(t, p)

			restore()
			p2 := startHerdWith(t, dir, env...)
			c2 := p2.signIn()
			var now struct {
				LastSeq    int64  `json:"last_seq"`
				Generation string `json:"restore_generation"`
			}
			c2.call("GET", "/api/threads/"+th.ID, nil, &now)
			if now.LastSeq >= tab.LastSeq {
				t.Fatalf("the restored thread ends at seq %d, the tab at %d: nothing was restored", now.LastSeq, tab.LastSeq)
			}
			for now.LastSeq <= tab.LastSeq {
				c2.send(th.ID, "after the restore")
				c2.call("GET", "/api/threads/"+th.ID, nil, &now)
			}
			if now.Generation == tab.Generation || now.Generation == "" {
				t.Fatalf("restore generation %q before the restore, %q after", tab.Generation, now.Generation)
			}

			typ, seq, data := firstFrame(t, p2, c2, th.ID, tab.LastSeq, tab.Generation)
			var d struct {
				LastSeq    int64  `json:"last_seq"`
				Generation string `json:"restore_generation"`
			}
			_ = json.Unmarshal(data, &d)
			if typ != "resync" || seq != nil || d.LastSeq != now.LastSeq || d.Generation != now.Generation {
				t.Errorf("the old tab's first frame: %s seq %v %s; want resync {last_seq %d, restore_generation %s}", typ, seq, data, now.LastSeq, now.Generation)
			}
			if typ, seq, _ := firstFrame(t, p2, c2, th.ID, tab.LastSeq, now.Generation); seq == nil || *seq != tab.LastSeq+1 {
				t.Errorf("a page of the restored herd: first frame %s seq %v, want the record at seq %d", typ, seq, tab.LastSeq+1)
			}
			stopHerd(t, p2)
		})
	}
}

// firstFrame opens threadID's stream from a cursor, as static/thread.js
// does, and returns the first frame.
func firstFrame(t *testing.T, p *proc, c *client, threadID string, after int64, generation string) (typ string, seq *int64, data json.RawMessage) {
	t.Helper()
	hdr := map[string][]string{"Origin": {p.url}}
	for _, ck := range c.http.Jar.Cookies(mustParse(p.url)) {
		hdr["Cookie"] = append(hdr["Cookie"], ck.Name+"="+ck.Value)
	}
	url := fmt.Sprintf("ws%s/api/threads/%s/stream?after_seq=%d&restore_generation=%s", strings.TrimPrefix(p.url, "http"), threadID, after, generation)
	conn, resp, err := websocket.DefaultDialer.Dial(url, hdr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, raw, err := conn.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Seq  *int64          `json:"seq"`
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return f.Type, f.Seq, f.Data
}

// backupSQLite runs `herd backup` beside the running herd; restoring puts
// the copy in place of herd.db, and the stopped herd's WAL goes with it.
func backupSQLite(t *testing.T, dataDir string, _ []string) func() {
	t.Helper()
	file := filepath.Join(t.TempDir(), "herd-backup.db")
	if code, out := herdCmd(t, t.TempDir(), "backup", "--data-dir", dataDir, file); code != 0 {
		t.Fatalf("herd backup: exit %d\n%s", code, out)
	}
	return func() {
		db := filepath.Join(dataDir, "herd.db")
		for _, f := range []string{db + "-wal", db + "-shm"} {
			if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(db, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// backupPostgres runs pg_dump beside the running herd; restoring is
// pg_restore --clean, as docs/OPERATIONS.md says.
func backupPostgres(t *testing.T, _ string, env []string) func() {
	t.Helper()
	var dsn string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HERD_DATABASE_DSN="); ok {
			dsn = v
		}
	}
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// libpq knows no search_path keyword: the tools name the schema.
	conninfo := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cc.Host, cc.Port, cc.User, cc.Database)
	if cc.Password != "" {
		conninfo += " password=" + cc.Password
	}
	file := filepath.Join(t.TempDir(), "herd.dump")
	pgRun(t, "pg_dump", "--format=custom", "--schema="+cc.RuntimeParams["search_path"], "--file", file, conninfo)
	return func() { pgRun(t, "pg_restore", "--clean", "--if-exists", "--dbname", conninfo, file) }
}

// pgRun runs a PostgreSQL client tool; without it the test skips, except
// in CI, where it fails (as pgtest does without a server).
func pgRun(t *testing.T, tool string, args ...string) {
	t.Helper()
	path, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s: %v", tool, err)
		}
		t.Skipf("%s: %v", tool, err)
	}
	if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", tool, err, out)
	}
}
