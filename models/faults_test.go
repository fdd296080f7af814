package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// injectFault makes every insert into run_events fail while the fault
// table holds a row: a real database error inside the writer's
// transaction.
func injectFault(t *testing.T, s *Store) (on, off func()) {
	t.Helper()
	return faultTrigger(t, s, "herd_fault", "'injected write fault'")
}

// faultTrigger creates table and a trigger that fails every insert into
// run_events with raise while table holds a row; on adds the row, off
// removes it. raise is SQLite's RAISE(ABORT, …) message, or PostgreSQL's
// RAISE EXCEPTION arguments.
func faultTrigger(t *testing.T, s *Store, table, raise string) (on, off func()) {
	t.Helper()
	qs := []string{
		"CREATE TABLE " + table + " (x integer)",
		"CREATE TRIGGER " + table + "_events BEFORE INSERT ON run_events FOR EACH ROW WHEN (EXISTS (SELECT 1 FROM " + table + ")) BEGIN SELECT RAISE(ABORT, " + raise + "); END",
	}
	if s.pg {
		qs[1] = "CREATE FUNCTION " + table + "_fn() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF EXISTS (SELECT 1 FROM " + table + ") THEN RAISE EXCEPTION " + raise + "; END IF; RETURN NEW; END $$"
		qs = append(qs, "CREATE TRIGGER "+table+"_events BEFORE INSERT ON run_events FOR EACH ROW EXECUTE FUNCTION "+table+"_fn()")
	}
	for _, q := range qs {
		if err := s.w.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	return func() { s.w.Exec("INSERT INTO " + table + " VALUES (1)") }, func() { s.w.Exec("DELETE FROM " + table) }
}

func TestWriterRetriesThroughAFault(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s := d.newStore(t)
		ctx := context.Background()
		th, _ := s.CreateThread(ctx, "u", "t")
		on, off := injectFault(t, s)
		var (
			mu        sync.Mutex
			delivered []int64
			failed    int
		)
		w := s.NewWriter(WriterOptions{
			Backoff: []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond, 320 * time.Millisecond},
			OnCommit: func(recs []Record) {
				mu.Lock()
				defer mu.Unlock()
				for _, r := range recs {
					if r.ThreadID() == th.ID {
						delivered = append(delivered, r.Seq())
					}
				}
			},
			OnBatch: func(st BatchStats) { mu.Lock(); defer mu.Unlock(); failed += st.Attempts - 1 },
		})
		defer w.Close()
		// A first commit elsewhere prepares the writer's statements, which on
		// a loaded machine could outlast the fault on PostgreSQL.
		warm, _ := s.CreateThread(ctx, "u", "warm")
		if err := w.Write(ctx, Record{Event: &RunEvent{ThreadID: warm.ID, EventType: "run.start", Category: "run"}}); err != nil {
			t.Fatal(err)
		}
		on()
		time.AfterFunc(150*time.Millisecond, off)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				err := w.Write(ctx, Record{Event: &RunEvent{ThreadID: th.ID, EventType: "run.start", Category: "run", Content: JSON(fmt.Sprintf(`{"i":%d}`, i))}})
				if err != nil {
					t.Errorf("write %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		if failed == 0 {
			t.Error("no attempt failed: the fault was not injected")
		}
		if len(delivered) != 20 {
			t.Fatalf("%d records delivered, want 20", len(delivered))
		}
		for i, seq := range delivered {
			if seq != int64(i+1) {
				t.Fatalf("delivered seqs %v: a failed attempt consumed sequence numbers", delivered)
			}
		}
		if last, _ := s.LastSeq(ctx, th.ID); last != 20 {
			t.Errorf("last_seq %d, want 20", last)
		}
	})
}

