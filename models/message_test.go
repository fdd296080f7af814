package models

import (
	"context"
	"errors"
	"testing"
)

// TestMessageAndReplacedRuns reads one message by id, only within its
// thread, and a run's RetryOf and EditOf back, on both drivers.
func TestMessageAndReplacedRuns(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s, th, w := d.newThreadWriter(t)
		ctx := context.Background()
		m := &Message{ID: "00000000-0000-0000-0000-000000000001", ThreadID: th.ID, RunID: "r2", Type: "human", Content: "hi"}
		err := w.Write(ctx,
			Record{Run: &Run{ID: "r1", ThreadID: th.ID, UserID: th.UserID, Status: RunFailed, ModelName: "m"}},
			Record{Run: &Run{ID: "r2", ThreadID: th.ID, UserID: th.UserID, Status: RunRunning, ModelName: "m", RetryOf: "r1"}},
			Record{Message: m},
		)
		if err != nil {
			t.Fatal(err)
		}
		// The run's end rewrites its row; what it replaced stays.
		if err := w.Write(ctx, Record{Run: &Run{ID: "r2", ThreadID: th.ID, UserID: th.UserID, Status: RunCompleted, ModelName: "m", RetryOf: "r1"}}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Message(ctx, th.ID, m.ID); err != nil || got.Content != "hi" || got.RunID != "r2" {
			t.Errorf("Message = %+v, %v", got, err)
		}
		if _, err := s.Message(ctx, "00000000-0000-0000-0000-00000000ffff", m.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Message of another thread: %v, want ErrNotFound", err)
		}
		runs, err := s.Runs(ctx, th.ID)
		if err != nil || len(runs) != 2 || runs[1].RetryOf != "r1" || runs[1].Status != RunCompleted || runs[0].RetryOf != "" {
			t.Errorf("Runs = %+v, %v", runs, err)
		}
	})
}
