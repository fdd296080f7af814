package views

import (
	"fmt"
	"time"
)

// BudgetText is the composer's line about the user's token budget
// (docs/DESIGN.md §6): tokens left of the limit, or, while token figures
// are hidden from chat views (the token gate, §9), the share left as a
// percentage; and when it resets. static/budget.js writes the same.
func BudgetText(limit, used int64, period string, resetsAt time.Time, showTokens bool) string {
	left := max(limit-used, 0)
	resets := resetsAt.UTC().Format("Mon 2 Jan 2006, 15:04 UTC")
	when := PeriodPhrase(period)
	switch {
	case left == 0:
		return fmt.Sprintf("Your token budget for %s is used up; it resets %s.", when, resets)
	case showTokens:
		return fmt.Sprintf("%s of %s tokens left %s, resets %s.", groupThousands(left), groupThousands(limit), when, resets)
	}
	return fmt.Sprintf("%d%% of your token budget left %s, resets %s.", left*100/limit, when, resets)
}

// PeriodPhrase names the current budget period: today, this week, this
// month.
func PeriodPhrase(period string) string {
	if period == "day" {
		return "today"
	}
	return "this " + period
}
