package models

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestInRanges reads the seq ranges of three threads at once, messages and
// events interleaved: each range's records come back once, the threads in
// the order asked, each in seq order, and nothing outside the bounds (a
// thread not asked for, a seq before After or past Upto).
func TestInRanges(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s, th1, w := d.newThreadWriter(t)
		ctx := context.Background()
		th2, err := s.CreateThread(ctx, "u1", "t2")
		if err != nil {
			t.Fatal(err)
		}
		th3, err := s.CreateThread(ctx, "u1", "t3")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 6 { // seq 1..12 in each thread: message, event
			for _, th := range []*Thread{th1, th2, th3} {
				err := w.Write(ctx,
					Record{Message: &Message{ID: fmt.Sprint(th.ID[:8], "-m", i), ThreadID: th.ID, Type: "human", Content: "hi"}},
					Record{Event: &RunEvent{ThreadID: th.ID, EventType: "run.start", Category: CategoryRun}})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		recs, err := s.InRanges(ctx, []SeqRange{{ThreadID: th3.ID, After: 9, Upto: 12}, {ThreadID: th1.ID, After: 2, Upto: 7}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range recs {
			kind := "e"
			if r.Message != nil {
				kind = "m"
			}
			got = append(got, fmt.Sprint(r.ThreadID(), "/", r.Seq(), kind))
		}
		// Each Write puts the message first: odd seqs are messages.
		want := []string{th3.ID + "/10e", th3.ID + "/11m", th3.ID + "/12e",
			th1.ID + "/3m", th1.ID + "/4e", th1.ID + "/5m", th1.ID + "/6e", th1.ID + "/7m"}
		if !slices.Equal(got, want) {
			t.Fatalf("InRanges returned\n%v\nwant\n%v", got, want)
		}
		// Row for row what Since reads (every column, times included).
		since, err := s.Since(ctx, th1.ID, 2, 5)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs[3:] {
			if !reflect.DeepEqual(r, since[i]) {
				t.Fatalf("InRanges read %+v %+v; Since %+v %+v", r.Message, r.Event, since[i].Message, since[i].Event)
			}
		}
		if recs, err := s.InRanges(ctx, nil); err != nil || len(recs) != 0 {
			t.Fatalf("no ranges: %v, %v", recs, err)
		}
	})
}

// TestInRangesScansOnlyTheRanges reads back a few records from tables of
// thousands: the plan must look each range up in the (thread_id, seq)
// index, never scan the table. The planner cannot count the ranges in the
// JSON array, and PostgreSQL, guessing 100, hashed them and scanned the
// whole table on every read-back (make load-cluster: 1.8 million rows
// visited in one run).
func TestInRangesScansOnlyTheRanges(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s, th, w := d.newThreadWriter(t)
		ctx := context.Background()
		threads := []*Thread{th}
		for i := range 39 {
			th, err := s.CreateThread(ctx, "u1", fmt.Sprint("t", i))
			if err != nil {
				t.Fatal(err)
			}
			threads = append(threads, th)
		}
		for _, th := range threads { // 40 threads × 60 records
			var recs []Record
			for i := range 30 {
				recs = append(recs,
					Record{Message: &Message{ID: fmt.Sprint(th.ID[:8], "-m", i), ThreadID: th.ID, Type: "human", Content: "hi"}},
					Record{Event: &RunEvent{ThreadID: th.ID, EventType: "run.start", Category: CategoryRun}})
			}
			if err := w.Write(ctx, recs...); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.w.Exec("ANALYZE").Error; err != nil {
			t.Fatal(err)
		}
		js := fmt.Sprintf(`[{"t":%q,"a":3,"b":9},{"t":%q,"a":50,"b":60}]`, threads[7].ID, threads[30].ID)
		explain := "EXPLAIN "
		if !s.pg {
			explain = "EXPLAIN QUERY PLAN "
		}
		for _, table := range []string{"messages", "run_events"} {
			rows, err := s.r.Raw(explain+s.rangesQuery(table), js).Rows()
			if err != nil {
				t.Fatal(err)
			}
			cols, _ := rows.Columns()
			var plan []string
			for rows.Next() {
				vals := make([]any, len(cols))
				for i := range vals {
					vals[i] = new(any)
				}
				if err := rows.Scan(vals...); err != nil {
					t.Fatal(err)
				}
				line := fmt.Sprint(*vals[len(vals)-1].(*any))
				if b, ok := (*vals[len(vals)-1].(*any)).([]byte); ok {
					line = string(b)
				}
				plan = append(plan, line)
			}
			_ = rows.Close()
			text := strings.Join(plan, "\n")
			// PostgreSQL says "Seq Scan on messages x", SQLite "SCAN x".
			if strings.Contains(text, "Seq Scan on "+table) || strings.Contains(text, "SCAN x") || !strings.Contains(strings.ToLower(text), "idx_") {
				t.Fatalf("%s: the read-back does not look the ranges up in the index:\n%s", table, text)
			}
		}
	})
}