func TestWriterGivesUpCleanly(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s := d.newStore(t)
		ctx := context.Background()
		th, _ := s.CreateThread(ctx, "u", "t")
		on, _ := injectFault(t, s)
		w := s.NewWriter(WriterOptions{Queue: 4, Backoff: []time.Duration{5 * time.Millisecond, 10 * time.Millisecond}})
		defer w.Close()
		on()
		start := time.Now()
		// A message and an event in one submission: all or nothing.
		err := w.Write(ctx,
			Record{Message: &Message{ID: "m1", ThreadID: th.ID, Type: "human", Content: "hi"}},
			Record{Event: &RunEvent{ThreadID: th.ID, EventType: "run.start", Category: "run"}},
		)
		if err == nil || !containsAll(err.Error(), "injected write fault") {
			t.Fatalf("write under a permanent fault: %v", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("gave up after %v: retries must be bounded", d)
		}
		msgs, _ := s.Messages(ctx, th.ID)
		if last, _ := s.LastSeq(ctx, th.ID); last != 0 || len(msgs) != 0 {
			t.Errorf("half-written: last_seq %d, %d messages", last, len(msgs))
		}
	})
}

// TestWriterBoundsItsQueue: while the writer waits to retry a failing
// batch, submissions beyond its queue wait (back-pressure) and give up
// with their context instead of piling up in memory.
func TestWriterBoundsItsQueue(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s := d.newStore(t)
		ctx := context.Background()
		th, _ := s.CreateThread(ctx, "u", "t")
		on, off := injectFault(t, s)
		w := s.NewWriter(WriterOptions{Queue: 4, Backoff: []time.Duration{time.Second}})
		defer w.Close()
		defer off()
		on()
		ev := func() Record {
			return Record{Event: &RunEvent{ThreadID: th.ID, EventType: "run.start", Category: "run"}}
		}
		if err := w.Enqueue(ctx, ev()); err != nil { // the writer takes it and fails, then waits a second
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Second)
		for w.QueueLen() != 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		// Taken is not yet failed: the writer gathers what is queued right
		// after taking a job. Give its first attempt time to fail, well within
		// the second it then waits.
		time.Sleep(200 * time.Millisecond)
		for range 4 {
			if err := w.Enqueue(ctx, ev()); err != nil {
				t.Fatal(err)
			}
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := w.Enqueue(short, ev()); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a fifth submission into a full queue: %v, want it held back until its deadline", err)
		}
		if n := w.QueueLen(); n != 4 {
			t.Errorf("queue holds %d, capacity 4", n)
		}
	})
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// fillDisk makes the database full the way a full disk does. On SQLite
// (SQLITE_FULL, "database or disk is full") its page count may not grow;
// PostgreSQL's inserts fail with its disk_full error (53100), raised by a
// trigger. free lifts it.
func fillDisk(t *testing.T, s *Store) (free func()) {
	t.Helper()
	if s.pg {
		on, off := faultTrigger(t, s, "herd_disk_full", "'could not extend file: No space left on device' USING ERRCODE = 'disk_full'")
		on()
		return off
	}
	var pages int
	if err := s.w.Raw("PRAGMA page_count").Scan(&pages).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.w.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", pages)).Error; err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := s.w.Exec("PRAGMA max_page_count = 1073741823").Error; err != nil {
			t.Error(err)
		}
	}
}

// A full disk does not lose a record: the writer keeps it, reports the
// fault, and commits it once space returns, without a restart.
func TestWriterKeepsRecordsThroughAFullDisk(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s := d.newStore(t)
		ctx := context.Background()
		th, _ := s.CreateThread(ctx, "u", "t")
		committed := make(chan Record, 4)
		w := s.NewWriter(WriterOptions{
			Backoff:  []time.Duration{5 * time.Millisecond, 20 * time.Millisecond},
			OnCommit: func(recs []Record) { committed <- recs[0] },
		})
		defer w.Close()
		free := fillDisk(t, s)
		big := JSON(`{"text":"` + strings.Repeat("x", 64<<10) + `"}`)
		done := make(chan error, 1)
		go func() {
			done <- w.Write(ctx, Record{Event: &RunEvent{ThreadID: th.ID, EventType: "run.end", Category: CategoryRun, Content: big}})
		}()
		// The write stays pending while the fault lasts, however long the
		// writer takes to first try it.
		for w.Fault() == nil {
			select {
			case err := <-done:
				t.Fatalf("the write returned while the disk was full: %v", err)
			case <-time.After(5 * time.Millisecond):
			}
		}
		select {
		case err := <-done:
			t.Fatalf("the write returned while the disk was full: %v", err)
		case <-time.After(200 * time.Millisecond): // kept, retrying
		}
		f := w.Fault()
		if f == nil || f.Reason != "the disk is full" {
			t.Fatalf("fault = %v, want the disk is full", f)
		}
		free()
		if err := <-done; err != nil {
			t.Fatalf("the kept record failed after space returned: %v", err)
		}
		if r := <-committed; r.Seq() != 1 {
			t.Errorf("committed seq %d, want 1", r.Seq())
		}
		if f := w.Fault(); f != nil {
			t.Errorf("fault still reported after recovery: %v", f)
		}
	})
}

