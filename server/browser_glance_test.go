package server

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd/agent"
	"herd/models"
)

// The glance tests (issue 13, points 5–7): a card says what it does in
// words with its time, a run's timeline shows its shape live and the same
// after a reload, and the thread's figures are the sum of what the page
// shows, live, with no request while the run goes on.

// ticking reports whether the page's one clock runs.
func (b *browser) ticking() bool {
	b.t.Helper()
	return evalAwait[bool](b, `import("/static/clock.js").then((m) => m.ticking())`)
}

// themed and phone take the screenshots a visual change needs: dark, and
// a 390×844 phone (dark stays on for the phone).
func (b *browser) themedShots(name string) {
	b.t.Helper()
	b.shot(name + "-light")
	evalAs[chromedp.Void](b, `document.documentElement.dataset.theme = "dark"`)
	b.shot(name + "-dark")
	b.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	b.shot(name + "-phone")
	if w := evalAs[bool](b, `document.documentElement.scrollWidth > document.documentElement.clientWidth`); w {
		b.t.Errorf("%s: the page scrolls sideways on a 390px phone", name)
	}
	b.do("desktop viewport", chromedp.EmulateReset())
	evalAs[chromedp.Void](b, `delete document.documentElement.dataset.theme`)
}

// cardTimesJS is every card's time text, in page order.
const cardTimesJS = `[...document.querySelectorAll("#messages section.card .card-time")].map((t) => t.textContent)`

