package models

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"herd/internal/pgtest"
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
		if err := s.AbandonRun(ctx, "r3", Fence{}); err != nil {
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
	epochs := map[string]int64{}
	for _, id := range []string{"dead", "live", "s1", "s2", "s3"} {
		e, err := s.RegisterInstance(ctx, id, "10.0.0.1:8080", time.Minute)
		if err != nil || e <= 0 {
			t.Fatal(e, err)
		}
		epochs[id] = e
	}
	claim := func(id, thread, owner string) {
		t.Helper()
		if err := s.ClaimRun(ctx, &Run{ID: id, ThreadID: thread, UserID: "u1", Status: RunRunning, ModelName: "m", StartedAt: time.Now(), InstanceID: owner, LeaseEpoch: epochs[owner]}, 0); err != nil {
			t.Fatal(err)
		}
	}
	claim("dead-run", th.ID, "dead")
	claim("live-run", th2.ID, "live")
	if runs, err := s.TakeOrphanRuns(ctx, "s1", epochs["s1"], 0); err != nil || len(runs) != 0 {
		t.Fatalf("sweep before the lease expired: %v, %v; want none", runs, err)
	}
	// "dead" stops renewing: its lease ends (a renewal into the past
	// stands for the time passing).
	if err := s.RenewLease(ctx, "dead", epochs["dead"], -time.Second); err != nil {
		t.Fatal(err)
	}
	// A database that has not been up for the settling time judges no
	// lease: its instances may not have had the time to renew.
	if runs, err := s.TakeOrphanRuns(ctx, "s1", epochs["s1"], 100*365*24*time.Hour); err != nil || len(runs) != 0 {
		t.Fatalf("sweep while the database settles: %v, %v; want none", runs, err)
	}

	var (
		mu    sync.Mutex
		taken = map[string][]string{}
		wg    sync.WaitGroup
	)
	for _, me := range []string{"s1", "s2", "s3"} {
		wg.Go(func() {
			runs, err := s.TakeOrphanRuns(ctx, me, epochs[me], 0)
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
	if got.LeaseEpoch != epochs[taken["dead-run"][0]] {
		t.Errorf("dead-run's epoch %d after the sweep; want its new owner's %d", got.LeaseEpoch, epochs[taken["dead-run"][0]])
	}
	if err := s.RenewLease(ctx, "dead", epochs["dead"], time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("the dead instance renews: %v, want ErrLeaseLost", err)
	}
	if err := s.RenewLease(ctx, "live", epochs["live"]-1, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("a renewal under an older epoch: %v, want ErrLeaseLost", err)
	}
	if err := s.RenewLease(ctx, "live", epochs["live"], time.Minute); err != nil {
		t.Errorf("a live instance renews: %v", err)
	}
	// A retired instance's open run is an orphan at once.
	if err := s.RetireInstance(ctx, "live"); err != nil {
		t.Fatal(err)
	}
	if runs, err := s.TakeOrphanRuns(ctx, "s2", epochs["s2"], 0); err != nil || len(runs) != 1 || runs[0].ID != "live-run" {
		t.Fatalf("sweep after live retired: %v, %v; want live-run", runs, err)
	}
	is, err := s.Instances(ctx)
	if err != nil || len(is) != 3 {
		t.Errorf("instances %v, %v; want s1, s2, s3", is, err)
	}
	if err := s.RenewLease(ctx, "s3", epochs["s3"], -time.Second); err != nil {
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
		if err := s.AbandonRun(ctx, claimed[0], Fence{}); err != nil {
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

// TestExpiredLeaseRenewedUntilTaken: an expired lease that no instance
// has taken over renews (an outage of the database is not a death), and
// a rejoin takes a new epoch, which orphans the runs of the old one.
func TestExpiredLeaseRenewedUntilTaken(t *testing.T) {
	s, th, _ := drivers[1].newThreadWriter(t)
	ctx := context.Background()
	e1, err := s.RegisterInstance(ctx, "a", "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RenewLease(ctx, "a", e1, -time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.RenewLease(ctx, "a", e1, time.Minute); err != nil {
		t.Fatalf("an expired lease nobody took: %v, want renewed", err)
	}
	if err := s.ClaimRun(ctx, &Run{ID: "r", ThreadID: th.ID, UserID: "u1", Status: RunRunning, ModelName: "m", StartedAt: time.Now(), InstanceID: "a", LeaseEpoch: e1}, 0); err != nil {
		t.Fatal(err)
	}
	e2, err := s.RegisterInstance(ctx, "a", "", time.Minute)
	if err != nil || e2 <= e1 {
		t.Fatalf("rejoin: epoch %d after %d, %v", e2, e1, err)
	}
	runs, err := s.TakeOrphanRuns(ctx, "a", e2, 0)
	if err != nil || len(runs) != 1 || runs[0].LeaseEpoch != e2 {
		t.Fatalf("the old epoch's run after a rejoin: %+v, %v; want taken under the new epoch", runs, err)
	}
}

// TestWriterFenced: once another instance has taken a run over, the
// first instance's writer commits nothing of it (the records fail with
// ErrFenced and OnFenced hears of it) while its other runs' records
// commit; a claim under a lost lease is refused.
func TestWriterFenced(t *testing.T) {
	dsn := pgtest.DSN(t)
	open := func() *Store {
		s, err := OpenPostgres(dsn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open(), open()
	ctx := context.Background()
	var fa Fence
	ea, err := a.RegisterInstance(ctx, "a", "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := b.RegisterInstance(ctx, "b", "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fa = Fence{Instance: "a", Epoch: ea}
	fencedRuns := make(chan []string, 4)
	w := a.NewWriter(WriterOptions{Fence: func() Fence { return fa }, OnFenced: func(runs []string) { fencedRuns <- runs }})
	defer w.Close()
	var threads []*Thread
	for i := range 2 {
		th, err := a.CreateThread(ctx, "u1", fmt.Sprint("t", i))
		if err != nil {
			t.Fatal(err)
		}
		threads = append(threads, th)
		r := &Run{ID: fmt.Sprint("r", i), ThreadID: th.ID, UserID: "u1", Status: RunRunning, ModelName: "m", StartedAt: time.Now(), InstanceID: "a", LeaseEpoch: ea}
		if err := a.ClaimRun(ctx, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	ev := func(i int, typ string) Record {
		return Record{Event: &RunEvent{ThreadID: threads[i].ID, RunID: fmt.Sprint("r", i), EventType: typ, Category: CategoryRun}}
	}
	if err := w.Write(ctx, ev(0, "run.start"), ev(1, "run.start")); err != nil {
		t.Fatal(err)
	}
	// a's lease runs out; b takes over.
	if err := a.RenewLease(ctx, "a", ea, -time.Second); err != nil {
		t.Fatal(err)
	}
	runs, err := b.TakeOrphanRuns(ctx, "b", eb, 0)
	if err != nil || len(runs) != 2 {
		t.Fatalf("takeover: %v, %v", runs, err)
	}
	// A run a still owns: none now. Give r1 back to a by hand, to see a
	// batch split: r0's records refused, r1's committed.
	if err := a.direct(ctx).Exec("INSERT INTO instances (id, addr, started_at, expires_at, epoch) VALUES ('a', '', now(), now() + interval '1 minute', ?)", ea).Error; err != nil {
		t.Fatal(err)
	}
	if err := a.direct(ctx).Exec("UPDATE runs SET instance_id = 'a', lease_epoch = ? WHERE id = 'r1'", ea).Error; err != nil {
		t.Fatal(err)
	}
	end0 := make(chan error, 1)
	go func() { end0 <- w.Write(ctx, ev(0, "run.end")) }()
	if err := w.Write(ctx, ev(1, "run.end")); err != nil {
		t.Errorf("a run still owned: %v", err)
	}
	if err := <-end0; !errors.Is(err, ErrFenced) {
		t.Errorf("a run taken over: %v, want ErrFenced", err)
	}
	if got := <-fencedRuns; len(got) != 1 || got[0] != "r0" {
		t.Errorf("OnFenced heard %v; want [r0]", got)
	}
	for i, want := range []int64{1, 2} {
		if seq, err := a.LastSeq(ctx, threads[i].ID); err != nil || seq != want {
			t.Errorf("thread %d: last seq %d, %v; want %d (nothing of a fenced run, no gap)", i, seq, err, want)
		}
	}
	// A claim under a lease that is gone is refused.
	th, err := a.CreateThread(ctx, "u1", "t3")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.ClaimRun(ctx, &Run{ID: "r3", ThreadID: th.ID, UserID: "u1", Status: RunRunning, ModelName: "m", StartedAt: time.Now(), InstanceID: "a", LeaseEpoch: ea - 1}, 0); !errors.Is(err, ErrFenced) {
		t.Errorf("a claim under a lost lease: %v, want ErrFenced", err)
	}
}
