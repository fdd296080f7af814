package models

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestCheckpointsKeptUntilRunEnds: a run's checkpoint pieces commit with
// the records beside them, large ones compressed and read back whole, in
// the order written per task; the commit of the run's end deletes them,
// and a thread's delete takes any left.
func TestCheckpointsKeptUntilRunEnds(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s, th, w := d.newThreadWriter(t)
		ctx := context.Background()
		run := &Run{ID: "r1", ThreadID: th.ID, UserID: "u1", Status: RunRunning, ModelName: "m", StartedAt: time.Now()}
		if err := s.ClaimRun(ctx, run, 0); err != nil {
			t.Fatal(err)
		}
		big := []byte(`{"content":"` + strings.Repeat("findings ", 2000) + `"}`)
		step := Record{Event: &RunEvent{ThreadID: th.ID, RunID: "r1", TaskID: "t1", EventType: "subagent.step", Category: CategorySubagent}}
		if err := w.Write(ctx, step, Record{Checkpoint: NewCheckpoint(th.ID, "r1", "t1", 1, []byte(`[1]`))}); err != nil {
			t.Fatal(err)
		}
		if err := w.Write(ctx, Record{Checkpoint: NewCheckpoint(th.ID, "r1", "t1", 1, big)}, Record{Checkpoint: NewCheckpoint(th.ID, "r1", "", 1, []byte(`[3]`))}); err != nil {
			t.Fatal(err)
		}
		cs, err := s.Checkpoints(ctx, "r1")
		if err != nil || len(cs) != 3 {
			t.Fatalf("checkpoints %v, %v; want 3", cs, err)
		}
		var got [][]byte
		for _, c := range cs {
			b, err := c.Data()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, b)
		}
		if string(got[0]) != "[3]" || string(got[1]) != "[1]" || !bytes.Equal(got[2], big) {
			t.Errorf("read back %q…; want the lead's piece, then t1's in order, whole", got[:2])
		}
		if !cs[2].Gzip || len(cs[2].Body) >= len(big)/4 {
			t.Errorf("the large piece: gzip %v, %d bytes for %d", cs[2].Gzip, len(cs[2].Body), len(big))
		}
		// A piece written with the run's end is gone with it too.
		ended := *run
		ended.Status = RunCompleted
		if err := w.Write(ctx, Record{Checkpoint: NewCheckpoint(th.ID, "r1", "t1", 1, []byte(`[4]`))}, Record{Run: &ended}); err != nil {
			t.Fatal(err)
		}
		if cs, err := s.Checkpoints(ctx, "r1"); err != nil || len(cs) != 0 {
			t.Errorf("after the run's end: %d checkpoints, %v; want none", len(cs), err)
		}
		// A thread deleted with a run still open takes its pieces.
		th2, err := s.CreateThread(ctx, "u1", "t2")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(ctx, Record{Checkpoint: NewCheckpoint(th2.ID, "r2", "t", 1, []byte(`[5]`))}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteThread(ctx, "u1", th2.ID); err != nil {
			t.Fatal(err)
		}
		if cs, err := s.Checkpoints(ctx, "r2"); err != nil || len(cs) != 0 {
			t.Errorf("after the thread's delete: %d checkpoints, %v; want none", len(cs), err)
		}
	})
}

// TestDeleteUserTakesCheckpoints: a deleted user's threads leave no
// checkpoint (a run's exact history), as a deleted thread leaves none.
func TestDeleteUserTakesCheckpoints(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s := d.newStore(t)
		ctx := context.Background()
		w := s.NewWriter(WriterOptions{})
		defer w.Close()
		u, _ := s.CreateUser(ctx, "gone@example.com", "h", RoleUser, false)
		th, _ := s.CreateThread(ctx, u.ID, "t")
		if err := w.Write(ctx, Record{Checkpoint: NewCheckpoint(th.ID, "r1", "t1", 1, []byte(`["a secret step"]`))}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteUser(ctx, u.ID); err != nil {
			t.Fatal(err)
		}
		if left, err := s.Checkpoints(ctx, "r1"); err != nil || len(left) != 0 {
			t.Fatalf("checkpoints after the user's delete: %d, %v; want none", len(left), err)
		}
	})
}
