package models

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestUsageHistory seeds the ledger across two users, two models and
// several days, with rows on both sides of the range's edges, and checks
// every figure of the history against a sum of the seeded rows. Deleting
// a thread and a user changes none of them: the ledger keeps their calls,
// under the deleted user's id.
func TestUsageHistory(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s := d.newStore(t)
		ctx := context.Background()
		w := s.NewWriter(WriterOptions{})
		defer w.Close()
		ann, err := s.CreateUser(ctx, "ann@example.com", "h", RoleUser, false)
		if err != nil {
			t.Fatal(err)
		}
		bob, err := s.CreateUser(ctx, "bob@example.com", "h", RoleUser, false)
		if err != nil {
			t.Fatal(err)
		}
		annTh, _ := s.CreateThread(ctx, ann.ID, "a")
		bobTh, _ := s.CreateThread(ctx, bob.ID, "b")

		// The range: 3 days ending with 2026-11-30 (UTC).
		last := time.Date(2026, 11, 30, 15, 0, 0, 0, time.UTC)
		day := func(d, h, m, s, ns int) time.Time { return time.Date(2026, 11, d, h, m, s, ns, time.UTC) }
		type seed struct {
			at     time.Time
			thread *Thread
			model  string
			in     int64
			in3    bool // inside the range
		}
		seeds := []seed{
			{day(27, 23, 59, 59, 999_999_999), annTh, "m1", 1000, false}, // the day before the range
			{day(28, 0, 0, 0, 0), annTh, "m1", 10, true},                 // its first instant
			{day(28, 12, 0, 0, 5), bobTh, "m2", 20, true},
			{day(29, 8, 0, 0, 0), annTh, "m2", 30, true},
			{day(29, 9, 0, 0, 0), annTh, "m2", 40, true},
			{day(30, 23, 59, 59, 999_999_999), bobTh, "m1", 50, true}, // its last instant
			{day(30, 10, 0, 0, 0), bobTh, "m2", 60, true},
			{time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), bobTh, "m1", 2000, false}, // the day after
		}
		for i, sd := range seeds {
			e := &UsageEntry{CallID: fmt.Sprint("c", i), ThreadID: sd.thread.ID, UserID: sd.thread.UserID, RunID: "r", ModelName: sd.model,
				InputTokens: sd.in, OutputTokens: 1, TotalTokens: sd.in + 1, CacheReadTokens: int64(i), CreatedAt: sd.at}
			if err := w.Write(ctx, Record{Usage: e}); err != nil {
				t.Fatal(err)
			}
		}

		h, err := s.UsageHistory(ctx, last, 3)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprint(h.Days), "[2026-11-28 2026-11-29 2026-11-30]"; got != want {
			t.Fatalf("days = %s, want %s", got, want)
		}
		// want sums the seeded rows inside the range that match.
		want := func(match func(seed) bool) (per [3]UsageTotals, total UsageTotals) {
			for i, sd := range seeds {
				if !sd.in3 || !match(sd) {
					continue
				}
				d := sd.at.Day() - 28
				row := UsageTotals{InputTokens: sd.in, OutputTokens: 1, TotalTokens: sd.in + 1, CacheReadTokens: int64(i), Calls: 1}
				per[d].Add(row)
				total.Add(row)
			}
			return per, total
		}
		check := func(name string, got UsageSeries, match func(seed) bool) {
			t.Helper()
			per, total := want(match)
			if got.Total != total {
				t.Errorf("%s: total %+v, want %+v", name, got.Total, total)
			}
			if len(got.Days) != 3 {
				t.Fatalf("%s: %d days, want 3", name, len(got.Days))
			}
			for i := range per {
				if got.Days[i] != per[i] {
					t.Errorf("%s: %s = %+v, want %+v", name, h.Days[i], got.Days[i], per[i])
				}
			}
		}
		check("total", h.Total, func(seed) bool { return true })
		if len(h.ByUser) != 2 || len(h.ByModel) != 2 {
			t.Fatalf("%d users and %d models, want 2 and 2", len(h.ByUser), len(h.ByModel))
		}
		// Bob has more tokens (20+50+60 > 10+30+40), so he comes first.
		if h.ByUser[0].Key != bob.ID || h.ByUser[0].Label != "bob@example.com" || h.ByUser[1].Label != "ann@example.com" {
			t.Errorf("users = %s, %s; want bob, then ann", h.ByUser[0].Label, h.ByUser[1].Label)
		}
		for _, u := range h.ByUser {
			th := map[string]*Thread{ann.ID: annTh, bob.ID: bobTh}[u.Key]
			check(u.Label, u, func(sd seed) bool { return sd.thread == th })
		}
		for _, m := range h.ByModel {
			check(m.Key, m, func(sd seed) bool { return sd.model == m.Key })
		}
		if h.ByModel[0].Key != "m2" {
			t.Errorf("models ranked %s, %s; want m2 (130 tokens) first", h.ByModel[0].Key, h.ByModel[1].Key)
		}
		checkHistoryKept(t, s, h, last, func() error {
			if err := s.DeleteThread(ctx, ann.ID, annTh.ID); err != nil {
				return err
			}
			return s.DeleteUser(ctx, bob.ID)
		})

		// One query, however many users, models and days.
		before := s.Reads()
		if _, err := s.UsageHistory(ctx, last, 365); err != nil {
			t.Fatal(err)
		}
		if n := s.Reads() - before; n != 1 {
			t.Errorf("%d queries for a history, want 1", n)
		}
		if _, err := s.UsageHistory(ctx, last, 0); err == nil {
			t.Error("a history of 0 days was accepted")
		}
	})
}