// TestBrowserCardWordsAndTime: a running card says what it does in words
// ("Running `sleep 4`") and its time ticks from one page clock; once
// ended it shows its total, the clock stops, the expanded steps have
// their times and the answer shows once; a reload shows the same times.
func TestBrowserCardWordsAndTime(t *testing.T) {
	a := newApp(t, withHostBash(t), withModels(demoModel("demo-fast", 200, 2)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("glance")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	b.sendMessage("Two jobs:\n- `sleep 4`\n- alpha")
	sleeper := cardJS("sleep 4")
	b.waitFor("the sleeping card says what it runs, with its time", sleeper+`?.querySelector(".card-status").textContent === "Running \u0060sleep 4\u0060"
		&& /^(<1s|\ds)$/.test(`+sleeper+`.querySelector(".card-time").textContent)`, 20*time.Second)
	if !b.ticking() {
		t.Error("the page clock is not running while a card runs")
	}
	// A hidden tab runs no clock; shown again, it ticks on.
	visibility := func(hidden bool) {
		evalAs[chromedp.Void](b, fmt.Sprintf(`Object.defineProperty(document, "hidden", { configurable: true, get: () => %v });
			document.dispatchEvent(new Event("visibilitychange"))`, hidden))
	}
	visibility(true)
	if b.ticking() {
		t.Error("the page clock runs in a hidden tab")
	}
	visibility(false)
	if !b.ticking() {
		t.Error("the page clock does not run again when the tab is shown")
	}
	first := evalAs[string](b, sleeper+`.querySelector(".card-time").textContent`)
	b.waitFor("its time to tick on", sleeper+`.querySelector(".card-time").textContent !== `+fmt.Sprintf("%q", first), 5*time.Second)
	b.shot("words-live")
	b.waitRunEnd(a, th)

	b.waitFor("the clock to stop with nothing live", `import("/static/clock.js").then((m) => !m.ticking())`, 5*time.Second)
	times := evalAs[[]string](b, cardTimesJS)
	total := regexp.MustCompile(`^(<1s|\d+s)$`)
	for i, s := range times {
		if !total.MatchString(s) {
			t.Errorf("card %d ended with time %q, want its total", i, s)
		}
	}
	if got := evalAs[string](b, sleeper+`.querySelector(".card-time").textContent`); got < "4s" || len(got) != 2 {
		t.Errorf("the sleep 4 card took %q, want at least 4s", got)
	}

	// Expand by keyboard: the head is a button.
	b.do("focus the card", chromedp.Focus(chromedp.CSS(`section.card .card-toggle`)))
	b.do("press Enter", chromedp.KeyEvent("\r"))
	b.waitFor("its steps with their times", `(() => {
		const c = document.querySelector("#messages section.card");
		const steps = [...c.querySelectorAll(".card-step")];
		return c.querySelector(".card-toggle").getAttribute("aria-expanded") === "true" && steps.length >= 3
			&& steps.every((s) => s.querySelector(".step-time").textContent !== "");
	})()`, 10*time.Second)
	once := evalAs[map[string]any](b, `(() => {
		const c = document.querySelector("#messages section.card");
		const result = c.querySelector(".card-result").textContent.trim();
		return {
			result,
			inSteps: [...c.querySelectorAll(".step-text")].filter((p) => p.textContent.trim() === result).length,
			notes: c.querySelectorAll(".step-note").length,
		};
	})()`)
	if once["result"] == "" || once["inSteps"] != float64(0) || once["notes"] != float64(1) {
		t.Errorf("the answer is not shown once when expanded: %v", once)
	}
	b.themedShots("words-ended")

	b.reload()
	if got := evalAs[[]string](b, cardTimesJS); !reflect.DeepEqual(got, times) {
		t.Errorf("after a reload the card times are %q, live they were %q", got, times)
	}
	if b.ticking() {
		t.Error("the page clock runs after a reload with nothing live")
	}
}

// timelineJS reads every run timeline: its summary, and each row's label,
// status, time, words and bars (class, left, width).
const timelineJS = `[...document.querySelectorAll(".run-timeline")].map((f) => ({
	summary: f.querySelector("summary").textContent,
	rows: [...f.querySelectorAll(".timeline-row")].map((r) => [
		r.querySelector(".timeline-label").textContent, r.dataset.status ?? "", r.querySelector(".timeline-time").textContent,
		r.querySelector(".visually-hidden").textContent,
		...[...r.querySelectorAll(".timeline-bar")].map((b) => b.className + " " + b.style.left + " " + b.style.width),
	].join(" | ")),
}))`

type timelineView struct {
	Summary string   `json:"summary"`
	Rows    []string `json:"rows"`
}

// TestBrowserRunTimeline: above a run's cards, a timeline shows one bar
// per card and the lead's calls, live while the run goes on (a card that
// waited for a slot shows its wait), and exactly the same after a reload.
func TestBrowserRunTimeline(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 300, 2)), withSubagents(agent.SubagentsConfig{MaxRunningPerUser: 2}))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("timeline")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	b.sendMessage("Three jobs:\n- alpha\n- beta\n- gamma")
	b.waitFor("a live timeline: the lead, two running, one waiting", `(() => {
		const f = document.querySelector(".run-timeline");
		const next = f?.nextElementSibling;
		return f && f.querySelectorAll(".timeline-row").length === 4 && f.querySelectorAll(".bar-running").length === 2
			&& f.querySelectorAll(".bar-queued").length === 1 && f.querySelector(".bar-lead") !== null
			&& next?.querySelector("section.card") !== null;
	})()`, 20*time.Second)
	b.shot("timeline-live")
	b.waitRunEnd(a, th)
	b.waitFor("the timeline ended", `document.querySelectorAll(".run-timeline .bar-completed").length === 3`, 10*time.Second)

	live := evalAs[[]timelineView](b, timelineJS)
	if len(live) != 1 || len(live[0].Rows) != 4 {
		t.Fatalf("timelines after the run: %+v", live)
	}
	for _, want := range []string{"3 subagents", "at most 2 at once", "1 waited for a slot"} {
		if !strings.Contains(live[0].Summary, want) {
			t.Errorf("the timeline's summary %q lacks %q", live[0].Summary, want)
		}
	}
	if !strings.HasPrefix(live[0].Rows[0], "Lead |") || !strings.Contains(live[0].Rows[0], "model calls") {
		t.Errorf("the lead's row reads %q", live[0].Rows[0])
	}
	for _, r := range live[0].Rows[1:] {
		if !strings.Contains(r, "| completed |") || !strings.Contains(r, "ran ") || !strings.Contains(r, "bar-completed") {
			t.Errorf("a card's row reads %q", r)
		}
	}
	evalAs[chromedp.Void](b, `document.querySelector(".run-timeline").scrollIntoView()`)
	b.themedShots("timeline-ended")

	b.reload()
	if got := evalAs[[]timelineView](b, timelineJS); !reflect.DeepEqual(got, live) {
		t.Errorf("after a reload the timeline differs\ngot  %+v\nlive %+v", got, live)
	}
}

