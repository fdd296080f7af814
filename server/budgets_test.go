package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"herd/agent"
	"herd/models"
)

// budgetOf reads u's budget from GET /api/auth/me; nil when none applies.
func (u *user) budgetOf() *budgetJSON {
	u.a.t.Helper()
	var me struct {
		Budget *budgetJSON `json:"budget"`
	}
	u.mustJSON("GET", "/api/auth/me", nil, http.StatusOK, &me)
	return me.Budget
}

// runEnd is the run.end event of run runID of thread th.
func (a *testApp) runEnd(th, runID string) agent.RunEnd {
	a.t.Helper()
	evs, _, err := a.store.Events(context.Background(), th, models.EventFilter{RunID: runID, EventTypes: []string{"run.end"}, Limit: 10})
	if err != nil || len(evs) != 1 {
		a.t.Fatalf("run.end of %s: %d events, %v", runID, len(evs), err)
	}
	var end agent.RunEnd
	if err := json.Unmarshal(evs[0].Content, &end); err != nil {
		a.t.Fatal(err)
	}
	return end
}

// TestBudgetStopsADemoRun is the test at HTTP level: a budget of
// 2,000 tokens a week stops a demo run that delegates a list with stop
// reason budget, its subagents stopped at their next model call with
// subagent_stop_reason budget, the run's end saying so with the reset
// time; the next run, a Retry included, is refused with the reset time
// (429 budget_exhausted), and /api/auth/me shows what is left.
func TestBudgetStopsADemoRun(t *testing.T) {
	a := newApp(t)
	admin, ann := a.newUser("admin@example.com", true), a.newUser("ann@example.com", false)
	if b := ann.budgetOf(); b != nil {
		t.Fatalf("a budget applies before any was set: %+v", b)
	}
	admin.mustJSON("PUT", "/api/admin/budgets", map[string]any{"default": map[string]any{"tokens": 2000, "period": "week"}}, http.StatusOK, nil)
	b := ann.budgetOf()
	_, monday, _ := models.PeriodBounds(models.PeriodWeek, time.Now())
	if b == nil || b.Limit != 2000 || b.Used != 0 || b.Period != "week" || b.ResetsAt != monday.Format(time.RFC3339) {
		t.Fatalf("ann's budget = %+v, want 2000 a week, resetting %v", b, monday)
	}

	th := ann.newThread("")
	run := ann.startRun(th, "Look into each of these:\n- the alpha logs\n- the beta logs\n- the gamma logs\n- the delta logs\n- the epsilon logs\n- the zeta logs")
	a.waitIdle(th)
	end := a.runEnd(th, run)
	t.Logf("run end: %+v used %d", end, end.Usage.Total.TotalTokens)
	if end.StopReason != "budget" || end.Status != models.RunCancelled || !strings.Contains(end.Notice, "Stopped: the token budget for this period is used up (resets "+agent.ResetTime(monday)+")") {
		t.Fatalf("run end = %+v, want stopped by the budget", end)
	}
	cards, err := a.store.Messages(context.Background(), th)
	if err != nil {
		t.Fatal(err)
	}
	capped := 0
	for _, m := range cards {
		if m.Type == agent.TypeTool && strings.Contains(string(m.AdditionalKwargs), `"subagent_stop_reason":"budget"`) {
			capped++
		}
	}
	if capped == 0 {
		t.Errorf("no subagent was stopped by the budget: %d messages", len(cards))
	}

	used := ann.budgetOf()
	if used == nil || used.Used < 2000 || used.Used != end.Usage.Total.TotalTokens {
		t.Fatalf("after the run, /api/auth/me says %+v; the run used %d", used, end.Usage.Total.TotalTokens)
	}
	r := ann.do("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "more"})
	var refusal struct {
		Error struct {
			Code, Message string
			ResetsAt      string `json:"resets_at"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &refusal)
	if r.status != http.StatusTooManyRequests || refusal.Error.Code != "budget_exhausted" || refusal.Error.ResetsAt != monday.Format(time.RFC3339) ||
		!strings.Contains(refusal.Error.Message, "resets "+agent.ResetTime(monday)) || r.header.Get("Retry-After") == "" {
		t.Fatalf("the next run: %d %s (Retry-After %q)", r.status, r.body, r.header.Get("Retry-After"))
	}
	if r := ann.do("POST", "/api/threads/"+th+"/runs/"+run+"/retry", nil); r.status != http.StatusTooManyRequests || r.errorCode() != "budget_exhausted" {
		t.Fatalf("a Retry: %d %s", r.status, r.body)
	}
	// Another user, under no budget of their own, is not held by ann's.
	admin.mustJSON("PUT", "/api/admin/budgets", map[string]any{"default": map[string]any{"tokens": 2000, "period": "week"}, "users": map[string]any{admin.id: map[string]any{"tokens": 0}}}, http.StatusOK, nil)
	if b := admin.budgetOf(); b != nil {
		t.Fatalf("the admin's own 0 leaves a budget: %+v", b)
	}
}

// TestBudgetsAPI: PUT /api/admin/budgets refuses bad input in plain
// words, keeping what was stored; what it stores GET answers and a user's
// next request sees at once.
func TestBudgetsAPI(t *testing.T) {
	a := newApp(t)
	admin, ann := a.newUser("admin@example.com", true), a.newUser("ann@example.com", false)
	good := map[string]any{"default": map[string]any{"tokens": 5000, "period": "day"}, "users": map[string]any{ann.id: map[string]any{"tokens": 100, "period": "month"}}}
	admin.mustJSON("PUT", "/api/admin/budgets", good, http.StatusOK, nil)
	for _, c := range []struct {
		name, body, code, words string
		status                  int
	}{
		{"period", `{"default": {"tokens": 10, "period": "year"}}`, "unprocessable", `default.period must be one of day, week, month, got "year"`, 422},
		{"no period", `{"default": {"tokens": 10}}`, "unprocessable", `default.period must be one of day, week, month, got ""`, 422},
		{"negative", `{"default": {"tokens": -5, "period": "day"}}`, "unprocessable", "default.tokens must be 0 (no budget) or more, got -5", 422},
		{"user's", `{"users": {"` + ann.id + `": {"tokens": 10, "period": "hour"}}}`, "unprocessable", "users." + ann.id + ".period", 422},
		{"unknown user", `{"users": {"nobody": {"tokens": 10, "period": "day"}}}`, "unprocessable", "users.nobody: no such user", 422},
		{"tokens as text", `{"default": {"tokens": "lots", "period": "day"}}`, "bad_request", "tokens", 400},
		{"unknown key", `{"default": {"tokens": 10, "period": "day"}, "cap": 1}`, "bad_request", "cap", 400},
	} {
		r := admin.do("PUT", "/api/admin/budgets", c.body)
		var e struct{ Error struct{ Message string } }
		_ = json.Unmarshal(r.body, &e)
		if r.status != c.status || r.errorCode() != c.code || !strings.Contains(e.Error.Message, c.words) {
			t.Errorf("%s: %d %s, want %d %s saying %q", c.name, r.status, r.body, c.status, c.code, c.words)
		}
	}
	var got Budgets
	admin.mustJSON("GET", "/api/admin/budgets", nil, http.StatusOK, &got)
	if got.Default != (BudgetRule{5000, "day"}) || len(got.Users) != 1 || got.Users[ann.id] != (BudgetRule{100, "month"}) {
		t.Fatalf("after refused changes the budgets are %+v", got)
	}
	if b := ann.budgetOf(); b == nil || b.Limit != 100 || b.Period != "month" {
		t.Fatalf("ann's own budget: %+v", b)
	}
	if b := admin.budgetOf(); b == nil || b.Limit != 5000 || b.Period != "day" {
		t.Fatalf("the default: %+v", b)
	}
	admin.mustJSON("PUT", "/api/admin/budgets", map[string]any{"default": map[string]any{"tokens": 0}}, http.StatusOK, nil)
	if b := ann.budgetOf(); b != nil {
		t.Fatalf("no budget left, yet ann has %+v", b)
	}
	for _, m := range []string{"GET", "PUT"} {
		if r := ann.do(m, "/api/admin/budgets", good); r.status != http.StatusForbidden {
			t.Errorf("%s /api/admin/budgets as a user: %d", m, r.status)
		}
	}
}

// TestBudgetCheckQueryCount: the check reads the ledger in one query
// however many threads and calls the user has, and not at all when no
// budget applies.
func TestBudgetCheckQueryCount(t *testing.T) {
	a := newApp(t)
	admin, ann := a.newUser("admin@example.com", true), a.newUser("ann@example.com", false)
	cost := func() int64 {
		before := a.store.Reads()
		ann.budgetOf()
		return a.store.Reads() - before
	}
	none := cost()
	admin.mustJSON("PUT", "/api/admin/budgets", map[string]any{"default": map[string]any{"tokens": 1_000_000, "period": "month"}}, http.StatusOK, nil)
	one := cost()
	var seeds []ledgerSeed
	for range 10 {
		th := ann.newThread("t")
		for d := range 5 {
			seeds = append(seeds, ledgerSeed{ann, th, "demo-fast", d, 10, 1, 0})
		}
	}
	a.seedLedger(time.Now(), seeds)
	if many := cost(); one != none+1 || many != one {
		t.Errorf("reads: %d without a budget, %d with one and no calls, %d over 10 threads and 50 calls", none, one, many)
	}
}

// TestAdminBudgetsForm: the usage page's form sets the default and a
// user's own budget (CSRF required, a user refused), refuses bad input
// in plain words keeping what was stored, and the page shows each user's
// spend of the period against their budget.
func TestAdminBudgetsForm(t *testing.T) {
	a := newApp(t)
	admin, ann := a.newUser("admin@example.com", true), a.newUser("ann@example.com", false)
	th := ann.newThread("t")
	a.seedLedger(time.Now(), []ledgerSeed{{ann, th, "demo-fast", 0, 300, 45, 0}})
	form := url.Values{"_csrf": {admin.csrf}, "default_tokens": {"5000"}, "default_period": {"day"}, "tokens_" + ann.id: {"1000"}, "period_" + ann.id: {"month"}, "tokens_" + admin.id: {""}, "period_" + admin.id: {"day"}}

	tok := admin.csrf
	admin.csrf = ""
	noCSRF := url.Values{}
	for k, v := range form {
		if k != "_csrf" {
			noCSRF[k] = v
		}
	}
	if r := admin.do("POST", "/admin/budgets", noCSRF); r.status != http.StatusForbidden {
		t.Errorf("the form without _csrf: %d", r.status)
	}
	admin.csrf = tok
	if r := ann.do("POST", "/admin/budgets", url.Values{"_csrf": {ann.csrf}, "default_tokens": {"1"}, "default_period": {"day"}}); r.status != http.StatusForbidden {
		t.Errorf("the form as a user: %d", r.status)
	}
	if b := ann.budgetOf(); b != nil {
		t.Fatalf("refused forms set a budget: %+v", b)
	}

	r := admin.do("POST", "/admin/budgets", form)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "Budgets saved.") {
		t.Fatalf("the form: %d", r.status)
	}
	if b := ann.budgetOf(); b == nil || b.Limit != 1000 || b.Period != "month" || b.Used != 345 {
		t.Fatalf("ann's budget after the form: %+v", b)
	}
	if b := admin.budgetOf(); b == nil || b.Limit != 5000 || b.Period != "day" {
		t.Fatalf("the default after the form: %+v", b)
	}
	page := string(admin.do("GET", "/admin/usage", nil).body)
	if !strings.Contains(page, `<tr data-user-id="`+ann.id+`">`) || !strings.Contains(page, "655 of 1,000, resets") {
		t.Errorf("the page does not show ann's spend against her budget")
	}

	bad := url.Values{"_csrf": {admin.csrf}, "default_tokens": {"lots"}, "default_period": {"day"}}
	if r := admin.do("POST", "/admin/budgets", bad); r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "the default must be a whole number of tokens") {
		t.Errorf("bad tokens: %d", r.status)
	}
	bad = url.Values{"_csrf": {admin.csrf}, "default_tokens": {"10"}, "default_period": {"year"}}
	if r := admin.do("POST", "/admin/budgets", bad); r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "default.period must be one of day, week, month") {
		t.Errorf("bad period: %d", r.status)
	}
	if b := ann.budgetOf(); b == nil || b.Limit != 1000 {
		t.Fatalf("refused forms changed ann's budget: %+v", b)
	}
}

// TestAccountBudget: the account page shows the user's budget and what
// their calls of its period cost at the models' prices; under the token
// gate, the share left and no cost; without a budget, neither.
func TestAccountBudget(t *testing.T) {
	fast := demoModel("demo-fast", 5, 1)
	fast.Price = &agent.ModelPrice{InputPerMTok: 3, OutputPerMTok: 15, Currency: "USD"}
	a := newApp(t, withModels(fast))
	admin, ann := a.newUser("admin@example.com", true), a.newUser("ann@example.com", false)
	page := func() string { return string(ann.do("GET", "/account", nil).body) }
	if p := page(); strings.Contains(p, "account-budget") {
		t.Fatal("the account page shows a budget before any was set")
	}
	th := ann.newThread("t")
	a.seedLedger(time.Now(), []ledgerSeed{{ann, th, "demo-fast", 0, 100_000, 10_000, 0}}) // 0.30 + 0.15 USD
	admin.mustJSON("PUT", "/api/admin/budgets", map[string]any{"users": map[string]any{ann.id: map[string]any{"tokens": 1_000_000, "period": "day"}}}, http.StatusOK, nil)
	p := page()
	if !strings.Contains(p, `<p id="account-budget">890,000 of 1,000,000 tokens left today, resets`) || !strings.Contains(p, "cost 0.45 USD at the models") {
		t.Errorf("the account page's budget and cost are wrong")
	}
	admin.mustJSON("PUT", "/api/admin/settings", map[string]bool{"token_usage_enabled": false}, http.StatusOK, nil)
	p = page()
	if !strings.Contains(p, `<p id="account-budget">89% of your token budget left today`) || strings.Contains(p, "account-cost") {
		t.Errorf("under the token gate the account page shows figures")
	}
}
