package server

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"herd/models"
	"herd/server/hub"
)

// TestRestoredBackupResyncs restores a backup as docs/OPERATIONS.md says
// (stop, put the copy in place, start) under a tab that saw more than the
// backup holds, then writes past the tab's cursor: the tab resuming with
// its cursor and its page's restore generation gets a resync, not the
// records after its cursor, which continue another history. A page of
// the restored database resumes as before, and so does a tab that sends
// no generation (a page from an older herd).
func TestRestoredBackupResyncs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := newApp(t, inDir(dir))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	u.startRun(th, "before the backup")
	a.waitIdle(th)
	backup := filepath.Join(t.TempDir(), "backup.db")
	if err := models.Backup(ctx, a.dbPath, backup); err != nil {
		t.Fatal(err)
	}
	u.startRun(th, "after the backup")
	a.waitIdle(th)
	// The tab: the cursor and generation its page was made with.
	var tab struct {
		LastSeq    int64  `json:"last_seq"`
		Generation string `json:"restore_generation"`
	}
	u.mustJSON("GET", "/api/threads/"+th, nil, 200, &tab)
	if tab.Generation != a.hub.Generation() || tab.Generation == "" {
		t.Fatalf("the thread says restore_generation %q, the hub %q", tab.Generation, a.hub.Generation())
	}
	a.close()

	restoreBackup(t, backup, a.dbPath)
	b := newApp(t, inDir(dir))
	if b.hub.Generation() == tab.Generation {
		t.Fatalf("the restored database kept generation %s", tab.Generation)
	}
	ub := b.signIn("ann@example.com")
	restored := b.lastSeq(th)
	if restored >= tab.LastSeq {
		t.Fatalf("the backup ends at seq %d, the tab at %d: the backup holds what the tab saw", restored, tab.LastSeq)
	}
	for b.lastSeq(th) <= tab.LastSeq {
		ub.startRun(th, "after the restore")
		b.waitIdle(th)
	}
	end := b.lastSeq(th)

	t.Run("the old generation gets a resync", func(t *testing.T) {
		conn, err := ub.dialFrom(th, hub.Cursor{Seq: tab.LastSeq, Generation: tab.Generation})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		f, err := readFrame(conn, 5*time.Second)
		if err != nil || f.Type != hub.FrameResync || f.Seq != nil {
			t.Fatalf("first frame %+v, %v; want a resync, no record after seq %d", f, err, tab.LastSeq)
		}
		var d struct {
			LastSeq    int64  `json:"last_seq"`
			Generation string `json:"restore_generation"`
		}
		if err := json.Unmarshal(f.Data, &d); err != nil || d.LastSeq != end || d.Generation != b.hub.Generation() {
			t.Fatalf("resync data %s, want last_seq %d and restore_generation %s", f.Data, end, b.hub.Generation())
		}
		// The stream goes on from the thread's end: the next run's
		// records, and none of those the tab's cursor was past.
		ub.startRun(th, "once more")
		seqs, err := collect(conn, end+1, 10*time.Second)
		if err != nil || len(seqs) == 0 || seqs[0] != end+1 {
			t.Fatalf("after the resync got %v, %v; want from seq %d", seqs, err, end+1)
		}
		b.waitIdle(th)
	})
	for _, c := range []struct{ name, generation string }{
		{"the current generation resumes", b.hub.Generation()},
		{"no generation resumes as before", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := ub.dialFrom(th, hub.Cursor{Seq: tab.LastSeq, Generation: c.generation})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if f, err := readFrame(conn, 5*time.Second); err != nil || f.Seq == nil || *f.Seq != tab.LastSeq+1 {
				t.Fatalf("first frame %+v, %v; want the record at seq %d", f, err, tab.LastSeq+1)
			}
		})
	}
}

// restoreBackup puts a backup in place of the database at path, as
// docs/OPERATIONS.md says: herd stopped, the WAL of the database it
// replaces gone with it.
func restoreBackup(t *testing.T, backup, path string) {
	t.Helper()
	for _, f := range []string{path + "-wal", path + "-shm"} {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (a *testApp) lastSeq(threadID string) int64 {
	a.t.Helper()
	last, err := a.store.LastSeq(context.Background(), threadID)
	if err != nil {
		a.t.Fatal(err)
	}
	return last
}
