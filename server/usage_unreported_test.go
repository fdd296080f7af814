package server

import (
	"net/http"
	"strings"
	"testing"

	"herd/agent"
	"herd/models"
)

// usageReply is the thread usage API's answer.
type usageReply struct {
	Total     models.UsageTotals            `json:"total"`
	Lead      models.UsageTotals            `json:"lead"`
	Subagents models.UsageTotals            `json:"subagents"`
	ByModel   map[string]models.UsageTotals `json:"by_model"`
}

// runEndUsage is the usage run.end carried for the thread's only run.
func (u *user) runEndUsage(th string) models.UsageReport {
	u.a.t.Helper()
	var page struct {
		Events []struct {
			Content struct {
				Usage *models.UsageReport `json:"usage"`
			} `json:"content"`
		} `json:"events"`
	}
	u.mustJSON("GET", "/api/threads/"+th+"/events?event_types=run.end", nil, http.StatusOK, &page)
	if len(page.Events) != 1 || page.Events[0].Content.Usage == nil {
		u.a.t.Fatalf("run.end of %s: %+v", th, page)
	}
	return *page.Events[0].Content.Usage
}

// TestUsageNotReported: a model whose provider reports no usage (demo
// usage: false) still puts its calls in the ledger, marked not reported.
// A run on it alone and a mixed run (a reporting lead delegating to it)
// show "not reported for N calls" beside the figures of the reporting
// calls in run.end, the thread's usage JSON and page, and the admin's
// usage JSON and page — never a silent 0.
func TestUsageNotReported(t *testing.T) {
	a := newApp(t,
		withModels(demoModel("demo-fast", 0, 0), noUsage(demoModel("demo-quiet", 0, 0))),
		withSubagents(agent.SubagentsConfig{Agents: map[string]agent.AgentConfig{
			"quiet": {Description: "Reports no usage.", Model: "demo-quiet"},
		}}),
	)
	admin := a.newUser("root@example.com", true)
	u := a.newUser("ann@example.com", false)

	silent := u.newThread("silent")
	u.mustJSON("POST", "/api/threads/"+silent+"/runs", map[string]string{"content": "hello", "model": "demo-quiet"}, http.StatusAccepted, nil)
	a.waitIdle(silent)
	var s usageReply
	u.mustJSON("GET", "/api/threads/"+silent+"/usage", nil, http.StatusOK, &s)
	if s.Total.Calls == 0 || s.Total.UnreportedCalls != s.Total.Calls || s.Total.TotalTokens != 0 || s.ByModel["demo-quiet"].UnreportedCalls != s.Total.Calls {
		t.Errorf("silent thread usage %+v: every call should be there, not reported", s)
	}
	if got := u.runEndUsage(silent); got.Total != s.Total {
		t.Errorf("silent run.end usage %+v, thread %+v", got.Total, s.Total)
	}
	// Every call of the silent thread went unreported: its figures say
	// so in place of a number, never 0.
	page := string(u.do("GET", "/threads/"+silent, nil).body)
	for _, want := range []string{`data-usage="total">not reported<`, `data-usage="lead">not reported<`} {
		if !strings.Contains(page, want) {
			t.Errorf("silent thread page lacks %q", want)
		}
	}
	if strings.Contains(page, `data-usage="total">0<`) || strings.Contains(page, `data-usage="lead">0<`) {
		t.Error("silent thread page shows a 0 for usage that was not reported")
	}

	mixed := u.newThread("mixed")
	u.mustJSON("POST", "/api/threads/"+mixed+"/runs", map[string]string{"content": "Compare:\n- alpha\n- quiet: beta", "model": "demo-fast"}, http.StatusAccepted, nil)
	a.waitIdle(mixed)
	var m usageReply
	u.mustJSON("GET", "/api/threads/"+mixed+"/usage", nil, http.StatusOK, &m)
	fast, quiet := m.ByModel["demo-fast"], m.ByModel["demo-quiet"]
	if fast.Calls == 0 || fast.UnreportedCalls != 0 || fast.TotalTokens == 0 {
		t.Errorf("mixed: the reporting model's usage %+v", fast)
	}
	if quiet.Calls == 0 || quiet.UnreportedCalls != quiet.Calls || quiet.TotalTokens != 0 {
		t.Errorf("mixed: the silent model's usage %+v", quiet)
	}
	if m.Total.UnreportedCalls != quiet.Calls || m.Total.TotalTokens != fast.TotalTokens || m.Subagents.UnreportedCalls == 0 || m.Lead.UnreportedCalls != 0 {
		t.Errorf("mixed: totals %+v lead %+v subagents %+v", m.Total, m.Lead, m.Subagents)
	}
	if got := u.runEndUsage(mixed); got.Total != m.Total {
		t.Errorf("mixed run.end usage %+v, thread %+v", got.Total, m.Total)
	}
	page = string(u.do("GET", "/threads/"+mixed, nil).body)
	for _, want := range []string{notReportedText(m.Total.UnreportedCalls), groupDigits(m.Total.TotalTokens)} {
		if !strings.Contains(page, want) {
			t.Errorf("mixed thread page lacks %q", want)
		}
	}

	unreported := s.Total.UnreportedCalls + m.Total.UnreportedCalls
	var h usageHistoryReply
	admin.mustJSON("GET", "/api/admin/usage?days=2", nil, http.StatusOK, &h)
	if h.Totals.Total.UnreportedCalls != unreported || h.Totals.Total.Calls != s.Total.Calls+m.Total.Calls || h.Totals.Total.TotalTokens != m.Total.TotalTokens {
		t.Errorf("admin totals %+v, want %d calls of which %d not reported", h.Totals.Total, s.Total.Calls+m.Total.Calls, unreported)
	}
	for _, bm := range h.ByModel {
		if want := map[string]int64{"demo-fast": 0, "demo-quiet": unreported}[bm.Model]; bm.Total.UnreportedCalls != want {
			t.Errorf("admin %s: %d not reported, want %d", bm.Model, bm.Total.UnreportedCalls, want)
		}
	}
	adminPage := string(admin.do("GET", "/admin/usage?days=2", nil).body)
	if want := notReportedText(unreported); !strings.Contains(adminPage, want) {
		t.Errorf("admin usage page lacks %q", want)
	}
}

func notReportedText(n int64) string {
	if n == 1 {
		return "not reported for 1 call"
	}
	return "not reported for " + groupDigits(n) + " calls"
}