// A writer closed during a storage fault gives up after its grace and
// fails the records it could not commit, rather than hanging shutdown.
func TestWriterCloseGivesUpOnAFault(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s := d.newStore(t)
		ctx := context.Background()
		th, _ := s.CreateThread(ctx, "u", "t")
		w := s.NewWriter(WriterOptions{Backoff: []time.Duration{5 * time.Millisecond, 20 * time.Millisecond}, CloseGrace: 200 * time.Millisecond})
		free := fillDisk(t, s)
		defer free()
		big := JSON(`{"text":"` + strings.Repeat("x", 64<<10) + `"}`)
		done := make(chan error, 1)
		go func() {
			done <- w.Write(ctx, Record{Event: &RunEvent{ThreadID: th.ID, EventType: "run.end", Category: CategoryRun, Content: big}})
		}()
		for w.Fault() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		start := time.Now()
		w.Close()
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Close took %v through a fault; want about its grace", d)
		}
		if err := <-done; !errors.Is(err, errWriterGaveUp) {
			t.Errorf("write = %v, want the give-up error", err)
		}
	})
}

// During a long storage fault the steps that subagents enqueue fill the
// queue; a record a caller waits for (a task's end) must still get in, be
// kept, and commit once the fault passes.
func TestWriterKeepsRoomForWaitedWrites(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s := d.newStore(t)
		ctx := context.Background()
		th, _ := s.CreateThread(ctx, "u", "t")
		var mu sync.Mutex
		var committed []string
		w := s.NewWriter(WriterOptions{Queue: 4, Reserve: 2, Backoff: []time.Duration{5 * time.Millisecond, 20 * time.Millisecond},
			OnCommit: func(recs []Record) {
				mu.Lock()
				defer mu.Unlock()
				for _, r := range recs {
					committed = append(committed, r.Event.EventType)
				}
			}})
		defer w.Close()
		free := fillDisk(t, s)
		big := JSON(`{"text":"` + strings.Repeat("x", 64<<10) + `"}`)
		step := func() Record {
			return Record{Event: &RunEvent{ThreadID: th.ID, EventType: "subagent.step", Category: CategorySubagent, Content: big}}
		}
		if err := w.Enqueue(ctx, step()); err != nil { // taken, and failing
			t.Fatal(err)
		}
		for w.Fault() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		for range 4 {
			if err := w.Enqueue(ctx, step()); err != nil {
				t.Fatal(err)
			}
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := w.Enqueue(short, step()); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a step into a full queue: %v, want it held back", err)
		}
		// The end is let in and kept, though its caller stops waiting.
		end, cancelEnd := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancelEnd()
		err := w.Write(end, Record{Event: &RunEvent{ThreadID: th.ID, EventType: "subagent.end", Category: CategorySubagent}})
		if err == nil || strings.Contains(err.Error(), "queue full") {
			t.Fatalf("the end's write: %v; want it queued and its caller timed out waiting", err)
		}
		free()
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(committed) != 6 || committed[5] != "subagent.end" {
			t.Errorf("committed %v; want the 5 steps then the end", committed)
		}
	})
}
