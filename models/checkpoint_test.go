package models

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestWriterCheckpointsBesideIt: while a Writer is open, WAL checkpoints
// run on a reader connection after commits, and every read still sees
// every committed write; Close gives the connection SQLite's automatic
// checkpoint back.
func TestWriterCheckpointsBesideIt(t *testing.T) {
	s, th, w := newThreadWriter(t)
	ctx := context.Background()
	if got, _ := s.pragma(ctx, "wal_autocheckpoint"); got != fmt.Sprint(backstopCheckpointPages) {
		t.Errorf("wal_autocheckpoint with a Writer open = %s, want the %d-page backstop", got, backstopCheckpointPages)
	}
	// Long enough for several background checkpoints (one per 100 ms at
	// most), each of which must leave the reader connection it used free
	// of any snapshot: a stale one shows as a smaller last_seq.
	deadline := time.Now().Add(350 * time.Millisecond)
	for i := int64(1); i <= 300 || time.Now().Before(deadline); i++ {
		if err := w.Write(ctx, Record{Event: &RunEvent{ThreadID: th.ID, EventType: "run.start", Category: CategoryRun}}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.LastSeq(ctx, th.ID); err != nil || got != i {
			t.Fatalf("after %d committed writes a read sees last_seq %d (%v): a checkpoint left a stale snapshot", i, got, err)
		}
	}
	w.Close()
	if got, _ := s.pragma(ctx, "wal_autocheckpoint"); got != "1000" {
		t.Errorf("wal_autocheckpoint after Close = %s, want SQLite's default 1000", got)
	}
}
