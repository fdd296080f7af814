package models

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestClaimRunOneActive: the database refuses a second running run in a
// thread, on both engines, and frees the thread once the run ends or is
// abandoned.
func TestClaimRunOneActive(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s, th, w := d.newThreadWriter(t)
		ctx := context.Background()
		run := func(id string) *Run {
			return &Run{ID: id, ThreadID: th.ID, UserID: "u1", Status: RunRunning, ModelName: "m", StartedAt: time.Now(), InstanceID: "a"}
		}
		if err := s.ClaimRun(ctx, run("r1"), 0); err != nil {
			t.Fatal(err)
		}
		if err := s.ClaimRun(ctx, run("r2"), 0); !errors.Is(err, ErrConflict) {
			t.Fatalf("second claim: %v, want ErrConflict", err)
		}
		// The Writer's upsert of the claimed run keeps its owner.
		r1 := run("r1")
		r1.InstanceID = ""
		if err := w.Write(ctx, Record{Run: r1}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Run(ctx, th.ID, "r1")
		if err != nil || got.InstanceID != "a" {
			t.Fatalf("run after the writer's upsert: %+v, %v; want owner a", got, err)
		}
		end := time.Now()
		r1.Status, r1.EndedAt = RunCompleted, &end
		if err := w.Write(ctx, Record{Run: r1}); err != nil {
			t.Fatal(err)
		}
		if err := s.ClaimRun(ctx, run("r3"), 0); err != nil {
			t.Fatalf("claim after the run ended: %v", err)
		}
		if err := s.AbandonRun(ctx, "r3"); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Run(ctx, th.ID, "r3"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("abandoned run: %+v, %v; want it gone", got, err)
		}
		if err := s.ClaimRun(ctx, run("r4"), 0); err != nil {
			t.Fatalf("claim after an abandoned run: %v", err)
		}
	})
}

// TestInstanceLeases: an instance whose lease expired loses its runs to
// the first survivor that sweeps, exactly once however many sweep at
// once; a live instance's runs are never taken; the dead instance learns
// it lost its lease when it next renews.
func TestInstanceLeases(t *testing.T) {
	s, th, _ := drivers[1].newThreadWriter(t)
	ctx := context.Background()
	th2, err := s.CreateThread(ctx, "u1", "t2")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterInstance(ctx, "dead", "10.0.0.1:8080", time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"live", "s1", "s2", "s3"} {
		if err := s.RegisterInstance(ctx, id, "", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(id, thread, owner string) {
		t.Helper()
		if err := s.ClaimRun(ctx, &Run{ID: id, ThreadID: thread, UserID: "u1", Status: RunRunning, ModelName: "m", StartedAt: time.Now(), InstanceID: owner}, 0); err != nil {
			t.Fatal(err)
		}
	}
	claim("dead-run", th.ID, "dead")
	claim("live-run", th2.ID, "live")
	if runs, err := s.TakeOrphanRuns(ctx, "s1"); err != nil || len(runs) != 0 {
		t.Fatalf("sweep before the lease expired: %v, %v; want none", runs, err)
	}
	// "dead" stops renewing: its lease ends (a renewal into the past
	// stands for the time passing).
	if err := s.RenewLease(ctx, "dead", -time.Second); err != nil {
		t.Fatal(err)
	}

	var (
		mu    sync.Mutex
		taken = map[string][]string{}
		wg    sync.WaitGroup
	)
	for _, me := range []string{"s1", "s2", "s3"} {
		wg.Go(func() {
			runs, err := s.TakeOrphanRuns(ctx, me)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range runs {
				taken[r.ID] = append(taken[r.ID], me)
			}
		})
	}
	wg.Wait()
	if len(taken) != 1 || len(taken["dead-run"]) != 1 {
		t.Fatalf("taken %v; want dead-run once, live-run never", taken)
	}
	got, err := s.Run(ctx, th.ID, "dead-run")
	if err != nil || got.InstanceID != taken["dead-run"][0] || got.Status != RunRunning {
		t.Fatalf("dead-run after the sweep: %+v, %v", got, err)
	}
	if err := s.RenewLease(ctx, "dead", time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("the dead instance renews: %v, want ErrLeaseLost", err)
	}
	if err := s.RenewLease(ctx, "live", time.Minute); err != nil {
		t.Errorf("a live instance renews: %v", err)
	}
	// A retired instance's open run is an orphan at once.
	if err := s.RetireInstance(ctx, "live"); err != nil {
		t.Fatal(err)
	}
	if runs, err := s.TakeOrphanRuns(ctx, "s2"); err != nil || len(runs) != 1 || runs[0].ID != "live-run" {
		t.Fatalf("sweep after live retired: %v, %v; want live-run", runs, err)
	}
	is, err := s.Instances(ctx)
	if err != nil || len(is) != 3 {
		t.Errorf("instances %v, %v; want s1, s2, s3", is, err)
	}
	if err := s.RenewLease(ctx, "s3", -time.Second); err != nil {
		t.Fatal(err)
	}
	if live, err := s.LiveInstances(ctx); err != nil || len(live) != 2 || live[0].ID != "s1" || live[1].ID != "s2" {
		t.Errorf("live instances %v, %v; want s1, s2", live, err)
	}
}

// TestClaimRunPerUser: a user's running runs are counted in the database,
// across threads (and so across instances): claims beyond the limit are
// refused, even when they race, and an ended run frees a place.
func TestClaimRunPerUser(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s := d.newStore(t)
		ctx := context.Background()
		const limit = 3
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			claimed []string
			refused int
		)
		for i := range 8 {
			th, err := s.CreateThread(ctx, "u1", "t")
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				id := fmt.Sprintf("r%d", i)
				err := s.ClaimRun(ctx, &Run{ID: id, ThreadID: th.ID, UserID: "u1", Status: RunRunning, ModelName: "m", StartedAt: time.Now()}, limit)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					claimed = append(claimed, id)
				case errors.Is(err, ErrTooManyRuns):
					refused++
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if len(claimed) != limit || refused != 8-limit {
			t.Fatalf("claimed %v, refused %d; want %d claimed", claimed, refused, limit)
		}
		th, err := s.CreateThread(ctx, "u2", "t")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.ClaimRun(ctx, &Run{ID: "other", ThreadID: th.ID, UserID: "u2", Status: RunRunning, ModelName: "m", StartedAt: time.Now()}, limit); err != nil {
			t.Errorf("another user's claim: %v", err)
		}
		if err := s.AbandonRun(ctx, claimed[0]); err != nil {
			t.Fatal(err)
		}
		th, err = s.CreateThread(ctx, "u1", "t")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.ClaimRun(ctx, &Run{ID: "again", ThreadID: th.ID, UserID: "u1", Status: RunRunning, ModelName: "m", StartedAt: time.Now()}, limit); err != nil {
			t.Errorf("a claim after a run ended: %v", err)
		}
	})
}
