package server

import (
	"context"

	"herd/agent"
	"herd/models"
)

// threadUsage is a thread's ledger as its page shows it (docs/DESIGN.md
// §6): the embedded report counts what the thread shows — its runs that
// no later run replaced, and its title call — so it is the sum of the
// cards and the lead on the page; Replaced counts the calls of the
// answers a Regenerate or an Edit replaced, which the page no longer
// shows but which were made (their sum with the report is every call of
// the thread). Runs and Title are the same figures per run, for the
// page, which moves a run's figures to Replaced when a later run
// replaces it live (static/usage-panel.js).
type threadUsage struct {
	models.UsageReport
	Replaced models.UsageTotals `json:"replaced"`
	Runs     []runUsage         `json:"runs"`
	// Title is the thread's calls that belong to no run: the model's
	// call that named the thread.
	Title models.UsageReport `json:"title"`
}

// runUsage is one run's calls, with what the page needs to tell whether
// a later run replaces them.
type runUsage struct {
	RunID    string             `json:"run_id"`
	Status   string             `json:"status"`
	Replaced bool               `json:"replaced"`
	Usage    models.UsageReport `json:"usage"`
}

// threadUsage reads the thread's ledger per run and splits it by what
// runs, the thread's runs oldest first (models.Store.Runs), replaced.
func (s *Server) threadUsage(ctx context.Context, threadID string, runs []models.Run) (threadUsage, error) {
	per, err := s.store.UsageByRun(ctx, threadID)
	if err != nil {
		return threadUsage{}, err
	}
	rp := agent.ReplacedIn(runs)
	u := threadUsage{Runs: make([]runUsage, 0, len(runs))}
	for _, r := range runs {
		rep := emptyOr(per[r.ID])
		delete(per, r.ID)
		ru := runUsage{RunID: r.ID, Status: r.Status, Replaced: rp.AnswerHidden(r.ID), Usage: rep}
		u.Runs = append(u.Runs, ru)
		if ru.Replaced {
			u.Replaced.Add(rep.Total)
		} else {
			u.UsageReport.Merge(rep)
		}
	}
	// What is left belongs to no run the thread has: its title call.
	for _, rep := range per {
		u.Title.Merge(rep)
	}
	u.Title = emptyOr(u.Title)
	u.UsageReport.Merge(u.Title)
	u.UsageReport = emptyOr(u.UsageReport)
	return u, nil
}

// emptyOr is rep with an empty, not nil, by-model map: JSON's {}.
func emptyOr(rep models.UsageReport) models.UsageReport {
	if rep.ByModel == nil {
		rep.ByModel = map[string]models.UsageTotals{}
	}
	return rep
}
