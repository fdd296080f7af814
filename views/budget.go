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
	switch {
	case left == 0:
		return fmt.Sprintf("Your token budget for this %s is used up; it resets %s.", period, resets)
	case showTokens:
		return fmt.Sprintf("%s of %s tokens left this %s, resets %s.", groupThousands(left), groupThousands(limit), period, resets)
	}
	return fmt.Sprintf("%d%% of your token budget left this %s, resets %s.", left*100/limit, period, resets)
}
