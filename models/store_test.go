package models

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"herd/internal/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// newStore opens a fresh SQLite store, for the tests of what only SQLite
// has (pragmas, file modes, backups).
func newStore(t testing.TB) *Store { return drivers[0].newStore(t) }

// newThreadWriter is newStore with one thread of user u1 and a Writer.
func newThreadWriter(t testing.TB) (*Store, *Thread, *Writer) { return drivers[0].newThreadWriter(t) }

func TestOpenPragmas(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	for _, tc := range []struct{ pragma, want string }{
		{"journal_mode", "wal"},
		{"busy_timeout", "5000"},
		{"foreign_keys", "1"},
		{"synchronous", "1"}, // NORMAL
	} {
		got, err := s.pragma(ctx, tc.pragma)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("PRAGMA %s = %q, want %q", tc.pragma, got, tc.want)
		}
	}
	var mode string
	if err := s.r.Raw("PRAGMA journal_mode").Scan(&mode).Error; err != nil || mode != "wal" {
		t.Errorf("reader journal_mode = %q, %v; want wal", mode, err)
	}
	if err := s.Probe(ctx); err != nil {
		t.Errorf("probe: %v", err)
	}
}

func TestWriterSequenceUnderConcurrency(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s := d.newStore(t)
		ctx := context.Background()
		th1, _ := s.CreateThread(ctx, "u1", "a")
		th2, _ := s.CreateThread(ctx, "u1", "b")

		var (
			mu        sync.Mutex
			broadcast = map[string][]int64{}
		)
		w := s.NewWriter(WriterOptions{OnCommit: func(recs []Record) {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range recs {
				broadcast[r.ThreadID()] = append(broadcast[r.ThreadID()], r.Seq())
			}
		}})
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 100 {
					th := th1.ID
					if (g+i)%2 == 0 {
						th = th2.ID
					}
					var err error
					if i%3 == 0 {
						err = w.Write(ctx, Record{Message: &Message{ID: fmt.Sprintf("m-%d-%d", g, i), ThreadID: th, Type: "human", Content: "x"}})
					} else {
						err = w.Enqueue(ctx, Record{Event: &RunEvent{ThreadID: th, EventType: "subagent.step", Category: CategorySubagent, TaskID: "t"}})
					}
					if err != nil {
						t.Errorf("write: %v", err)
					}
				}
			})
		}
		wg.Wait()
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		w.Close()

		for _, th := range []*Thread{th1, th2} {
			got := broadcast[th.ID]
			if len(got) != 400 {
				t.Fatalf("thread %s: %d records broadcast, want 400", th.Title, len(got))
			}
			for i, seq := range got {
				if seq != int64(i+1) {
					t.Fatalf("thread %s: broadcast[%d] seq = %d, want %d (gap, duplicate or out of order)", th.Title, i, seq, i+1)
				}
			}
			recs, err := s.Since(ctx, th.ID, 0, 10000)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range recs {
				if r.Seq() != int64(i+1) {
					t.Fatalf("stored seq[%d] = %d, want %d", i, r.Seq(), i+1)
				}
			}
			last, _ := s.LastSeq(ctx, th.ID)
			if last != 400 || len(recs) != 400 {
				t.Errorf("last_seq = %d, stored = %d; want 400, 400", last, len(recs))
			}
		}
	})
}

func TestWriterDeletedThread(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s := d.newStore(t)
		ctx := context.Background()
		th, _ := s.CreateThread(ctx, "u1", "a")
		other, _ := s.CreateThread(ctx, "u1", "b")
		w := s.NewWriter(WriterOptions{})
		defer w.Close()
		if err := s.DeleteThread(ctx, "u1", th.ID); err != nil {
			t.Fatal(err)
		}
		err := w.Write(ctx, Record{Event: &RunEvent{ThreadID: th.ID, EventType: "run.start", Category: CategoryRun}})
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("write to deleted thread: err = %v, want ErrNotFound", err)
		}
		if err := w.Write(ctx, Record{Event: &RunEvent{ThreadID: other.ID, EventType: "run.start", Category: CategoryRun}}); err != nil {
			t.Errorf("write to live thread: %v", err)
		}
		if n, _ := s.LastSeq(ctx, other.ID); n != 1 {
			t.Errorf("other thread last_seq = %d, want 1", n)
		}
		// One transaction over both threads and a third (on PostgreSQL
		// their reservations go out in one round trip): the live threads
		// get their next seqs, the deleted one's records are refused.
		third, _ := s.CreateThread(ctx, "u1", "c")
		ev := func(id string) Record {
			return Record{Event: &RunEvent{ThreadID: id, EventType: "run.start", Category: CategoryRun}}
		}
		recs := []Record{ev(other.ID), ev(th.ID), ev(third.ID), ev(other.ID)}
		err = w.Write(ctx, recs...)
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("a batch with a deleted thread: err = %v, want ErrNotFound", err)
		}
		for i, want := range []int64{2, 0, 1, 3} {
			if got := recs[i].Seq(); got != want {
				t.Errorf("record %d: seq %d, want %d", i, got, want)
			}
		}
		if n, _ := s.LastSeq(ctx, other.ID); n != 3 {
			t.Errorf("other thread last_seq = %d, want 3", n)
		}
	})
}