// panelJS reads the usage panel: its figures and its model rows.
const panelJS = `(() => {
	const p = document.querySelector("#usage-panel");
	const f = (k) => p?.querySelector('[data-usage="' + k + '"]')?.textContent ?? null;
	return {
		total: f("total"), note: p?.querySelector('[data-usage="unreported"]')?.hidden ? "" : f("unreported"),
		lead: f("lead"), subagents: f("subagents"),
		models: [...(p?.querySelectorAll('[data-usage="by-model"] tr') ?? [])].map((r) => [...r.cells].map((c) => c.textContent.trim()).join(" | ")),
	};
})()`

type panelView struct {
	Total     string   `json:"total"`
	Note      string   `json:"note"`
	Lead      string   `json:"lead"`
	Subagents string   `json:"subagents"`
	Models    []string `json:"models"`
}

// TestBrowserTotalsAddUp: during a run the panel's figures are the sum of
// the cards and the lead (total = lead + subagents = the models' rows, the
// subagents the cards' sum) from the frames alone — the page never asks
// the usage API — and after the run they equal the server's ledger, so a
// reload shows the same panel.
func TestBrowserTotalsAddUp(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 400, 2)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("totals add up")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	b.sendMessage("Three jobs:\n- alpha\n- beta\n- gamma")
	sums := `(() => {
		const num = (s) => Number((s ?? "").replace(/[^0-9]/g, ""));
		const cards = [...document.querySelectorAll("#messages section.card")];
		const sum = cards.reduce((n, c) => n + Number(c.dataset.totalTokens || 0), 0);
		const p = (k) => num(document.querySelector('#usage-panel [data-usage="' + k + '"]')?.textContent);
		const rows = [...document.querySelectorAll('#usage-panel [data-usage="by-model"] tr')].reduce((n, r) => n + num(r.cells[4].textContent), 0);
		return { running: cards.filter((c) => c.dataset.status === "running").length, sum, lead: p("lead"), subagents: p("subagents"), total: p("total"), rows };
	})()`
	b.waitFor("the panel adding up while cards run", `(() => {
		const s = `+sums+`;
		return s.running >= 2 && s.sum > 0 && s.subagents === s.sum && s.total === s.lead + s.sum && s.rows === s.total && s.lead > 0;
	})()`, 20*time.Second)
	b.activate("open the panel", "#usage-panel > summary")
	b.shot("totals-mid-run")
	// Every frame from here on must keep the sums; check a few while the
	// cards grow.
	for range 5 {
		s := evalAs[map[string]float64](b, sums)
		if s["subagents"] != s["sum"] || s["total"] != s["lead"]+s["sum"] || s["rows"] != s["total"] {
			t.Errorf("mid-run the panel does not add up: %v", s)
		}
		time.Sleep(150 * time.Millisecond)
	}
	b.waitRunEnd(a, th)
	if n := evalAs[int](b, `performance.getEntriesByType("resource").filter((e) => new URL(e.name).pathname.endsWith("/usage")).length`); n != 0 {
		t.Errorf("the page asked the usage API %d times during the run", n)
	}
	live := evalAs[panelView](b, panelJS)
	var ledger usageReply
	u.mustJSON("GET", "/api/threads/"+th+"/usage", nil, 200, &ledger)
	if want := groupDigits(ledger.Total.TotalTokens); live.Total != want {
		t.Errorf("after the run the panel says %s, the ledger %s", live.Total, want)
	}
	b.reload()
	if got := evalAs[panelView](b, panelJS); !reflect.DeepEqual(got, live) {
		t.Errorf("after a reload the panel reads %+v, live %+v", got, live)
	}
}

