package views

import (
	"testing"
	"time"
)

// TestBudgetText: tokens left, the share left under the token gate, and
// a budget used up, each with its reset time (static/budget.js writes the
// same; TestBrowserBudget reads it on the page).
func TestBudgetText(t *testing.T) {
	resets := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		used  int64
		shown bool
		want  string
	}{
		{750, true, "1,250 of 2,000 tokens left this week, resets Mon 7 Dec 2026, 00:00 UTC."},
		{750, false, "62% of your token budget left this week, resets Mon 7 Dec 2026, 00:00 UTC."},
		{2600, true, "Your token budget for this week is used up; it resets Mon 7 Dec 2026, 00:00 UTC."},
	} {
		if got := BudgetText(2000, c.used, "week", resets, c.shown); got != c.want {
			t.Errorf("used %d, shown %v: %q, want %q", c.used, c.shown, got, c.want)
		}
	}
	if got, want := BudgetText(100, 5, "day", resets, true), "95 of 100 tokens left today, resets Mon 7 Dec 2026, 00:00 UTC."; got != want {
		t.Errorf("a day's budget: %q, want %q", got, want)
	}
}
