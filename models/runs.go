package models

import (
	"cmp"
	"context"
	"fmt"
	"time"
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

// RunsOf returns the runs of several threads, each thread's oldest
// first, in one query.
func (s *Store) RunsOf(ctx context.Context, threadIDs []string) (map[string][]Run, error) {
	out := make(map[string][]Run, len(threadIDs))
	if len(threadIDs) == 0 {
		return out, nil
	}
	runs, err := list[Run](s.r.WithContext(ctx).Where("thread_id IN ?", threadIDs).Order("started_at, id"), "runs")
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		out[r.ThreadID] = append(out[r.ThreadID], r)
	}
	return out, nil
}

// PickRun records that the user chose run runID's version of its answer
// (Run.PickedAt); ErrNotFound when the thread has no such run.
func (s *Store) PickRun(ctx context.Context, threadID, runID string, at time.Time) error {
	res := s.w.WithContext(ctx).Model(&Run{}).Where("id = ? AND thread_id = ?", runID, threadID).Update("picked_at", at.UTC())
	if res.Error != nil {
		return fmt.Errorf("store: pick run: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("store: pick run %s: %w", runID, ErrNotFound)
	}
	return nil
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
	// LostCalls is how many of UnreportedCalls were cut by a restart or
	// a lost instance (UsageEntry.Lost), which the figures name apart.
	LostCalls int64 `json:"lost_calls"`
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

// usageCounts is the SQL counting a group's unreported and lost calls, of
// the ledger's columns as qualified by q ("" or "u."). A lost row is
// unreported whatever its Unreported says: its zeros are never figures.
func usageCounts(q string) string {
	return countTrue(q+"unreported OR "+q+"lost") + " AS unreported_calls, " + countTrue(q+"lost") + " AS lost_calls"
}

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
		Select(usageSelect+usageCounts("")).
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
		Select("run_id, "+usageSelect+usageCounts("")).
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
	if e.Unreported || e.Lost {
		t.UnreportedCalls = 1
	}
	if e.Lost {
		t.LostCalls = 1
	}
	rep.Add(e.TaskID == "", cmp.Or(e.HerdModel, e.ModelName), t)
}

// LostCall is the ledger row of a model call of userID's run runID's task
// taskID ("" for the lead), made with herd model herdModel, that a restart or a
// lost instance cut: its usage cannot be known, so it is counted as a
// call, unreported and lost, never as zero tokens (docs/DESIGN.md §6).
// The provider's name is unknown too; herdModel stands for it.
//
// Its call id is derived from the run, the task and key, so writing the
// same lost call again — a second resume of the same state — is ignored
// by the ledger's insert-or-ignore, and it is never counted twice. key
// must tell the task's lost calls apart and nothing else: the version of
// the last step the conversation committed before the cut, and the
// run's resume count that found it (run.resumed's resumes), e.g.
// "v12.r1" — the same state resumed again gives the same key, a call cut
// again after a resume a new one.
func LostCall(threadID, userID, runID, taskID, herdModel, key string) *UsageEntry {
	return &UsageEntry{
		CallID: "lost:" + runID + ":" + taskID + ":" + key, ThreadID: threadID, UserID: userID, RunID: runID, TaskID: taskID,
		ModelName: herdModel, HerdModel: herdModel, Unreported: true, Lost: true,
	}
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
	t.LostCalls += o.LostCalls
}
