package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// A page open across a restart (docs/DESIGN.md §11 "Resume"): herd on
// SQLite is killed mid-run and started again on the same data directory
// and address, and the page, never reloaded, catches up by itself through
// its socket's reconnect (static/socket.js asks for what came after the
// last seq it has). A scenario is a moment to kill at: restartPage
// starts, sends, kills and starts again, waits for the page to catch up,
// reads it (pageView) and reloads it; the scenario waits for its moment
// and checks what it expects.

// restartPage is one herd on SQLite and a signed-in browser page on a
// thread of it, to kill the herd under the page and start it again.
type restartPage struct {
	t      *testing.T
	herd   *proc
	br     *pageBrowser
	thread string
}

// newRestartPage starts herd on a fresh data directory with env (config
// keys as HERD_…) and signs a browser in.
func newRestartPage(t *testing.T, env ...string) *restartPage {
	t.Helper()
	r := &restartPage{t: t, herd: startHerdWith(t, t.TempDir(), env...), br: newPageBrowser(t)}
	r.br.signIn(r.herd.url)
	return r
}

// send starts a thread with text from the new-thread page's composer, as
// a user does, and waits for the thread's page.
func (r *restartPage) send(text string) {
	r.t.Helper()
	r.br.run("open a new thread", chromedp.Navigate(r.herd.url+"/threads/new"))
	r.br.waitFor("the composer idle", `document.documentElement.dataset.herdReady === "1" && document.querySelector("#composer").dataset.state === "idle"`)
	js, _ := json.Marshal(text)
	// As typing does: the input event lets the composer enable Send.
	r.br.run("type the message", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const input = document.querySelector("#composer-input");
		input.value = %s;
		input.dispatchEvent(new Event("input", { bubbles: true }));
	})()`, js)), chromedp.WaitEnabled(chromedp.CSS("#send-button")))
	r.br.run("send", chromedp.Evaluate[chromedp.Void](`document.querySelector("#send-button").click()`))
	r.br.waitFor("the thread's page", `/^\/threads\/[0-9a-f-]{36}$/.test(location.pathname) && document.documentElement.dataset.herdReady === "1"`)
	r.thread = strings.TrimPrefix(r.eval(`location.pathname`), "/threads/")
}

// eval is a JavaScript expression's value as a string (JSON for objects).
func (r *restartPage) eval(expr string) string {
	r.t.Helper()
	v, err := chromedp.Run(r.br.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		r.t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

// expandCards opens every card, so that its steps (the resumed one among
// them) arrive live on it, and waits until each has loaded the steps it
// had; cards.js keeps them open across a reload.
func (r *restartPage) expandCards() {
	r.t.Helper()
	r.br.run("expand the cards", chromedp.Evaluate[chromedp.Void](`(() => {
		for (const b of document.querySelectorAll('#messages section.card .card-toggle[aria-expanded="false"]')) b.click();
	})()`))
	r.br.waitFor("the cards' steps loaded", `[...document.querySelectorAll("#messages section.card")].every((c) =>
		c.querySelector(".card-toggle").getAttribute("aria-expanded") === "true"
		&& c.querySelector(".card-steps-note").textContent !== "Loading steps…")`)
}

// killAndStartAgain kills herd (SIGKILL), waits until the page has seen
// its socket go, and starts herd again on the same data directory and
// address. The page is left as it is.
func (r *restartPage) killAndStartAgain() {
	r.t.Helper()
	// A mark on this page: caughtUp fails if the page reloaded itself.
	r.br.run("mark the page", chromedp.Evaluate[chromedp.Void](`window.herdBeforeKill = true`))
	if err := r.herd.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		r.t.Fatal(err)
	}
	_ = r.herd.wait(10 * time.Second)
	r.br.waitFor("the page offline", `document.documentElement.hasAttribute("data-offline")`)
	r.herd = r.herd.startAgain()
}

// caughtUp waits until the page, the one open before the kill, shows the
// run ended and its socket connected again.
func (r *restartPage) caughtUp() {
	r.t.Helper()
	r.br.waitFor("the run's end, live", runEndedJS)
	if r.eval(`String(window.herdBeforeKill === true)`) != "true" {
		r.t.Fatal("the page caught up by loading again, not over its socket")
	}
}

// shots saves screenshots of the page at its first card with steps, its
// first resumed step and the thread's resumed notice, those it has.
func (r *restartPage) shots(name string) {
	r.t.Helper()
	for _, at := range []struct{ part, sel string }{
		{"card", "#messages section.card:has(.card-step)"},
		{"resumed-step", "#messages .card-step-resumed"},
		{"notice", "#messages .run-resumed"},
	} {
		if r.eval(fmt.Sprintf(`String(!!document.querySelector(%q))`, at.sel)) == "true" {
			r.br.scrollTo(at.sel)
			r.br.shot(name + "-" + at.part)
		}
	}
}

// pageView is what the page shows of a thread, read from the DOM
// (pageViewJS).
type pageView struct {
	// Items are the conversation's items in order, "kind: text".
	Items   []string   `json:"items"`
	Cards   []pageCard `json:"cards"`
	Notices []string   `json:"notices"` // the runs' resumed notices
	Answer  string     `json:"answer"`  // the last answer's text
	// Timeline is the run timeline's summary (resumed, time lost).
	Timeline string `json:"timeline"`
	// UsageNote is the usage panel's note beside the total, "" when
	// hidden; Usage is the total.
	UsageNote string `json:"usageNote"`
	Usage     string `json:"usage"`
}

// pageCard is a card as the page shows it: its data attributes, title
// and expanded steps.
type pageCard struct {
	TaskID  string   `json:"taskID"`
	RunID   string   `json:"runID"`
	Status  string   `json:"status"`
	Title   string   `json:"title"`
	Version string   `json:"version"`
	Steps   string   `json:"steps"`
	Resumed []string `json:"resumed"` // its resumed steps' words, without the icon
}

const pageViewJS = `(() => {
	const list = document.getElementById("messages");
	const text = (n) => n?.textContent.trim() ?? "";
	const items = [...list.querySelectorAll(":scope > [data-seq]")].map((n) =>
		n.matches(".run-resumed") ? "resumed: " + text(n.querySelector(".run-resumed-text"))
		: n.matches(".msg-human") ? "human: " + text(n.querySelector(".msg-body"))
		: n.matches(".run-end") ? "end: " + n.dataset.status
		: "ai: " + text(n.querySelector(":scope > .msg-body")) + " [" + n.querySelectorAll("section.card").length + " cards]");
	const cards = [...list.querySelectorAll("section.card")].map((c) => ({
		taskID: c.dataset.taskId,
		runID: c.dataset.runId,
		status: c.dataset.status,
		title: text(c.querySelector(".card-title")),
		version: c.dataset.version,
		steps: c.dataset.steps,
		resumed: [...c.querySelectorAll(".card-step-resumed .step-resumed")].map((p) =>
			[...p.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE).map((n) => n.textContent).join("")),
	}));
	const answers = [...list.querySelectorAll(":scope > .msg-ai:not(.msg-streaming) > .msg-body")];
	const note = document.querySelector('#usage-panel [data-usage="unreported"]');
	return JSON.stringify({
		items,
		cards,
		notices: [...list.querySelectorAll(".run-resumed .run-resumed-text")].map(text),
		answer: text(answers.at(-1)),
		timeline: text(document.querySelector(".run-timeline .timeline-summary")),
		usageNote: note && !note.hidden ? text(note) : "",
		usage: text(document.querySelector('#usage-panel [data-usage="total"]')),
	});
})()`

func (r *restartPage) view() pageView {
	r.t.Helper()
	var v pageView
	if err := json.Unmarshal([]byte(r.eval(pageViewJS)), &v); err != nil {
		r.t.Fatalf("the page's view: %v", err)
	}
	return v
}

// reloadShows reloads the page and fails the test unless it shows live,
// what the page showed before the reload; shot names its screenshots.
func (r *restartPage) reloadShows(live pageView, shot string) {
	r.t.Helper()
	r.br.run("reload", chromedp.Reload())
	r.br.waitFor("the reloaded page", `document.documentElement.dataset.herdReady === "1" && `+runEndedJS)
	r.br.waitFor("the cards' steps loaded", `[...document.querySelectorAll("#messages section.card")].every((c) =>
		c.querySelector(".card-steps-note").textContent !== "Loading steps…")`)
	reloaded := r.view()
	r.shots(shot)
	if !reflect.DeepEqual(reloaded, live) {
		g, _ := json.MarshalIndent(reloaded, "", "  ")
		w, _ := json.MarshalIndent(live, "", "  ")
		r.t.Errorf("after a reload the page differs from live\ngot  %s\nwant %s", g, w)
	}
}

// runEndedJS is whether the page shows the thread's run ended and idle.
const runEndedJS = `!!document.querySelector("#messages .run-end") && !document.querySelector("#messages .msg-streaming")
	&& document.querySelector("#composer").dataset.state === "idle" && !document.documentElement.hasAttribute("data-offline")`

// TestBrowserAcrossRestart: herd on SQLite is killed (SIGKILL) while a
// page watches four subagents at work, and started again on the same
// data directory and address. Without a reload the page catches up: every
// card completes with the task id it had, once, a card that was running
// shows its "Resumed after a restart" step, the thread its resumed
// notice, the run ends completed with the lead's answer naming every
// item, and the usage panel names the calls the restart cut. A reload
// shows the same.
func TestBrowserAcrossRestart(t *testing.T) {
	items := []string{"alpha", "bravo", "charlie", "delta"}
	// Subagent calls of a second or so (demo-fast is the lead's model and,
	// inherited, theirs): four calls each, so a card seen running is
	// still running when the kill comes a few milliseconds later.
	r := newRestartPage(t, "HERD_MODELS_0_LATENCY_MS=1000")
	r.send("Check these:\n- " + strings.Join(items, "\n- "))
	// Two cards running past their first step (a call and its tool's
	// result): resumed, they go on from their checkpointed history.
	r.br.waitFor("four cards, two running past a step", `(() => {
		const cards = [...document.querySelectorAll("#messages section.card")];
		return cards.length === 4 && cards.filter((c) => c.dataset.status === "running" && Number(c.dataset.steps) >= 2).length >= 2;
	})()`)
	r.expandCards()
	before := r.view()
	var running []string
	for _, c := range before.Cards {
		if c.Status == "running" {
			running = append(running, c.TaskID)
		}
	}
	r.shots("1-before-kill")
	killed := time.Now()
	r.killAndStartAgain()
	if !strings.Contains(r.herd.log.String(), "crash recovery resumed interrupted runs") {
		t.Errorf("no resume at restart:\n%s", r.herd.log.String())
	}

	r.caughtUp()
	t.Logf("the page caught up %v after the kill", time.Since(killed))
	live := r.view()
	r.shots("2-caught-up-live")
	checkResumedPage(t, "live", live, before, running, items)
	// The calls in flight at the kill, counted by the ledger, named by
	// the panel (its words are the contract's, tested elsewhere).
	if lost := r.lostCalls(); lost == 0 || !strings.HasPrefix(live.UsageNote, fmt.Sprintf("%d call", lost)) || !strings.Contains(live.UsageNote, "cut by a restart") {
		t.Errorf("live, the usage panel's note is %q; the ledger has %d lost calls", live.UsageNote, lost)
	}

	r.reloadShows(live, "3-reloaded")
	stopHerd(t, r.herd)
}

// checkResumedPage checks a page after the run resumed and ended: the
// cards before the kill, each completed once, the resumed step on those
// that were running, one resumed notice, and the answer naming items.
func checkResumedPage(t *testing.T, when string, v, before pageView, running, items []string) {
	t.Helper()
	words := restartWords(t)
	ids := func(cards []pageCard) []string {
		var out []string
		for _, c := range cards {
			out = append(out, c.TaskID)
		}
		return out
	}
	if got, want := ids(v.Cards), ids(before.Cards); !slices.Equal(got, want) {
		t.Errorf("%s, the cards are %v, want those before the kill, %v", when, got, want)
	}
	for _, c := range v.Cards {
		if c.Status != "completed" {
			t.Errorf("%s, card %s (%s) is %s, want completed", when, c.TaskID, c.Title, c.Status)
		}
		want := 0
		if slices.Contains(running, c.TaskID) {
			want = 1
		}
		if len(c.Resumed) != want {
			t.Errorf("%s, card %s (%s) shows resumed steps %q, want %d", when, c.TaskID, c.Title, c.Resumed, want)
		}
		for _, s := range c.Resumed {
			if !words.step.matches(s) {
				t.Errorf("%s, card %s's resumed step says %q, want %q", when, c.TaskID, s, words.step)
			}
		}
	}
	if len(v.Notices) != 1 || !words.notice.matches(v.Notices[0]) {
		t.Errorf("%s, the thread's resumed notices are %q, want one %q", when, v.Notices, words.notice)
	}
	if v.Timeline == "" {
		t.Errorf("%s, no run timeline's summary", when)
	}
	if n := len(v.Items); n == 0 || v.Items[n-1] != "end: completed" {
		t.Errorf("%s, the conversation reads %q, want it to end completed", when, v.Items)
	}
	for _, item := range items {
		if !strings.Contains(strings.ToLower(v.Answer), item) {
			t.Errorf("%s, the answer does not name %q: %q", when, item, v.Answer)
		}
	}
	if !strings.Contains(v.Answer, "Everything I delegated is done.") {
		t.Errorf("%s, the answer is %q, want every task done", when, v.Answer)
	}
}

// lostCalls is the thread's model calls a restart cut, from its ledger.
func (r *restartPage) lostCalls() int64 {
	r.t.Helper()
	var u usageReport
	r.herd.signIn().call("GET", "/api/threads/"+r.thread+"/usage", nil, &u)
	return u.Total.LostCalls
}

// lostWords is a text with a lost time in it: what comes before and
// after the time.
type lostWords struct{ before, after string }

func (w lostWords) matches(s string) bool {
	return len(s) > len(w.before)+len(w.after) && strings.HasPrefix(s, w.before) && strings.HasSuffix(s, w.after)
}

func (w lostWords) String() string { return w.before + "…" + w.after }

// restartWords are a resumed step's and a resumed notice's words after a
// restart, around the time lost, as contracts/card_format_contract.json
// has them (the Go and browser formatters are tested against it).
func restartWords(t *testing.T) (words struct{ step, notice lostWords }) {
	t.Helper()
	b, err := os.ReadFile(repoPath(t, "contracts/card_format_contract.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		LostTimes []struct {
			MS   int64  `json:"ms"`
			Text string `json:"text"`
		} `json:"lost_times"`
		Resumed []struct {
			Cause  string `json:"cause"`
			LostMS int64  `json:"lost_ms"`
			Step   string `json:"step"`
			Notice string `json:"notice"`
		} `json:"resumed"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	split := func(s, lost string) lostWords {
		before, after, ok := strings.Cut(s, lost)
		if !ok {
			t.Fatalf("the contract's %q has no lost time %q", s, lost)
		}
		return lostWords{before, after}
	}
	for _, r := range c.Resumed {
		for _, l := range c.LostTimes {
			if r.Cause == "restart" && l.MS == r.LostMS {
				words.step, words.notice = split(r.Step, l.Text), split(r.Notice, l.Text)
				return words
			}
		}
	}
	t.Fatal("the contract has no restart's resumed words with their lost time")
	return words
}

