package server

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/net/html"

	"herd/agent"
	"herd/models"
)

// ledgerSeed is a usage ledger row a test writes, and the sums it expects.
type ledgerSeed struct {
	user      *user
	thread    string
	model     string
	daysAgo   int
	in, out   int64
	cacheRead int64
}

// seedLedger writes rows straight to the ledger, each daysAgo whole UTC
// days before now (at 01:00 UTC, so a test running near midnight keeps
// them on their day).
func (a *testApp) seedLedger(now time.Time, seeds []ledgerSeed) {
	a.t.Helper()
	today := now.UTC().Truncate(24 * time.Hour)
	for _, sd := range seeds {
		e := &models.UsageEntry{
			CallID: uuid.NewString(), ThreadID: sd.thread, UserID: sd.user.id, RunID: uuid.NewString(), ModelName: sd.model,
			InputTokens: sd.in, OutputTokens: sd.out, TotalTokens: sd.in + sd.out, CacheReadTokens: sd.cacheRead,
			CreatedAt: today.AddDate(0, 0, -sd.daysAgo).Add(time.Hour),
		}
		if err := a.writer.Write(context.Background(), models.Record{Usage: e}); err != nil {
			a.t.Fatal(err)
		}
	}
}

// usageHistoryReply is GET /api/admin/usage as a client reads it.
type usageHistoryReply struct {
	Days   []string `json:"days"`
	ByUser []struct {
		UserID string               `json:"user_id"`
		Email  string               `json:"email"`
		Total  models.UsageTotals   `json:"total"`
		Days   []models.UsageTotals `json:"days"`
	} `json:"by_user"`
	ByModel []struct {
		Model       string               `json:"model"`
		DisplayName string               `json:"display_name"`
		Total       models.UsageTotals   `json:"total"`
		Days        []models.UsageTotals `json:"days"`
	} `json:"by_model"`
	Totals struct {
		Total models.UsageTotals   `json:"total"`
		Days  []models.UsageTotals `json:"days"`
	} `json:"totals"`
}

// sumSeeds adds up the seeds within the last n days that match.
func sumSeeds(seeds []ledgerSeed, n, daysAgo int, match func(ledgerSeed) bool) models.UsageTotals {
	var t models.UsageTotals
	for _, sd := range seeds {
		if sd.daysAgo >= n || (daysAgo >= 0 && sd.daysAgo != daysAgo) || !match(sd) {
			continue
		}
		t.InputTokens += sd.in
		t.OutputTokens += sd.out
		t.TotalTokens += sd.in + sd.out
		t.CacheReadTokens += sd.cacheRead
		t.Calls++
	}
	return t
}

// TestAdminUsage: the history's figures equal the sums of the ledger rows
// seeded across two users, two models and several days, per user, per
// model and per day; rows outside the range are left out; the admin page
// draws those figures as SVG; users get 403; a bad range is a 400; the
// token-usage switch changes nothing here.
func TestAdminUsage(t *testing.T) {
	a := newApp(t)
	admin := a.newUser("root@example.com", true)
	ann := a.newUser("ann@example.com", false)
	annTh, rootTh := ann.newThread("a"), admin.newThread("r")
	now := time.Now()
	seeds := []ledgerSeed{
		{ann, annTh, "demo-fast", 0, 1200, 34, 0},
		{ann, annTh, "demo-deep", 0, 500, 5, 100},
		{ann, annTh, "demo-deep", 0, 300, 3, 50},
		{ann, annTh, "demo-fast", 1, 70, 7, 0},
		{admin, rootTh, "demo-deep", 1, 2000, 222, 0},
		{admin, rootTh, "demo-fast", 3, 9, 1, 0},
		{ann, annTh, "demo-deep", 29, 40, 4, 0},        // the first day of 30
		{admin, rootTh, "demo-fast", 30, 100000, 1, 0}, // the day before: only in longer ranges
	}
	a.seedLedger(now, seeds)

	for _, n := range []int{30, 31, 7} {
		var got usageHistoryReply
		admin.mustJSON("GET", fmt.Sprintf("/api/admin/usage?days=%d", n), nil, http.StatusOK, &got)
		checkUsageReply(t, n, now, seeds, got, map[string]*user{admin.id: admin, ann.id: ann})
	}

	// The switch governs chat views only: with it off the accounting is whole.
	admin.mustJSON("PUT", "/api/admin/settings", map[string]bool{"token_usage_enabled": false}, http.StatusOK, nil)
	var def usageHistoryReply
	admin.mustJSON("GET", "/api/admin/usage", nil, http.StatusOK, &def)
	checkUsageReply(t, 30, now, seeds, def, map[string]*user{admin.id: admin, ann.id: ann})

	page := admin.do("GET", "/admin/usage", nil)
	if page.status != http.StatusOK {
		t.Fatalf("GET /admin/usage: %d", page.status)
	}
	checkUsagePage(t, string(page.body), now, seeds)

	for _, path := range []string{"/admin/usage", "/api/admin/usage", "/api/admin/usage?days=7"} {
		if r := ann.do("GET", path, nil); r.status != http.StatusForbidden || strings.Contains(string(r.body), "1,234") {
			t.Errorf("a user's GET %s: %d, want 403", path, r.status)
		}
		if r := a.anonymous().do("GET", path, nil); r.status != http.StatusUnauthorized && r.status != http.StatusSeeOther {
			t.Errorf("an anonymous GET %s: %d, want 401 or a redirect to sign in", path, r.status)
		}
	}
	for _, bad := range []string{"0", "366", "-1", "abc", "1.5", "30d"} {
		r := admin.do("GET", "/api/admin/usage?days="+bad, nil)
		if r.status != http.StatusBadRequest || r.errorCode() != "bad_request" || !strings.Contains(string(r.body), "days must be a whole number from 1 to 365") {
			t.Errorf("days=%s: %d %s, want 400 naming the range", bad, r.status, r.body)
		}
		if r := admin.do("GET", "/admin/usage?days="+bad, nil); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "from 1 to 365") {
			t.Errorf("page days=%s: %d, want a 400 page naming the range", bad, r.status)
		}
	}
}

