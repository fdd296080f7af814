package models

import (
	"context"
	"fmt"
	"reflect"
	"slices"
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