// TestBrowserAnswerAcrossRestart: herd is killed while the page shows the
// lead's answer streaming, and started again. Without a reload the page
// catches up: the answer goes on in the same bubble and is saved under
// the message id that streamed, what was shown before the kill stays at
// its start, word for word, one resumed notice sits above it; a reload
// shows the same.
func TestBrowserAnswerAcrossRestart(t *testing.T) {
	r := newRestartPage(t, "HERD_MODELS_0_LATENCY_MS=0", "HERD_MODELS_0_CHUNK_MS=80")
	r.send("What is a good name for a sheepdog that herds goats?")
	// Two blocks shown: the first is whole, and stays as it is.
	r.br.waitFor("the answer streaming, a paragraph shown", `(() => {
		const b = document.querySelector("#messages .msg-streaming .msg-body");
		return !!b && b.children.length >= 2;
	})()`)
	var shown struct {
		ID     string   `json:"id"`
		Blocks []string `json:"blocks"`
	}
	if err := json.Unmarshal([]byte(r.eval(`JSON.stringify((() => {
		const bubble = document.querySelector("#messages .msg-streaming");
		const blocks = [...bubble.querySelector(".msg-body").children].map((b) => b.innerText);
		return { id: bubble.id.replace(/^stream-/, ""), blocks: blocks.slice(0, -1) };
	})())`)), &shown); err != nil || shown.ID == "" || len(shown.Blocks) == 0 {
		t.Fatalf("the streaming answer %+v, %v", shown, err)
	}
	r.br.shot("1-answer-before-kill")
	r.killAndStartAgain()
	r.caughtUp()
	read := func(when string) {
		var v struct {
			IDs     []string `json:"ids"`
			Blocks  []string `json:"blocks"`
			Notices int      `json:"notices"`
			Above   bool     `json:"above"`
		}
		_ = json.Unmarshal([]byte(r.eval(`JSON.stringify((() => {
			const ais = [...document.querySelectorAll("#messages .msg-ai")];
			const last = ais[ais.length - 1];
			const notice = document.querySelector("#messages .run-resumed");
			return {
				ids: ais.map((m) => m.id),
				blocks: last ? [...last.querySelector(".msg-body").children].map((b) => b.innerText) : [],
				notices: document.querySelectorAll("#messages .run-resumed").length,
				above: !!(notice && last && (notice.compareDocumentPosition(last) & Node.DOCUMENT_POSITION_FOLLOWING)),
			};
		})())`)), &v)
		if !slices.Equal(v.IDs, []string{"msg-" + shown.ID}) {
			t.Errorf("%s, the answers are %v, want one, msg-%s, the message that streamed", when, v.IDs, shown.ID)
		}
		if len(v.Blocks) < len(shown.Blocks) || !slices.Equal(v.Blocks[:len(shown.Blocks)], shown.Blocks) {
			t.Errorf("%s, the answer reads %q, want it to begin with what was shown before the kill, %q", when, v.Blocks, shown.Blocks)
		}
		if v.Notices != 1 || !v.Above {
			t.Errorf("%s, %d resumed notices, above the answer %v; want one above it", when, v.Notices, v.Above)
		}
	}
	read("live")
	r.br.scrollTo("#messages .run-resumed")
	r.br.shot("2-answer-continued-live")
	r.br.run("reload", chromedp.Reload())
	r.br.waitFor("the reloaded page", `document.documentElement.dataset.herdReady === "1" && `+runEndedJS)
	read("after a reload")
	r.br.shot("3-answer-reloaded")
	stopHerd(t, r.herd)
}