func checkUsageReply(t *testing.T, n int, now time.Time, seeds []ledgerSeed, got usageHistoryReply, users map[string]*user) {
	t.Helper()
	today := now.UTC().Truncate(24 * time.Hour)
	if len(got.Days) != n || got.Days[n-1] != today.Format(time.DateOnly) || got.Days[0] != today.AddDate(0, 0, 1-n).Format(time.DateOnly) {
		t.Fatalf("days=%d: days %v, want %d days ending today (%s)", n, got.Days, n, today.Format(time.DateOnly))
	}
	all := func(ledgerSeed) bool { return true }
	if want := sumSeeds(seeds, n, -1, all); got.Totals.Total != want {
		t.Errorf("days=%d: total %+v, want %+v", n, got.Totals.Total, want)
	}
	for i, d := range got.Totals.Days {
		if want := sumSeeds(seeds, n, n-1-i, all); d != want {
			t.Errorf("days=%d: %s total %+v, want %+v", n, got.Days[i], d, want)
		}
	}
	wantUsers := 0
	for _, u := range users {
		if sumSeeds(seeds, n, -1, func(sd ledgerSeed) bool { return sd.user == u }).Calls > 0 {
			wantUsers++
		}
	}
	if len(got.ByUser) != wantUsers {
		t.Errorf("days=%d: %d users, want %d", n, len(got.ByUser), wantUsers)
	}
	for _, line := range got.ByUser {
		u := users[line.UserID]
		if u == nil || line.Email != u.email {
			t.Fatalf("days=%d: a line for %q (%s), who seeded nothing", n, line.UserID, line.Email)
		}
		mine := func(sd ledgerSeed) bool { return sd.user == u }
		if want := sumSeeds(seeds, n, -1, mine); line.Total != want {
			t.Errorf("days=%d: %s total %+v, want %+v", n, u.email, line.Total, want)
		}
		for i, d := range line.Days {
			if want := sumSeeds(seeds, n, n-1-i, mine); d != want {
				t.Errorf("days=%d: %s on %s %+v, want %+v", n, u.email, got.Days[i], d, want)
			}
		}
	}
	for _, line := range got.ByModel {
		model := func(sd ledgerSeed) bool { return sd.model == line.Model }
		if want := sumSeeds(seeds, n, -1, model); line.Total != want || line.Total.Calls == 0 {
			t.Errorf("days=%d: %s total %+v, want %+v", n, line.Model, line.Total, want)
		}
		for i, d := range line.Days {
			if want := sumSeeds(seeds, n, n-1-i, model); d != want {
				t.Errorf("days=%d: %s on %s %+v, want %+v", n, line.Model, got.Days[i], d, want)
			}
		}
		if line.DisplayName != strings.ToUpper(line.Model[:1])+line.Model[1:] {
			t.Errorf("%s is displayed as %q", line.Model, line.DisplayName)
		}
	}
	if len(got.ByModel) != 2 {
		t.Errorf("days=%d: %d models, want 2", n, len(got.ByModel))
	}
}