// TestBrowserUsageNotReportedLive: where a provider reports nothing the
// panel says "not reported", never 0 — the silent subagent model's row
// live from the frames, and a silent lead — and a reload reads the same.
func TestBrowserUsageNotReportedLive(t *testing.T) {
	a := newApp(t,
		withModels(demoModel("demo-fast", 50, 1), noUsage(demoModel("demo-quiet", 50, 1))),
		withSubagents(agent.SubagentsConfig{Agents: map[string]agent.AgentConfig{
			"quiet": {Description: "Reports no usage.", Model: "demo-quiet"},
		}}),
	)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("not reported")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	b.sendMessage("Compare:\n- alpha\n- quiet: beta")
	b.waitRunEnd(a, th)
	b.activate("open the panel", "#usage-panel > summary")
	live := evalAs[panelView](b, panelJS)
	quiet := ""
	for _, r := range live.Models {
		if strings.HasPrefix(r, "Demo-quiet |") {
			quiet = r
		}
	}
	if !strings.Contains(quiet, "| not reported | not reported | not reported") {
		t.Errorf("the silent model's row reads %q, want not reported (rows %q)", quiet, live.Models)
	}
	if !strings.HasPrefix(live.Note, "not reported for ") || strings.Contains(live.Total, "not") || live.Subagents == "0" {
		t.Errorf("the panel reads %+v", live)
	}
	b.shot("not-reported")
	b.reload()
	b.activate("open the panel", "#usage-panel > summary")
	if got := evalAs[panelView](b, panelJS); !reflect.DeepEqual(got, live) {
		t.Errorf("after a reload the panel reads %+v, live %+v", got, live)
	}

	// A thread whose lead reports nothing: its figures say so, live.
	th2 := u.newThread("silent lead")
	b.openThread(th2, "")
	evalAs[chromedp.Void](b, `document.querySelector("#composer-model").value = "demo-quiet"`)
	b.sendMessage("hello")
	b.waitRunEnd(a, th2)
	b.waitFor("the silent lead's figures", `document.querySelector('#usage-panel [data-usage="lead"]')?.textContent === "not reported"
		&& document.querySelector('#usage-panel [data-usage="total"]')?.textContent === "not reported"`, 10*time.Second)
}

// TestBrowserUsageLostCallsLive: a call a restart cut (models.LostCall)
// is named apart beside the other unreported calls, by the server's page
// and by static/usage-panel.js once a later run's frames have redrawn the
// panel from the page's tally — the total grew, the note and the silent
// model's row still say both kinds — and a reload reads the same.
func TestBrowserUsageLostCallsLive(t *testing.T) {
	a := newApp(t,
		withModels(demoModel("demo-fast", 50, 1), noUsage(demoModel("demo-quiet", 50, 1))),
		withSubagents(agent.SubagentsConfig{Agents: map[string]agent.AgentConfig{
			"quiet": {Description: "Reports no usage.", Model: "demo-quiet"},
		}}),
	)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("cut by a restart")
	u.mustJSON("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "Compare:\n- alpha\n- quiet: beta", "model": "demo-fast"}, 202, nil)
	a.waitIdle(th)
	runs, err := a.store.Runs(context.Background(), th)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %v, %v", runs, err)
	}
	if err := a.writer.Write(context.Background(), models.Record{Usage: models.LostCall(th, runs[0].UserID, runs[0].ID, "call_quiet", "demo-quiet", "v3.r1")}); err != nil {
		t.Fatal(err)
	}
	var ledger usageReply
	u.mustJSON("GET", "/api/threads/"+th+"/usage", nil, 200, &ledger)
	note := notReportedText(ledger.Total.UnreportedCalls-1) + "; 1 call cut by a restart: usage not reported"

	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")
	b.activate("open the panel", "#usage-panel > summary")
	rendered := evalAs[panelView](b, panelJS)
	if rendered.Note != note {
		t.Errorf("the rendered panel's note reads %q, want %q", rendered.Note, note)
	}
	b.sendMessage("hello")
	b.waitRunEnd(a, th)
	live := evalAs[panelView](b, panelJS)
	if live.Total == rendered.Total || live.Note != note {
		t.Errorf("after a second run the panel reads %+v, want a grown total and the note %q (rendered %+v)", live, note, rendered)
	}
	quiet := ""
	for _, r := range live.Models {
		if strings.HasPrefix(r, "Demo-quiet |") {
			quiet = r
		}
	}
	if !strings.HasSuffix(quiet, "| not reported | not reported | not reported 1 call cut by a restart: usage not reported") {
		t.Errorf("the silent model's row reads %q (rows %q)", quiet, live.Models)
	}
	evalAs[chromedp.Void](b, `document.querySelector("#usage-panel").scrollIntoView()`)
	b.shot("lost-call")
	b.reload()
	b.activate("open the panel", "#usage-panel > summary")
	if got := evalAs[panelView](b, panelJS); !reflect.DeepEqual(got, live) {
		t.Errorf("after a reload the panel reads %+v, live %+v", got, live)
	}
}
