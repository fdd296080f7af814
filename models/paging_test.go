package models

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestThreadsPageTies: threads active at the same instant (a fixed clock
// here, the same nanosecond in life) are paged by id, each once, in the
// order of Threads.
func TestThreadsPageTies(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		s := d.openStore(t, Options{Now: func() time.Time { return at }})
		ctx := context.Background()
		for range 7 {
			if _, err := s.CreateThread(ctx, "u1", "t"); err != nil {
				t.Fatal(err)
			}
		}
		all, err := s.Threads(ctx, "u1")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		var after *ThreadCursor
		for {
			page, more, err := s.ThreadsPage(ctx, "u1", after, 3)
			if err != nil {
				t.Fatal(err)
			}
			for _, th := range page {
				got = append(got, th.ID)
			}
			if !more {
				break
			}
			last := page[len(page)-1]
			after = &ThreadCursor{UpdatedAt: last.UpdatedAt, ID: last.ID}
		}
		want := make([]string, len(all))
		for i, th := range all {
			want[i] = th.ID
		}
		if !slices.Equal(got, want) {
			t.Errorf("paged %v, want %v", got, want)
		}
	})
}
