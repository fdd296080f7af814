package models

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd/internal/pgtest"
)

// TestPeriodBounds: UTC calendar periods, weeks from Monday, whatever
// zone the instant is given in.
func TestPeriodBounds(t *testing.T) {
	at := time.Date(2026, 12, 2, 4, 30, 0, 0, time.FixedZone("x", -8*3600)) // Wed 2 Dec 12:30 UTC
	for _, c := range []struct{ period, start, end string }{
		{PeriodDay, "2026-12-02", "2026-12-03"},
		{PeriodWeek, "2026-11-30", "2026-12-07"},
		{PeriodMonth, "2026-12-01", "2027-01-01"},
	} {
		start, end, ok := PeriodBounds(c.period, at)
		if !ok || start.Format(dayLayout) != c.start || end.Format(dayLayout) != c.end || start.Location() != time.UTC {
			t.Errorf("%s: %v–%v %v, want %s–%s", c.period, start, end, ok, c.start, c.end)
		}
	}
	sunday := time.Date(2026, 12, 6, 23, 59, 59, 0, time.UTC)
	if start, _, _ := PeriodBounds(PeriodWeek, sunday); start.Format(dayLayout) != "2026-11-30" {
		t.Errorf("a Sunday's week starts %v", start)
	}
	if _, _, ok := PeriodBounds("year", at); ok {
		t.Error("an unknown period has bounds")
	}
}

