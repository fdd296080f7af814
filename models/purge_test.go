package models

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"herd/internal/pgtest"
)

// TestPurgeClaimedOnce: instances that all purge one due delete at once
// (each schedules every delete) remove it exactly once: one PurgeThread
// succeeds, every other finds nothing to remove, and the thread and its
// records are gone. Two stores on one PostgreSQL schema stand for two
// instances, four purges each.
func TestPurgeClaimedOnce(t *testing.T) {
	dsn := pgtest.DSN(t)
	var stores []*Store
	for range 2 {
		s, err := OpenPostgres(dsn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		stores = append(stores, s)
	}
	ctx := context.Background()
	for round := range 5 {
		th, err := stores[0].CreateThread(ctx, "u1", "t")
		if err != nil {
			t.Fatal(err)
		}
		w := stores[0].NewWriter(WriterOptions{})
		var recs []Record
		for range 500 {
			recs = append(recs, Record{Event: &RunEvent{ThreadID: th.ID, EventType: "run.start", Category: "run", Content: JSON(`{"run_id":"r"}`)}})
		}
		if err := w.Write(ctx, recs...); err != nil {
			t.Fatal(err)
		}
		w.Close()
		now := time.Now()
		if err := stores[0].ScheduleThreadDelete(ctx, "u1", th.ID, now); err != nil {
			t.Fatal(err)
		}
		var (
			mu      sync.Mutex
			won     int
			nothing int
			wg      sync.WaitGroup
			start   = make(chan struct{})
		)
		for i := range 8 {
			wg.Go(func() {
				<-start
				err := stores[i%2].PurgeThread(ctx, th.ID, now)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case errors.Is(err, ErrNotFound):
					nothing++
				default:
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		if won != 1 || nothing != 7 {
			t.Fatalf("round %d: %d purges removed the thread, %d found nothing; want 1 and 7", round, won, nothing)
		}
		if evs, _, err := stores[1].Events(ctx, th.ID, EventFilter{}); err != nil || len(evs) != 0 {
			t.Fatalf("round %d: %d events left, %v", round, len(evs), err)
		}
	}
}

// TestPurgeNotDue: a purge by a clock behind the one that scheduled the
// delete is told when the delete is due, not that there is nothing to
// purge, and removes the thread once called at that time.
func TestPurgeNotDue(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s, th, _ := d.newThreadWriter(t)
		ctx := context.Background()
		at := time.Now().Add(time.Minute)
		if err := s.ScheduleThreadDelete(ctx, "u1", th.ID, at); err != nil {
			t.Fatal(err)
		}
		var early *NotDueError
		if err := s.PurgeThread(ctx, th.ID, time.Now()); !errors.As(err, &early) || early.At.Sub(at).Abs() > time.Millisecond {
			t.Fatalf("purge before the delete is due: %v, want NotDueError at %v", err, at)
		}
		if err := s.PurgeThread(ctx, th.ID, early.At); err != nil {
			t.Fatalf("purge at the time it named: %v", err)
		}
		if err := s.PurgeThread(ctx, th.ID, early.At); !errors.Is(err, ErrNotFound) {
			t.Fatalf("purge of a purged thread: %v, want ErrNotFound", err)
		}
	})
}
