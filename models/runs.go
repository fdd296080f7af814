package models

import (
	"cmp"
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

// herdModelSQL is the model a ledger row's call counts under: its herd
// model, or for a row from before that was recorded, the provider's name.
const herdModelSQL = "COALESCE(NULLIF(herd_model, ''), model_name)"

// usageSelect sums ledger rows per lead-or-subagent and herd model.
const usageSelect = "task_id = '' AS lead, " + herdModelSQL + " AS model_name, SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens, SUM(total_tokens) AS total_tokens, SUM(cache_read_tokens) AS cache_read_tokens, COUNT(*) AS calls, "

// usageRow is one group of ledger rows.
type usageRow struct {
	RunID     string
	Lead      bool
	ModelName string
	UsageTotals
}

// Usage aggregates the ledger of a thread, or of one run when runID is set.
func (s *Store) Usage(ctx context.Context, threadID, runID string) (UsageReport, error) {
	q := s.r.WithContext(ctx).Model(&UsageEntry{}).
		Select(usageSelect+countTrue("unreported")+" AS unreported_calls").
		Where("thread_id = ?", threadID)
	if runID != "" {
		q = q.Where("run_id = ?", runID)
	}
	var rows []usageRow
	if err := q.Group("task_id = '', " + herdModelSQL).Find(&rows).Error; err != nil {
		return UsageReport{}, fmt.Errorf("store: usage: %w", err)
	}
	rep := UsageReport{ByModel: map[string]UsageTotals{}}
	for _, r := range rows {
		rep.Add(r.Lead, r.ModelName, r.UsageTotals)
	}
	return rep, nil
}

// UsageByRun aggregates a thread's ledger per run, in one query: the
// thread's page sets the runs other runs replaced apart. Calls of no run
// (the thread's title) are under "".
func (s *Store) UsageByRun(ctx context.Context, threadID string) (map[string]UsageReport, error) {
	var rows []usageRow
	err := s.r.WithContext(ctx).Model(&UsageEntry{}).
		Select("run_id, "+usageSelect+countTrue("unreported")+" AS unreported_calls").
		Where("thread_id = ?", threadID).
		Group("run_id, task_id = '', " + herdModelSQL).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: usage by run: %w", err)
	}
	out := map[string]UsageReport{}
	for _, r := range rows {
		rep := out[r.RunID]
		rep.Add(r.Lead, r.ModelName, r.UsageTotals)
		out[r.RunID] = rep
	}
	return out, nil
}

// Add counts t in the report: overall, for the lead or the subagents, and
// for its model. The store's aggregate and a run's own totals both use it.
func (rep *UsageReport) Add(lead bool, model string, t UsageTotals) {
	rep.Total.Add(t)
	if lead {
		rep.Lead.Add(t)
	} else {
		rep.Subagents.Add(t)
	}
	rep.addModel(model, t)
}

// addModel adds t into the model's totals.
func (rep *UsageReport) addModel(model string, t UsageTotals) {
	if rep.ByModel == nil {
		rep.ByModel = map[string]UsageTotals{}
	}
	m := rep.ByModel[model]
	m.Add(t)
	rep.ByModel[model] = m
}

// Count adds the call e into rep as the ledger's aggregate counts it:
// under the lead or the subagents and its herd model.
func (e UsageEntry) Count(rep *UsageReport) {
	t := UsageTotals{InputTokens: e.InputTokens, OutputTokens: e.OutputTokens, TotalTokens: e.TotalTokens, CacheReadTokens: e.CacheReadTokens, Calls: 1}
	if e.Unreported {
		t.UnreportedCalls = 1
	}
	rep.Add(e.TaskID == "", cmp.Or(e.HerdModel, e.ModelName), t)
}

// Merge adds report o into rep, part by part.
func (rep *UsageReport) Merge(o UsageReport) {
	rep.Total.Add(o.Total)
	rep.Lead.Add(o.Lead)
	rep.Subagents.Add(o.Subagents)
	for name, t := range o.ByModel {
		rep.addModel(name, t)
	}
}

// Add adds o into t.
func (t *UsageTotals) Add(o UsageTotals) {
	t.InputTokens += o.InputTokens
	t.OutputTokens += o.OutputTokens
	t.TotalTokens += o.TotalTokens
	t.CacheReadTokens += o.CacheReadTokens
	t.Calls += o.Calls
	t.UnreportedCalls += o.UnreportedCalls
}
