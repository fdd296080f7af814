package agent

import (
	"context"
	"fmt"
	"time"
)

// stopBudget is the stop reason of a run or subagent stopped because its
// user's token budget for the period is used up (docs/DESIGN.md §6).
const stopBudget = "budget"

// Budget is the token budget of the user who starts a run, for the UTC
// period the run starts in; the server reads it from the ledger
// (docs/DESIGN.md §6). A run is given one only when it has a limit.
type Budget struct {
	// Limit is the tokens the user may spend in the period.
	Limit int64
	// Used is what the ledger held for the user and the period when the
	// run started; the run's own calls are added as they are made.
	Used int64
	// ResetsAt is the period's end.
	ResetsAt time.Time
}

// Spent reports whether used tokens reach the limit.
func (b Budget) Spent(used int64) bool { return b.Limit > 0 && used >= b.Limit }

// BudgetNotice is what a run stopped by the budget says where it ended.
func BudgetNotice(resetsAt time.Time) string {
	return fmt.Sprintf("Stopped: the token budget for this period is used up (resets %s).", ResetTime(resetsAt))
}

// ResetTime writes when a budget resets, in UTC, as the notices say it.
func ResetTime(t time.Time) string { return t.UTC().Format("Mon 2 Jan 2006, 15:04 UTC") }

// budgetGuard is a run's budget during the run: what the ledger held at
// its start plus the run's own calls so far (its sink's totals). The lead
// checks it before each model call, and so does each subagent, so calls
// in flight finish and no new one starts once it is spent. nil: no budget.
type budgetGuard struct {
	Budget
	sink *runSink
	// counted are the tokens of the run's calls that Used holds already:
	// a resumed run's calls before the restart, which its sink's totals
	// start from (runSink.base).
	counted int64
}

// spent reports whether the run may make no further model call.
func (g *budgetGuard) spent() bool {
	if g == nil {
		return false
	}
	return g.Spent(g.Used + g.sink.totals().Total.TotalTokens - g.counted)
}

// resumedBudget is the budget of a run resumed for userID with sink: its
// user's as the ledger has it now (BudgetOf), which holds the run's calls
// before the restart; nil without one.
func (rt *Runtime) resumedBudget(ctx context.Context, userID string, sink *runSink) (*budgetGuard, error) {
	if rt.budgetOf == nil {
		return nil, nil
	}
	b, err := rt.budgetOf(ctx, userID)
	if err != nil || b.Limit <= 0 {
		return nil, err
	}
	return &budgetGuard{Budget: b, sink: sink, counted: sink.base.Total.TotalTokens}, nil
}

// why is the subagent's error when the budget stopped it before any
// output.
func (g *budgetGuard) why() string {
	return "the token budget for this period is used up (resets " + ResetTime(g.ResetsAt) + ")"
}
