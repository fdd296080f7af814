package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"herd/internal/pgtest"
)

// budgetOf is c's budget as GET /api/auth/me shows it; limit 0: none.
func budgetOf(c *client) (limit, used int64) {
	var me struct {
		Budget *struct{ Limit, Used int64 } `json:"budget"`
	}
	c.call("GET", "/api/auth/me", nil, &me)
	if me.Budget == nil {
		return 0, 0
	}
	return me.Budget.Limit, me.Budget.Used
}

// TestClusterBudgets: two instances on PostgreSQL seeded with a budget by
// the environment (budgets.default); the admin changes it on A and B
// applies it at once, through the settings' reread; a run on B stops
// with stop reason budget, and the ledger both share refuses the next
// run on A.
func TestClusterBudgets(t *testing.T) {
	t.Parallel() // its own data directories, schema and ports
	dsn := pgtest.DSN(t)
	env := clusterEnv(dsn, "HERD_BUDGETS_DEFAULT_TOKENS=2000", "HERD_BUDGETS_DEFAULT_PERIOD=week")
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca, cb := a.signIn(), b.signIn()
	if limit, _ := budgetOf(cb); limit != 2000 {
		t.Fatalf("B's budget from the environment: %d, want 2000", limit)
	}
	ca.call("PUT", "/api/admin/budgets", map[string]any{"default": map[string]any{"tokens": 1500, "period": "week"}}, nil)
	deadline := time.Now().Add(10 * time.Second)
	for limit, _ := budgetOf(cb); limit != 1500; limit, _ = budgetOf(cb) {
		if time.Now().After(deadline) {
			t.Fatalf("B still has a budget of %d tokens 10 s after A changed it to 1500", limit)
		}
		time.Sleep(20 * time.Millisecond)
	}

	var th struct{ ID string }
	cb.call("POST", "/api/threads", map[string]string{"title": "budget"}, &th)
	cb.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": "Look into each of these:\n- the alpha logs\n- the beta logs\n- the gamma logs\n- the delta logs"}, nil)
	waitRunEnd(t, cb, th.ID, 60*time.Second)
	var p struct {
		Events []struct {
			Content struct {
				StopReason string `json:"stop_reason"`
				Notice     string `json:"notice"`
			} `json:"content"`
		} `json:"events"`
	}
	cb.call("GET", "/api/threads/"+th.ID+"/events?event_types=run.end", nil, &p)
	if len(p.Events) != 1 || p.Events[0].Content.StopReason != "budget" || !strings.Contains(p.Events[0].Content.Notice, "token budget for this period is used up") {
		t.Fatalf("the run on B ended %+v, want stopped by the budget", p.Events)
	}
	if _, used := budgetOf(ca); used < 1500 {
		t.Fatalf("A sees %d tokens used", used)
	}
	code, body := ca.status("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": "more"})
	if code != http.StatusTooManyRequests || !strings.Contains(body, "budget_exhausted") || !strings.Contains(body, "resets_at") {
		t.Fatalf("the next run on A: %d %s", code, body)
	}
	stopHerd(t, a)
	stopHerd(t, b)
}