// checkUsagePage finds every seeded figure of the last 30 days in the
// page: each day's bar part per user and per model carries its total, and
// the tables carry the totals; the page runs no script of its own.
func checkUsagePage(t *testing.T, body string, now time.Time, seeds []ledgerSeed) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	titles := map[string]bool{}
	svgs, scripts := 0, 0
	for n := range doc.Descendants() {
		if n.Type != html.ElementNode {
			continue
		}
		switch n.Data {
		case "svg":
			svgs++
		case "script":
			scripts++
			if attrOf(n, "type") != "module" || attrOf(n, "src") == "" || n.FirstChild != nil {
				t.Errorf("a script that is not the app's module: %s", attrOf(n, "src"))
			}
		case "title":
			if n.Parent != nil && n.Parent.Data == "rect" && n.FirstChild != nil {
				titles[n.FirstChild.Data] = true
			}
		}
		for _, a := range n.Attr {
			if a.Key == "style" || strings.HasPrefix(a.Key, "on") {
				t.Errorf("<%s %s>: inline style or handler", n.Data, a.Key)
			}
		}
	}
	if svgs != 2 || scripts != 1 {
		t.Errorf("%d charts and %d scripts, want 2 and 1", svgs, scripts)
	}
	today := now.UTC().Truncate(24 * time.Hour)
	for d := range 30 {
		day := today.AddDate(0, 0, -d).Format("Mon 2 Jan 2006")
		for _, label := range []string{"root@example.com", "ann@example.com", "Demo-fast", "Demo-deep"} {
			want := sumSeeds(seeds, 30, d, func(sd ledgerSeed) bool {
				return sd.user.email == label || strings.EqualFold(sd.model, label)
			})
			title := fmt.Sprintf("%s · %s: %s tokens", day, label, groupDigits(want.TotalTokens))
			if titles[title] != (want.Calls > 0) {
				t.Errorf("bar %q drawn = %v, want %v", title, titles[title], want.Calls > 0)
			}
		}
	}
	total := sumSeeds(seeds, 30, -1, func(ledgerSeed) bool { return true })
	if !strings.Contains(body, "data-usage-total>"+groupDigits(total.TotalTokens)+"<") {
		t.Errorf("the page's total is not %s", groupDigits(total.TotalTokens))
	}
	for _, want := range []string{"ann@example.com", "root@example.com", "Demo-fast", "Demo-deep", "/api/admin/usage?days=30"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

func attrOf(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// groupDigits writes 1234567 as 1,234,567, as the page does.
func groupDigits(n int64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// TestAdminUsageQueryCount: the history costs the same queries for one
// user on one day as for many users, models and days (no N+1).
func TestAdminUsageQueryCount(t *testing.T) {
	a := newApp(t)
	admin := a.newUser("root@example.com", true)
	th := admin.newThread("r")
	now := time.Now()
	a.seedLedger(now, []ledgerSeed{{admin, th, "demo-fast", 0, 10, 1, 0}})
	cost := func() int64 {
		before := a.store.Reads()
		for _, p := range []string{"/admin/usage?days=365", "/api/admin/usage?days=365"} {
			if r := admin.do("GET", p, nil); r.status != http.StatusOK {
				t.Fatalf("GET %s: %d", p, r.status)
			}
		}
		return a.store.Reads() - before
	}
	one := cost()
	var seeds []ledgerSeed
	for i := range 12 {
		u := a.newUser(fmt.Sprintf("u%d@example.com", i), false)
		uth := u.newThread("t")
		for d := range 20 {
			seeds = append(seeds, ledgerSeed{u, uth, []string{"demo-fast", "demo-deep", "other"}[d%3], d * 7, 10, 1, 0})
		}
	}
	a.seedLedger(now, seeds)
	if many := cost(); many != one || one == 0 {
		t.Errorf("queries: %d for one user on one day, %d for 13 users over 140 days", one, many)
	}
}

// TestAdminUsageOfRuns: real runs of two users on two models land in the
// history exactly as in their threads' own usage: the same ledger, summed
// per user and per model.
func TestAdminUsageOfRuns(t *testing.T) {
	a := newApp(t)
	admin := a.newUser("root@example.com", true)
	ann := a.newUser("ann@example.com", false)
	type threadUsage struct {
		Total   models.UsageTotals            `json:"total"`
		ByModel map[string]models.UsageTotals `json:"by_model"`
	}
	wantUser := map[string]models.UsageTotals{}
	wantModel := map[string]models.UsageTotals{}
	var wantTotal models.UsageTotals
	add := func(into *models.UsageTotals, t models.UsageTotals) {
		into.InputTokens += t.InputTokens
		into.OutputTokens += t.OutputTokens
		into.TotalTokens += t.TotalTokens
		into.CacheReadTokens += t.CacheReadTokens
		into.Calls += t.Calls
	}
	for _, run := range []struct {
		who   *user
		model string
	}{{ann, "demo-deep"}, {ann, "demo-fast"}, {admin, "demo-fast"}} {
		th := run.who.newThread(run.model)
		run.who.mustJSON("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "Compare:\n- alpha\n- beta", "model": run.model}, http.StatusAccepted, nil)
		a.waitIdle(th)
		var u threadUsage
		run.who.mustJSON("GET", "/api/threads/"+th+"/usage", nil, http.StatusOK, &u)
		if u.Total.Calls == 0 {
			t.Fatalf("the %s run reported no usage", run.model)
		}
		w := wantUser[run.who.id]
		add(&w, u.Total)
		wantUser[run.who.id] = w
		add(&wantTotal, u.Total)
		for m, mt := range u.ByModel {
			w := wantModel[m]
			add(&w, mt)
			wantModel[m] = w
		}
	}
	var got usageHistoryReply
	admin.mustJSON("GET", "/api/admin/usage?days=2", nil, http.StatusOK, &got) // 2: a run may cross midnight
	if got.Totals.Total != wantTotal {
		t.Errorf("total %+v, want the threads' %+v", got.Totals.Total, wantTotal)
	}
	if len(got.ByUser) != 2 || len(got.ByModel) != len(wantModel) {
		t.Fatalf("%d users and %d models, want 2 and %d", len(got.ByUser), len(got.ByModel), len(wantModel))
	}
	for _, u := range got.ByUser {
		if u.Total != wantUser[u.UserID] {
			t.Errorf("%s: %+v, want %+v", u.Email, u.Total, wantUser[u.UserID])
		}
	}
	for _, m := range got.ByModel {
		if m.Total != wantModel[m.Model] {
			t.Errorf("%s: %+v, want %+v", m.Model, m.Total, wantModel[m.Model])
		}
	}
}

// TestAdminUsageCost: models with prices turn usage into cost on the
// usage page and in its JSON, per currency, per user and per model; a
// model without a price adds no cost.
func TestAdminUsageCost(t *testing.T) {
	fast, deep := demoModel("demo-fast", 5, 1), demoModel("demo-deep", 10, 1)
	fast.Price = &agent.ModelPrice{InputPerMTok: 2, OutputPerMTok: 10, Currency: "USD"}
	deep.Price = &agent.ModelPrice{InputPerMTok: 1, OutputPerMTok: 4, Currency: "EUR"}
	a := newApp(t, withModels(fast, deep))
	root, ann := a.newUser("root@example.com", true), a.newUser("ann@example.com", false)
	th, rth := ann.newThread("t"), root.newThread("r")
	a.seedLedger(time.Now(), []ledgerSeed{
		{ann, th, "demo-fast", 0, 1_000_000, 100_000, 0}, // 2 + 1 USD
		{ann, th, "demo-deep", 1, 500_000, 0, 0},         // 0.50 EUR
		{root, rth, "gpt-4o", 0, 9_000_000, 0, 0},        // no price
		{root, rth, "demo-fast", 2, 1000, 0, 0},          // 0.002 USD
	})
	var out struct {
		ByUser []struct {
			Email string
			Cost  map[string]float64
		} `json:"by_user"`
		ByModel []struct {
			Model string
			Cost  map[string]float64
		} `json:"by_model"`
		Totals struct{ Cost map[string]float64 }
	}
	root.mustJSON("GET", "/api/admin/usage?days=7", nil, http.StatusOK, &out)
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	if c := out.Totals.Cost; len(c) != 2 || !near(c["USD"], 3.002) || !near(c["EUR"], 0.5) {
		t.Errorf("total cost %v, want 3.002 USD and 0.50 EUR", c)
	}
	for _, u := range out.ByUser {
		switch u.Email {
		case ann.email:
			if !near(u.Cost["USD"], 3) || !near(u.Cost["EUR"], 0.5) {
				t.Errorf("ann's cost %v", u.Cost)
			}
		case root.email:
			if len(u.Cost) != 1 || !near(u.Cost["USD"], 0.002) {
				t.Errorf("root's cost %v, want only the priced model's", u.Cost)
			}
		}
	}
	for _, m := range out.ByModel {
		if m.Model == "gpt-4o" && m.Cost != nil {
			t.Errorf("a model without a price costs %v", m.Cost)
		}
	}
	page := string(root.do("GET", "/admin/usage?days=7", nil).body)
	for _, want := range []string{`<dd data-usage-cost>0.50 EUR + 3.00 USD</dd>`, `<td data-cost>0.50 EUR + 3.00 USD</td>`, `<td data-cost>0.0020 USD</td>`, `<td data-cost>—</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}
