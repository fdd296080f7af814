package models

import (
	"context"
	"fmt"
	"time"
)

// UsedTokens sums the ledger's tokens of the calls made for userID over
// [start, end): what a budget period has used (docs/DESIGN.md §6),
// threads since deleted included. One query on the ledger alone, through
// idx_usage_user_created: only the user's rows of the period.
func (s *Store) UsedTokens(ctx context.Context, userID string, start, end time.Time) (int64, error) {
	var used int64
	if err := s.r.WithContext(ctx).Raw(usedTokensSQL, userID, start.UTC(), end.UTC()).Scan(&used).Error; err != nil {
		return 0, fmt.Errorf("store: used tokens: %w", err)
	}
	return used, nil
}

const usedTokensSQL = "SELECT COALESCE(SUM(u.total_tokens), 0) FROM usage_entries AS u " +
	"WHERE u.user_id = ? AND u.created_at >= ? AND u.created_at < ?"

// UsedTokensByUser sums the ledger's tokens over [start, end) per owner of
// the calls, for the admin's usage page: one query per period.
func (s *Store) UsedTokensByUser(ctx context.Context, start, end time.Time) (map[string]int64, error) {
	var rows []struct {
		UserID string
		Used   int64
	}
	err := s.r.WithContext(ctx).Table("usage_entries AS u").
		Select("u.user_id AS user_id, SUM(u.total_tokens) AS used").
		Where("u.created_at >= ? AND u.created_at < ?", start.UTC(), end.UTC()).
		Group("u.user_id").
		Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: used tokens by user: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.UserID] = r.Used
	}
	return out, nil
}

// Budget periods: UTC calendar periods, weeks from Monday (docs/DESIGN.md
// §6).
const (
	PeriodDay   = "day"
	PeriodWeek  = "week"
	PeriodMonth = "month"
)

// PeriodBounds is the UTC calendar period of kind period (PeriodDay,
// PeriodWeek, PeriodMonth) that holds at: its start and its end, the
// instant it resets. ok is false for an unknown period.
func PeriodBounds(period string, at time.Time) (start, end time.Time, ok bool) {
	at = at.UTC()
	day := time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, time.UTC)
	switch period {
	case PeriodDay:
		return day, day.AddDate(0, 0, 1), true
	case PeriodWeek:
		start = day.AddDate(0, 0, -(int(day.Weekday())+6)%7) // back to Monday
		return start, start.AddDate(0, 0, 7), true
	case PeriodMonth:
		start = time.Date(at.Year(), at.Month(), 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0), true
	}
	return time.Time{}, time.Time{}, false
}

// UsedByModel sums userID's ledger over [start, end) per herd model, for
// the cost of their period (models' prices): one query, through the same
// index as UsedTokens.
func (s *Store) UsedByModel(ctx context.Context, userID string, start, end time.Time) (map[string]UsageTotals, error) {
	var rows []struct {
		ModelName string
		UsageTotals
	}
	err := s.r.WithContext(ctx).Table("usage_entries AS u").
		Select(usageModelSQL+" AS model_name, SUM(u.input_tokens) AS input_tokens, SUM(u.output_tokens) AS output_tokens, SUM(u.total_tokens) AS total_tokens, COUNT(*) AS calls").
		Where("u.user_id = ? AND u.created_at >= ? AND u.created_at < ?", userID, start.UTC(), end.UTC()).
		Group(usageModelSQL).
		Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: used by model: %w", err)
	}
	out := make(map[string]UsageTotals, len(rows))
	for _, r := range rows {
		out[r.ModelName] = r.UsageTotals
	}
	return out, nil
}