// TestWriterOneBadJobFailsAlone: a record the database refuses (here a
// message id used twice) fails its own job only. The batch it was
// gathered into is retried job by job, the others commit with gap-free
// seqs, and the writer can write afterwards (on PostgreSQL the connection
// the failed pipeline left in its transaction is replaced).
func TestWriterOneBadJobFailsAlone(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s := d.newStore(t)
		ctx := context.Background()
		th, err := s.CreateThread(ctx, "u1", "t")
		if err != nil {
			t.Fatal(err)
		}
		// The first commit's OnCommit holds the writer until the three
		// jobs are queued, so that they are gathered into one batch.
		entered, gate := make(chan struct{}), make(chan struct{})
		var once sync.Once
		w := s.NewWriter(WriterOptions{Backoff: []time.Duration{time.Millisecond}, OnCommit: func([]Record) {
			once.Do(func() { close(entered); <-gate })
		}})
		defer w.Close()
		msg := func(id string) Record {
			return Record{Message: &Message{ID: id, ThreadID: th.ID, Type: "human", Content: id}}
		}
		first := make(chan error, 1)
		go func() { first <- w.Write(ctx, msg("m1")) }()
		<-entered
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for i, id := range []string{"m2", "m1", "m3"} { // the middle one repeats m1
			wg.Go(func() { errs[i] = w.Write(ctx, msg(id)) })
		}
		for deadline := time.Now().Add(10 * time.Second); w.QueueLen() < 3 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		close(gate)
		wg.Wait()
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if errs[0] != nil || errs[2] != nil {
			t.Fatalf("the good jobs failed: %v, %v", errs[0], errs[2])
		}
		if errs[1] == nil {
			t.Fatal("a repeated message id was accepted")
		}
		if err := w.Write(ctx, msg("m4")); err != nil {
			t.Fatalf("a write after the failure: %v", err)
		}
		msgs, err := s.Messages(ctx, th.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, m := range msgs {
			got = append(got, m.ID)
			if i > 0 && m.Seq != msgs[i-1].Seq+1 {
				t.Errorf("seq %d after %d: not gap-free", m.Seq, msgs[i-1].Seq)
			}
		}
		slices.Sort(got) // m2 and m3 were queued in either order
		if want := []string{"m1", "m2", "m3", "m4"}; !slices.Equal(got, want) {
			t.Errorf("messages %v, want %v", got, want)
		}
	})
}

func TestUsageLedgerIdempotent(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s := d.newStore(t)
		ctx := context.Background()
		th, _ := s.CreateThread(ctx, "u1", "a")
		w := s.NewWriter(WriterOptions{})
		defer w.Close()
		lead := UsageEntry{CallID: "c1", ThreadID: th.ID, RunID: "r1", ModelName: "m1", InputTokens: 10, OutputTokens: 5, TotalTokens: 15}
		sub := UsageEntry{CallID: "c2", ThreadID: th.ID, RunID: "r1", TaskID: "t1", ModelName: "m2", InputTokens: 100, OutputTokens: 50, TotalTokens: 150, CacheReadTokens: 7}
		for range 3 {
			l, su := lead, sub
			if err := w.Write(ctx, Record{Usage: &l}, Record{Usage: &su}); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := s.Usage(ctx, th.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if rep.Total.TotalTokens != 165 || rep.Lead.TotalTokens != 15 || rep.Subagents.TotalTokens != 150 || rep.Total.Calls != 2 {
			t.Errorf("usage = %+v, want total 165 (lead 15, subagents 150) over 2 calls", rep)
		}
		if rep.ByModel["m2"].CacheReadTokens != 7 {
			t.Errorf("by model m2 = %+v, want cache read 7", rep.ByModel["m2"])
		}
	})
}

