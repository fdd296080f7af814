package server

import (
	"context"
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

// TestUsageLostCalls: a call a restart cut (models.LostCall, as the
// resume engine writes it) counts as a call, inside unreported_calls and
// in lost_calls, with no tokens, once however often it is written; the
// thread's usage JSON and page and the admin's JSON and page name it
// apart from the calls whose provider reported nothing — "1 call cut by
// a restart", then "2 calls" — never folding both kinds into one count.
func TestUsageLostCalls(t *testing.T) {
	a := newApp(t,
		withModels(demoModel("demo-fast", 0, 0), noUsage(demoModel("demo-quiet", 0, 0))),
		withSubagents(agent.SubagentsConfig{Agents: map[string]agent.AgentConfig{
			"quiet": {Description: "Reports no usage.", Model: "demo-quiet"},
		}}),
	)
	admin := a.newUser("root@example.com", true)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("cut")
	u.mustJSON("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "Compare:\n- alpha\n- quiet: beta", "model": "demo-fast"}, http.StatusAccepted, nil)
	a.waitIdle(th)
	runs, err := a.store.Runs(context.Background(), th)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %v, %v", runs, err)
	}
	var before usageReply
	u.mustJSON("GET", "/api/threads/"+th+"/usage", nil, http.StatusOK, &before)
	quiet := before.Total.UnreportedCalls
	if quiet == 0 || before.Total.LostCalls != 0 || before.Total.TotalTokens == 0 {
		t.Fatalf("before any cut: %+v, want reported and unreported calls, none lost", before.Total)
	}
	if raw := string(u.do("GET", "/api/threads/"+th+"/usage", nil).body); !strings.Contains(raw, `"lost_calls":0`) {
		t.Errorf("the usage JSON omits lost_calls when 0: %s", raw)
	}
	cut := func(key string) {
		t.Helper()
		if err := a.writer.Write(context.Background(), models.Record{Usage: models.LostCall(th, runs[0].UserID, runs[0].ID, "call_quiet", "demo-quiet", key)}); err != nil {
			t.Fatal(err)
		}
	}
	others := notReportedText(quiet)
	for _, step := range []struct {
		keys []string // written now; a repeat is the same lost call
		lost int64
		note string
	}{
		{[]string{"v3.r1"}, 1, "1 call cut by a restart: usage not reported"},
		{[]string{"v3.r1", "v5.r2", "v5.r2"}, 2, "2 calls cut by a restart: usage not reported"},
	} {
		for _, k := range step.keys {
			cut(k)
		}
		var got usageReply
		u.mustJSON("GET", "/api/threads/"+th+"/usage", nil, http.StatusOK, &got)
		want := before.Total
		want.Calls += step.lost
		want.UnreportedCalls += step.lost
		want.LostCalls = step.lost
		if got.Total != want || got.Subagents.LostCalls != step.lost || got.ByModel["demo-quiet"].LostCalls != step.lost || got.Lead.LostCalls != 0 {
			t.Errorf("%d lost: thread usage %+v (subagents %+v, quiet %+v), want total %+v", step.lost, got.Total, got.Subagents, got.ByModel["demo-quiet"], want)
		}
		note := others + "; " + step.note
		page := string(u.do("GET", "/threads/"+th, nil).body)
		if !strings.Contains(page, `data-usage="unreported">`+note+`<`) {
			t.Errorf("%d lost: the thread page lacks %q", step.lost, note)
		}
		if strings.Contains(page, notReportedText(quiet+step.lost)) {
			t.Errorf("%d lost: the thread page counts the lost calls with the others", step.lost)
		}
		var h usageHistoryReply
		admin.mustJSON("GET", "/api/admin/usage?days=1", nil, http.StatusOK, &h)
		if h.Totals.Total != want {
			t.Errorf("%d lost: admin totals %+v, want %+v", step.lost, h.Totals.Total, want)
		}
		adminPage := string(admin.do("GET", "/admin/usage?days=1", nil).body)
		if !strings.Contains(adminPage, "Calls without token figures: "+note+".") {
			t.Errorf("%d lost: the admin page lacks %q", step.lost, note)
		}
	}
}