// checkHistoryKept checks that del changes nothing of the 3-day history
// h but the labels of the users it deleted, which go blank.
func checkHistoryKept(t *testing.T, s *Store, h UsageHistory, last time.Time, del func() error) {
	t.Helper()
	if err := del(); err != nil {
		t.Fatal(err)
	}
	after, err := s.UsageHistory(context.Background(), last, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range h.ByUser {
		if _, err := s.User(context.Background(), u.Key); errors.Is(err, ErrNotFound) {
			u.Label = ""
		}
		i := slices.IndexFunc(after.ByUser, func(a UsageSeries) bool { return a.Key == u.Key })
		if i < 0 || !reflect.DeepEqual(after.ByUser[i], u) {
			t.Errorf("after the deletes, %s's series is lost or changed: %+v", u.Key, after.ByUser)
		}
	}
	if !reflect.DeepEqual(after.Total, h.Total) || !reflect.DeepEqual(after.ByModel, h.ByModel) || len(after.ByUser) != len(h.ByUser) {
		t.Errorf("after the deletes the history is %+v, want %+v", after, h)
	}
}

// TestUsageUnreported: ledger rows marked unreported count as calls and
// as unreported calls, with no tokens, in a thread's, a run's and the
// admin's totals, for their model alone.
func TestUsageUnreported(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s, th, w := d.newThreadWriter(t)
		ctx := context.Background()
		at := time.Now().UTC()
		rows := []*UsageEntry{
			{CallID: "a", ThreadID: th.ID, RunID: "r1", ModelName: "loud", InputTokens: 10, OutputTokens: 5, TotalTokens: 15, CreatedAt: at},
			{CallID: "b", ThreadID: th.ID, RunID: "r1", TaskID: "t", ModelName: "quiet", Unreported: true, CreatedAt: at},
			{CallID: "c", ThreadID: th.ID, RunID: "r2", ModelName: "quiet", Unreported: true, CreatedAt: at},
		}
		for _, e := range rows {
			if err := w.Write(ctx, Record{Usage: e}); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := s.Usage(ctx, th.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if want := (UsageTotals{InputTokens: 10, OutputTokens: 5, TotalTokens: 15, Calls: 3, UnreportedCalls: 2}); rep.Total != want {
			t.Errorf("thread total %+v, want %+v", rep.Total, want)
		}
		if rep.ByModel["loud"].UnreportedCalls != 0 || rep.ByModel["quiet"] != (UsageTotals{Calls: 2, UnreportedCalls: 2}) || rep.Subagents.UnreportedCalls != 1 {
			t.Errorf("by model %+v, subagents %+v", rep.ByModel, rep.Subagents)
		}
		run, err := s.Usage(ctx, th.ID, "r2")
		if err != nil {
			t.Fatal(err)
		}
		if run.Total != (UsageTotals{Calls: 1, UnreportedCalls: 1}) {
			t.Errorf("run r2 total %+v", run.Total)
		}
		h, err := s.UsageHistory(ctx, at, 1)
		if err != nil {
			t.Fatal(err)
		}
		if h.Total.Total != rep.Total || h.Total.Days[0].UnreportedCalls != 2 {
			t.Errorf("history total %+v, day %+v, want %+v", h.Total.Total, h.Total.Days[0], rep.Total)
		}
	})
}

// TestUsageLostCalls: a call cut by a restart (LostCall) counts once
// however often it is written — apart, in one batch, by a second resume
// of the same state — as a call, an unreported one and a lost one, with
// no tokens, beside the calls that merely reported nothing; the store's
// aggregates, per run, per day and a run's own count (UsageEntry.Count)
// agree. A row marked lost but not unreported is unreported all the same.
func TestUsageLostCalls(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s, th, w := d.newThreadWriter(t)
		ctx := context.Background()
		at := time.Now().UTC()
		lost := func() *UsageEntry { return LostCall(th.ID, th.UserID, "r1", "t1", "deep", "v4.r1") }
		rows := [][]*UsageEntry{
			{{CallID: "a", ThreadID: th.ID, RunID: "r1", ModelName: "fast", HerdModel: "fast", InputTokens: 10, OutputTokens: 5, TotalTokens: 15}},
			{{CallID: "b", ThreadID: th.ID, RunID: "r1", TaskID: "t1", ModelName: "deep", HerdModel: "deep", Unreported: true}},
			{{CallID: "c", ThreadID: th.ID, RunID: "r1", TaskID: "t2", ModelName: "deep", HerdModel: "deep", Unreported: true}},
			{lost()},
			{lost(), lost()},
			{lost()},
			// The same task cut again after its first resume: another call.
			{LostCall(th.ID, th.UserID, "r1", "t1", "deep", "v4.r2")},
			{{CallID: "hand", ThreadID: th.ID, RunID: "r2", ModelName: "fast", HerdModel: "fast", Lost: true}},
		}
		var count UsageReport
		for _, batch := range rows {
			var recs []Record
			for _, e := range batch {
				e.CreatedAt = at
				recs = append(recs, Record{Usage: e})
			}
			if err := w.Write(ctx, recs...); err != nil {
				t.Fatal(err)
			}
		}
		for _, i := range []int{0, 1, 2, 3, 6, 7} {
			rows[i][0].Count(&count)
		}
		rep, err := s.Usage(ctx, th.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		want := UsageTotals{InputTokens: 10, OutputTokens: 5, TotalTokens: 15, Calls: 6, UnreportedCalls: 5, LostCalls: 3}
		if rep.Total != want || count.Total != want {
			t.Errorf("thread total %+v, counted %+v; want %+v", rep.Total, count.Total, want)
		}
		if deep := (UsageTotals{Calls: 4, UnreportedCalls: 4, LostCalls: 2}); rep.ByModel["deep"] != deep || rep.Subagents != deep {
			t.Errorf("deep %+v, subagents %+v; want %+v", rep.ByModel["deep"], rep.Subagents, deep)
		}
		if lead := (UsageTotals{InputTokens: 10, OutputTokens: 5, TotalTokens: 15, Calls: 2, UnreportedCalls: 1, LostCalls: 1}); rep.Lead != lead {
			t.Errorf("lead %+v, want %+v", rep.Lead, lead)
		}
		per, err := s.UsageByRun(ctx, th.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r1 := per["r1"].Total; r1.LostCalls != 2 || r1.UnreportedCalls != 4 || r1.Calls != 5 {
			t.Errorf("run r1 %+v, want 5 calls, 4 unreported, 2 lost", r1)
		}
		h, err := s.UsageHistory(ctx, at, 1)
		if err != nil {
			t.Fatal(err)
		}
		if h.Total.Total != want || h.Total.Days[0] != want {
			t.Errorf("history total %+v, day %+v, want %+v", h.Total.Total, h.Total.Days[0], want)
		}
	})
}