// TestUsedTokens sums one user's ledger over a period on both databases:
// rows on both sides of each edge, another user's rows and a title call
// (no run) of the user's thread. Deleting a thread, or a user, gives back
// nothing: the ledger keeps their calls (docs/DESIGN.md §6).
func TestUsedTokens(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s := d.newStore(t)
		ctx := context.Background()
		w := s.NewWriter(WriterOptions{})
		defer w.Close()
		ann, _ := s.CreateUser(ctx, "ann@example.com", "h", RoleUser, false)
		bob, _ := s.CreateUser(ctx, "bob@example.com", "h", RoleUser, false)
		a1, _ := s.CreateThread(ctx, ann.ID, "a1")
		a2, _ := s.CreateThread(ctx, ann.ID, "a2")
		b1, _ := s.CreateThread(ctx, bob.ID, "b")
		start, end, _ := PeriodBounds(PeriodWeek, time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
		rows := []struct {
			at     time.Time
			thread *Thread
			run    string
			tokens int64
		}{
			{start.Add(-time.Nanosecond), a1, "r", 1000}, // the week before
			{start, a1, "r", 1},                          // its first instant
			{start.Add(50 * time.Hour), a2, "r", 10},
			{start.Add(51 * time.Hour), a2, "", 100}, // a title call
			{end.Add(-time.Microsecond), a1, "r", 1000_0},
			{end, a1, "r", 5000},               // the next week
			{start.Add(time.Hour), b1, "r", 7}, // bob's
		}
		for i, r := range rows {
			e := &UsageEntry{CallID: fmt.Sprint("c", i), ThreadID: r.thread.ID, UserID: r.thread.UserID, RunID: r.run, ModelName: "m", TotalTokens: r.tokens, CreatedAt: r.at}
			if err := w.Write(ctx, Record{Usage: e}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.DeleteThread(ctx, ann.ID, a2.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteUser(ctx, bob.ID); err != nil {
			t.Fatal(err)
		}
		used, err := s.UsedTokens(ctx, ann.ID, start, end)
		if err != nil || used != 10111 {
			t.Fatalf("ann's week = %d, %v; want 10111", used, err)
		}
		if used, _ := s.UsedTokens(ctx, bob.ID, start, end); used != 7 {
			t.Fatalf("bob's week = %d, want 7", used)
		}
		if used, _ := s.UsedTokens(ctx, "nobody", start, end); used != 0 {
			t.Fatalf("a user without calls used %d", used)
		}
		by, err := s.UsedTokensByUser(ctx, start, end)
		if err != nil || by[ann.ID] != 10111 || by[bob.ID] != 7 || len(by) != 2 {
			t.Fatalf("by user = %v, %v", by, err)
		}
		models, err := s.UsedByModel(ctx, ann.ID, start, end)
		if err != nil || len(models) != 1 || models["m"].TotalTokens != 10111 || models["m"].Calls != 4 {
			t.Fatalf("ann's by model = %+v, %v", models, err)
		}
	})
}

// TestUsedTokensUsesIndexes: the budget check reads the user's ledger
// rows of the period through idx_usage_user_created, not a scan of the
// ledger, on both databases.
func TestUsedTokensUsesIndexes(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s := d.newStore(t)
		ctx := context.Background()
		w := s.NewWriter(WriterOptions{})
		defer w.Close()
		at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
		var users []*User
		for u := range 20 {
			usr, err := s.CreateUser(ctx, fmt.Sprintf("u%d@example.com", u), "h", RoleUser, false)
			if err != nil {
				t.Fatal(err)
			}
			users = append(users, usr)
			for range 3 {
				th, _ := s.CreateThread(ctx, usr.ID, "t")
				var recs []Record
				for i := range 40 {
					recs = append(recs, Record{Usage: &UsageEntry{CallID: fmt.Sprint(th.ID, i), ThreadID: th.ID, UserID: usr.ID, RunID: "r", ModelName: "m", TotalTokens: 5, CreatedAt: at.AddDate(0, 0, -i)}})
				}
				if err := w.Write(ctx, recs...); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := s.w.Exec("ANALYZE").Error; err != nil {
			t.Fatal(err)
		}
		explain := "EXPLAIN "
		if !s.pg {
			explain = "EXPLAIN QUERY PLAN "
		}
		rows, err := s.r.Raw(explain+usedTokensSQL, users[3].ID, at, at.AddDate(0, 0, 1)).Rows()
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
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
		text := strings.Join(plan, "\n")
		t.Logf("plan:\n%s", text)
		// PostgreSQL says "Seq Scan on usage_entries", SQLite "SCAN u".
		if strings.Contains(text, "Seq Scan on usage_entries") || strings.Contains(text, "SCAN u") || !strings.Contains(text, "idx_usage_user_created") || strings.Contains(text, "threads") {
			t.Fatalf("the budget's sum does not read the ledger alone through idx_usage_user_created:\n%s", text)
		}
	})
}

// TestMigrateLedgerOwners: a database from before the ledger named its
// owner (no user_id, budgets read through idx_usage_thread_created) gets
// each row's owner from its thread at its next open, on both databases,
// and again at every open with nothing changed; a row whose thread was
// gone before keeps no owner.
func TestMigrateLedgerOwners(t *testing.T) {
	path, dsn := filepath.Join(t.TempDir(), "herd.db"), ""
	opens := map[string]func() (*Store, error){
		"sqlite":   func() (*Store, error) { return Open(path, Options{}) },
		"postgres": func() (*Store, error) { return OpenPostgres(dsn, Options{}) },
	}
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		if d.name == "postgres" {
			dsn = pgtest.DSN(t)
		}
		s, err := opens[d.name]()
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		ann, _ := s.CreateUser(ctx, "ann@example.com", "h", RoleUser, false)
		bob, _ := s.CreateUser(ctx, "bob@example.com", "h", RoleUser, false)
		a, _ := s.CreateThread(ctx, ann.ID, "a")
		b, _ := s.CreateThread(ctx, bob.ID, "b")
		at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
		w := s.NewWriter(WriterOptions{})
		err = w.Write(ctx,
			Record{Usage: &UsageEntry{CallID: "a1", ThreadID: a.ID, RunID: "r", ModelName: "m", TotalTokens: 10, CreatedAt: at}},
			Record{Usage: &UsageEntry{CallID: "a2", ThreadID: a.ID, ModelName: "m", TotalTokens: 5, CreatedAt: at}},
			Record{Usage: &UsageEntry{CallID: "b1", ThreadID: b.ID, RunID: "r", ModelName: "m", TotalTokens: 7, CreatedAt: at}},
			Record{Usage: &UsageEntry{CallID: "x1", ThreadID: "gone", RunID: "r", ModelName: "m", TotalTokens: 3, CreatedAt: at}})
		w.Close()
		if err == nil {
			err = toLedgerWithoutOwners(s)
		}
		_ = s.Close()
		if err != nil {
			t.Fatal(err)
		}
		start, end, _ := PeriodBounds(PeriodDay, at)
		for open := range 2 {
			if s, err = opens[d.name](); err != nil {
				t.Fatal(err)
			}
			owners := map[string]string{}
			var rows []UsageEntry
			if err := s.r.Find(&rows).Error; err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				owners[r.CallID] = r.UserID
			}
			want := map[string]string{"a1": ann.ID, "a2": ann.ID, "b1": bob.ID, "x1": ""}
			if !maps.Equal(owners, want) {
				t.Errorf("open %d: owners %v, want %v", open, owners, want)
			}
			if used, err := s.UsedTokens(ctx, ann.ID, start, end); err != nil || used != 15 {
				t.Errorf("open %d: ann used %d, %v; want 15", open, used, err)
			}
			if s.r.Migrator().HasIndex(&UsageEntry{}, "idx_usage_thread_created") {
				t.Errorf("open %d: idx_usage_thread_created is still there", open)
			}
			_ = s.Close()
		}
	})
}

// toLedgerWithoutOwners turns s's ledger into its shape before owners:
// no user_id column, the budget's index on thread and time.
func toLedgerWithoutOwners(s *Store) error {
	for _, q := range []string{
		"DROP INDEX idx_usage_user_created",
		"ALTER TABLE usage_entries DROP COLUMN user_id",
		"CREATE INDEX idx_usage_thread_created ON usage_entries (thread_id, created_at)",
	} {
		if err := s.w.Exec(q).Error; err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}