// TestUsageByRun: a thread's ledger per run, each run's calls per herd
// model (a provider's dated name merges into it; a row from before herd
// models were recorded keeps the provider's), and the calls of no run
// (the title) under "" — in one query, on either database.
func TestUsageByRun(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s := d.newStore(t)
		ctx := context.Background()
		th, _ := s.CreateThread(ctx, "u1", "a")
		w := s.NewWriter(WriterOptions{})
		defer w.Close()
		rows := []UsageEntry{
			{CallID: "c1", ThreadID: th.ID, RunID: "r1", ModelName: "gpt-4o-2024-08-06", HerdModel: "fast", InputTokens: 10, OutputTokens: 5, TotalTokens: 15},
			{CallID: "c2", ThreadID: th.ID, RunID: "r1", ModelName: "gpt-4o", HerdModel: "fast", InputTokens: 1, OutputTokens: 1, TotalTokens: 2},
			{CallID: "c3", ThreadID: th.ID, RunID: "r1", TaskID: "t1", ModelName: "old-name", TotalTokens: 100, InputTokens: 100},
			{CallID: "c4", ThreadID: th.ID, RunID: "r2", TaskID: "t2", ModelName: "x", HerdModel: "deep", Unreported: true},
			{CallID: "c5", ThreadID: th.ID, ModelName: "gpt-4o-2024-08-06", HerdModel: "fast", InputTokens: 70, OutputTokens: 6, TotalTokens: 76},
		}
		for i := range rows {
			if err := w.Write(ctx, Record{Usage: &rows[i]}); err != nil {
				t.Fatal(err)
			}
		}
		per, err := s.UsageByRun(ctx, th.ID)
		if err != nil {
			t.Fatal(err)
		}
		r1, r2, title := per["r1"], per["r2"], per[""]
		if len(per) != 3 || r1.Lead.TotalTokens != 17 || r1.Lead.Calls != 2 || r1.ByModel["fast"].TotalTokens != 17 || r1.ByModel["old-name"].TotalTokens != 100 || len(r1.ByModel) != 2 {
			t.Errorf("run r1 = %+v (of %d groups), want fast's 2 lead calls merged (17) and the old row under its provider's name", r1, len(per))
		}
		if r2.Subagents != (UsageTotals{Calls: 1, UnreportedCalls: 1}) || r2.ByModel["deep"].UnreportedCalls != 1 {
			t.Errorf("run r2 = %+v, want one unreported subagent call of deep", r2)
		}
		if title.Lead.TotalTokens != 76 || title.Total.Calls != 1 || title.ByModel["fast"].TotalTokens != 76 {
			t.Errorf("the calls of no run = %+v, want the title call's 76 under fast", title)
		}
		all, err := s.Usage(ctx, th.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		var sum UsageReport
		for _, rep := range per {
			sum.Merge(rep)
		}
		if !reflect.DeepEqual(all, sum) {
			t.Errorf("the thread's usage %+v is not the sum of its runs' %+v", all, sum)
		}
	})
}

func TestLastAdminProtected(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s := d.newStore(t)
		ctx := context.Background()
		admin, err := s.CreateUser(ctx, "Admin@Example.com", "h", RoleAdmin, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateUser(ctx, "x@example.com", "h", RoleUser, true); !errors.Is(err, ErrConflict) {
			t.Errorf("second set-up user: err = %v, want ErrConflict", err)
		}
		user := RoleUser
		if _, err := s.UpdateUser(ctx, admin.ID, UserUpdate{Role: &user}); !errors.Is(err, ErrLastAdmin) {
			t.Errorf("demote last admin: err = %v, want ErrLastAdmin", err)
		}
		if err := s.DeleteUser(ctx, admin.ID); !errors.Is(err, ErrLastAdmin) {
			t.Errorf("delete last admin: err = %v, want ErrLastAdmin", err)
		}
		if u, err := s.UserByEmail(ctx, " admin@EXAMPLE.com"); err != nil || u.ID != admin.ID {
			t.Errorf("lookup by email is not case-insensitive: %v", err)
		}
	})
}

func TestBackupWhileWriting(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	th, _ := s.CreateThread(ctx, "u1", "a")
	committed := make(chan struct{}, 1)
	w := s.NewWriter(WriterOptions{OnCommit: func([]Record) {
		select {
		case committed <- struct{}{}:
		default:
		}
	}})
	defer w.Close()
	// A call cut by a restart, whose mark the backup must carry.
	must(t, w.Write(ctx, Record{Usage: LostCall(th.ID, th.UserID, "r", "t", "m", "v1.r1")}))
	<-committed
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = w.Write(ctx, Record{Event: &RunEvent{ThreadID: th.ID, EventType: "run.start", Category: CategoryRun}})
		}
	})
	<-committed // the backup runs while writes go on, with some already in
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := Backup(ctx, s.path, path); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if err := Backup(ctx, s.path, path); err == nil {
		t.Error("a backup overwrote an existing file")
	}
	dir := t.TempDir()
	if err := Backup(ctx, filepath.Join(dir, "herd.db"), filepath.Join(dir, "x.db")); err == nil {
		t.Error("a backup of a missing database succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a failed backup left %d files behind", len(entries))
	}
	b, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	last, err := b.LastSeq(ctx, th.ID)
	recs, _ := b.Since(ctx, th.ID, 0, 1<<20)
	if err != nil || last == 0 || int64(len(recs)) != last {
		t.Errorf("backup: last_seq %d, %d records, %v: not a consistent snapshot", last, len(recs), err)
	}
	if u, err := b.Usage(ctx, th.ID, ""); err != nil || u.Total != (UsageTotals{Calls: 1, UnreportedCalls: 1, LostCalls: 1}) {
		t.Errorf("backup's ledger %+v, %v: want the lost call", u.Total, err)
	}
}

func TestSearchThreads(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	for _, title := range []string{"Plan the Launch", "launch review", "100% done", "snake_case names", "other"} {
		if _, err := s.CreateThread(ctx, "u1", title); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateThread(ctx, "u2", "launch of someone else"); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]int{"LAUNCH": 2, "100%": 1, "%": 1, "_": 1, "e_c": 1, "nothing": 0, "": 5} {
		got, err := s.SearchThreads(ctx, "u1", q, 10)
		if err != nil || len(got) != want {
			t.Errorf("search %q: %d threads (%v), want %d", q, len(got), err, want)
		}
	}
}
