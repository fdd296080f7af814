package models

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
)

// dayLayout is how a usage history names its UTC days.
const dayLayout = "2006-01-02"

// UsageSeries is one line of a usage history: a user's or a model's ledger
// totals, per day and over the whole range.
type UsageSeries struct {
	// Key is the user id or the model name.
	Key string
	// Label is the user's email ("" when the ledger names a user that no
	// longer exists, or a row from before owners were recorded whose
	// thread was gone); for a model, its name.
	Label string
	// Days is aligned with UsageHistory.Days.
	Days  []UsageTotals
	Total UsageTotals
	// ByModel is a user's total per model over the range, which prices
	// turn into cost; nil in a model's series.
	ByModel map[string]UsageTotals
}

// UsageHistory is the usage ledger over whole UTC days, per user (the
// calls' owner) and per model: the admin's accounting, which the token
// gate never hides (docs/DESIGN.md §6).
type UsageHistory struct {
	// Days is every day of the range, oldest first, as 2006-01-02: days
	// without a call are there too, with zero totals.
	Days    []string
	ByUser  []UsageSeries // most tokens first
	ByModel []UsageSeries // most tokens first
	Total   UsageSeries
}

// usageDay is the ledger summed for one day, one user and one model.
type usageDay struct {
	Day       string
	UserID    string
	Email     string
	ModelName string
	UsageTotals
}

// UsageHistory sums the ledger over the n whole UTC days that end with the
// day holding last, in one query grouped by day, user and model. n must be
// at least 1.
func (s *Store) UsageHistory(ctx context.Context, last time.Time, n int) (UsageHistory, error) {
	if n < 1 {
		return UsageHistory{}, fmt.Errorf("store: usage history: %d days", n)
	}
	end := last.UTC().Truncate(24*time.Hour).AddDate(0, 0, 1)
	start := end.AddDate(0, 0, -n)
	var rows []usageDay
	// The writer stores UTC times, and utcDay names a row's UTC day whatever
	// wrote it. The ledger names its owner, and the LEFT JOIN keeps a row
	// whose user is gone: the totals are the ledger's, whole.
	err := s.r.WithContext(ctx).Table("usage_entries AS u").
		Select(s.utcDay("u.created_at")+" AS day, u.user_id AS user_id, COALESCE(us.email, '') AS email, "+usageModelSQL+" AS model_name, "+
			"SUM(u.input_tokens) AS input_tokens, SUM(u.output_tokens) AS output_tokens, SUM(u.total_tokens) AS total_tokens, "+
			"SUM(u.cache_read_tokens) AS cache_read_tokens, COUNT(*) AS calls, "+usageCounts("u.")).
		Joins("LEFT JOIN users AS us ON us.id = u.user_id").
		Where("u.created_at >= ? AND u.created_at < ?", start, end).
		Group("day, u.user_id, us.email, " + usageModelSQL).
		Scan(&rows).Error
	if err != nil {
		return UsageHistory{}, fmt.Errorf("store: usage history: %w", err)
	}
	return buildHistory(start, n, rows), nil
}

// usageModelSQL is the herd model a ledger row counts under in the
// history (herdModelSQL), so that its series are the models the config
// names and prices.
const usageModelSQL = "COALESCE(NULLIF(u.herd_model, ''), u.model_name)"

// utcDay is the SQL for the UTC day of the time column col, as dayLayout.
// SQLite's date() reads the offset of the text it is given; PostgreSQL's
// timestamptz is converted to UTC explicitly, whatever the session's zone.
func (s *Store) utcDay(col string) string {
	if s.pg {
		return "to_char(" + col + " AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
	}
	return "date(" + col + ")"
}

// countTrue is the SQL counting the rows where the boolean column col is
// true: SQLite stores it as 0 or 1, which SUM could add, PostgreSQL as a
// boolean, which it cannot.
func countTrue(col string) string {
	return "SUM(CASE WHEN " + col + " THEN 1 ELSE 0 END)"
}

