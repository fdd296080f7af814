package models

import (
	"context"
	"fmt"
)

// ActiveRun returns the thread's running run, or ErrNotFound.
func (s *Store) ActiveRun(ctx context.Context, threadID string) (*Run, error) {
	return take[Run](s.r.WithContext(ctx).Where("thread_id = ? AND status = ?", threadID, RunRunning).Order("started_at DESC"), "active run")
}

// Run returns run id of thread threadID.
func (s *Store) Run(ctx context.Context, threadID, id string) (*Run, error) {
	return take[Run](s.r.WithContext(ctx).Where("id = ? AND thread_id = ?", id, threadID), "run")
}

// LastModel is the model of the thread's latest run, "" before its first:
// the model chosen for the thread, which its composer preselects. The runs
// already record it, so the thread keeps no copy that could disagree.
func (s *Store) LastModel(ctx context.Context, threadID string) (string, error) {
	var names []string
	err := s.r.WithContext(ctx).Model(&Run{}).Where("thread_id = ?", threadID).
		Order("started_at DESC, id DESC").Limit(1).Pluck("model_name", &names).Error
	if err != nil {
		return "", fmt.Errorf("store: last model: %w", err)
	}
	if len(names) == 0 {
		return "", nil
	}
	return names[0], nil
}

// Runs returns the thread's runs, oldest first.
func (s *Store) Runs(ctx context.Context, threadID string) ([]Run, error) {
	return list[Run](s.r.WithContext(ctx).Where("thread_id = ?", threadID).Order("started_at, id"), "runs")
}

// RunningRuns returns every run still marked running: at start, the runs
// a crash left behind.
func (s *Store) RunningRuns(ctx context.Context) ([]Run, error) {
	return list[Run](s.w.WithContext(ctx).Where("status = ?", RunRunning).Order("started_at"), "running runs")
}

// UsageTotals is a sum of ledger rows.
type UsageTotals struct {
	InputTokens     int64 `json:"input_tokens"`
	OutputTokens    int64 `json:"output_tokens"`
	TotalTokens     int64 `json:"total_tokens"`
	CacheReadTokens int64 `json:"cache_read_tokens"`
	Calls           int64 `json:"calls"`
	// UnreportedCalls is how many of Calls reported no usage: their
	// tokens are unknown, not 0.
	UnreportedCalls int64 `json:"unreported_calls"`
}

// UsageReport is the ledger aggregated for a thread or run (docs/DESIGN.md §6).
type UsageReport struct {
	Total     UsageTotals            `json:"total"`
	Lead      UsageTotals            `json:"lead"`
	Subagents UsageTotals            `json:"subagents"`
	ByModel   map[string]UsageTotals `json:"by_model"`
}

// Usage aggregates the ledger of a thread, or of one run when runID is set.
func (s *Store) Usage(ctx context.Context, threadID, runID string) (UsageReport, error) {
	type row struct {
		Lead      bool
		ModelName string
		UsageTotals
	}
	q := s.r.WithContext(ctx).Model(&UsageEntry{}).
		Select("task_id = '' AS lead, model_name, SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens, SUM(total_tokens) AS total_tokens, SUM(cache_read_tokens) AS cache_read_tokens, COUNT(*) AS calls, "+countTrue("unreported")+" AS unreported_calls").
		Where("thread_id = ?", threadID)
	if runID != "" {
		q = q.Where("run_id = ?", runID)
	}
	var rows []row
	if err := q.Group("task_id = '', model_name").Find(&rows).Error; err != nil {
		return UsageReport{}, fmt.Errorf("store: usage: %w", err)
	}
	rep := UsageReport{ByModel: map[string]UsageTotals{}}
	for _, r := range rows {
		rep.Add(r.Lead, r.ModelName, r.UsageTotals)
	}
	return rep, nil
}

// Add counts t in the report: overall, for the lead or the subagents, and
// for its model. The store's aggregate and a run's own totals both use it.
func (rep *UsageReport) Add(lead bool, model string, t UsageTotals) {
	rep.Total.add(t)
	if lead {
		rep.Lead.add(t)
	} else {
		rep.Subagents.add(t)
	}
	if rep.ByModel == nil {
		rep.ByModel = map[string]UsageTotals{}
	}
	m := rep.ByModel[model]
	m.add(t)
	rep.ByModel[model] = m
}

func (t *UsageTotals) add(o UsageTotals) {
	t.InputTokens += o.InputTokens
	t.OutputTokens += o.OutputTokens
	t.TotalTokens += o.TotalTokens
	t.CacheReadTokens += o.CacheReadTokens
	t.Calls += o.Calls
	t.UnreportedCalls += o.UnreportedCalls
}
