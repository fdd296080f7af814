package models

import (
	"context"
	"fmt"
	"testing"

	"gorm.io/gorm"
)

// TestSinceReadsOneSnapshot commits a message and an event between
// Since's read of messages and its read of events, as the writer may at
// any moment: the page must still be a gapless run of seqs, or a replaying
// client would skip the message.
func TestSinceReadsOneSnapshot(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s, th, w := d.newThreadWriter(t)
		ctx := context.Background()
		n := 0
		write := func() {
			n++
			err := w.Write(ctx,
				Record{Message: &Message{ID: fmt.Sprint("m", n), ThreadID: th.ID, Type: "human", Content: "hi"}},
				Record{Event: &RunEvent{ThreadID: th.ID, EventType: "run.start", Category: CategoryRun}})
			if err != nil {
				t.Fatal(err)
			}
		}
		write() // seq 1 and 2
		between := false
		err := s.r.Callback().Query().After("gorm:query").Register("test:commit-between", func(db *gorm.DB) {
			if db.Statement.Table == "messages" && !between {
				between = true
				write() // seq 3 and 4
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := s.Since(ctx, th.ID, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if !between {
			t.Fatal("no commit landed between the reads")
		}
		var got []int64
		for _, r := range recs {
			got = append(got, r.Seq())
		}
		for i, seq := range got {
			if seq != int64(i+1) {
				t.Fatalf("Since returned seqs %v, want a gapless run from 1", got)
			}
		}
	})
}