// buildHistory spreads the grouped rows over the n days from start.
func buildHistory(start time.Time, n int, rows []usageDay) UsageHistory {
	h := UsageHistory{Days: make([]string, n), Total: UsageSeries{Days: make([]UsageTotals, n)}}
	index := make(map[string]int, n)
	for i := range n {
		h.Days[i] = start.AddDate(0, 0, i).Format(dayLayout)
		index[h.Days[i]] = i
	}
	users, models := map[string]*UsageSeries{}, map[string]*UsageSeries{}
	series := func(in map[string]*UsageSeries, key, label string) *UsageSeries {
		if s, ok := in[key]; ok {
			return s
		}
		s := &UsageSeries{Key: key, Label: label, Days: make([]UsageTotals, n)}
		in[key] = s
		return s
	}
	for _, r := range rows {
		i, ok := index[r.Day]
		if !ok {
			continue // outside the range: the query's bounds make this impossible
		}
		user := series(users, r.UserID, r.Email)
		for _, s := range []*UsageSeries{user, series(models, r.ModelName, r.ModelName), &h.Total} {
			s.Days[i].Add(r.UsageTotals)
			s.Total.Add(r.UsageTotals)
		}
		if user.ByModel == nil {
			user.ByModel = map[string]UsageTotals{}
		}
		t := user.ByModel[r.ModelName]
		t.Add(r.UsageTotals)
		user.ByModel[r.ModelName] = t
	}
	h.ByUser, h.ByModel = ranked(users), ranked(models)
	return h
}

// ranked lists the series with the most tokens first, then by label.
func ranked(in map[string]*UsageSeries) []UsageSeries {
	out := make([]UsageSeries, 0, len(in))
	for _, s := range in {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b UsageSeries) int {
		if c := cmp.Compare(b.Total.TotalTokens, a.Total.TotalTokens); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Label, b.Label), cmp.Compare(a.Key, b.Key))
	})
	return out
}

// dropThreadLedgerIndex drops the index budgets read before the ledger
// named its owner (idx_usage_thread_created): idx_usage_user_created
// replaces it, and an unused index costs every ledger insert.
func dropThreadLedgerIndex(tx *gorm.DB) error {
	if err := tx.Exec("DROP INDEX IF EXISTS idx_usage_thread_created").Error; err != nil {
		return fmt.Errorf("drop idx_usage_thread_created: %w", err)
	}
	return nil
}

// backfillLedgerOwners gives each ledger row without an owner
// (UsageEntry.UserID: rows from before it was recorded) its thread's
// owner (docs/DESIGN.md §6). It runs at every start, after the migration
// committed: on PostgreSQL it then holds row locks, never the migration's
// table lock, and other instances keep writing the ledger. One UPDATE …
// FROM (SQLite ≥ 3.33 and PostgreSQL alike), idempotent, finding the rows
// through idx_usage_user_created. After the first start it finds only
// rows a rolling upgrade's older instances wrote: the last instance
// started, after the last old one stopped, gives them theirs. A row whose
// thread is gone keeps "". On 1M rows of 1,000 threads (a shared 2-core
// machine): 4 s on SQLite, 15–25 s on PostgreSQL (whose migration
// transaction, the column and its index, took 1.5 s), then a few ms. The
// ANALYZE after lets PostgreSQL's plans know the owners now, not at
// autovacuum's next pass.
func (s *Store) backfillLedgerOwners() error {
	res := s.w.Exec("UPDATE usage_entries SET user_id = t.user_id FROM threads AS t " +
		"WHERE usage_entries.user_id = '' AND t.id = usage_entries.thread_id")
	if res.Error != nil {
		return fmt.Errorf("backfill the ledger's owners: %w", res.Error)
	}
	if s.pg && res.RowsAffected > 0 {
		if err := s.w.Exec("ANALYZE usage_entries").Error; err != nil {
			return fmt.Errorf("analyze the ledger: %w", err)
		}
	}
	return nil
}
