package server

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"
)

// resumedView is what a page shows of a resumed run: the conversation's
// items in order (kind: text), the run timeline's summary and each row's
// gap marks, and the card with its expanded steps.
type resumedView struct {
	Items    []string   `json:"items"`
	Summary  string     `json:"summary"`
	Gaps     []int      `json:"gaps"`
	Cards    []cardView `json:"cards"`
	Resumed  []string   `json:"resumed"` // the card's resumed steps: class and text
	Hidden   []bool     `json:"hidden"`  // whether each resumed step's icon is hidden from screen readers
	LostTime []string   `json:"lostMs"`  // each notice's data-lost-ms
}

const resumedViewJS = `(() => {
	const list = document.getElementById("messages");
	const items = [...list.querySelectorAll(":scope > [data-seq]")].map((n) =>
		n.matches(".run-resumed") ? "resumed: " + n.querySelector(".run-resumed-text").textContent
		: n.matches(".msg-human") ? "human: " + n.querySelector(".msg-body").textContent.trim()
		: n.matches(".run-end") ? "end: " + n.dataset.status
		: n.querySelector("section.card") ? "card: " + n.querySelector(".card-title").textContent
		: "ai: " + (n.querySelector(".msg-body")?.textContent.trim() ?? ""));
	const fig = document.querySelector(".run-timeline");
	const steps = [...document.querySelectorAll("#messages .card-step-resumed")];
	return {
		items,
		summary: fig?.querySelector(".timeline-summary").textContent ?? "",
		gaps: [...(fig?.querySelectorAll(".timeline-row") ?? [])].map((r) => r.querySelectorAll(".bar-gap").length),
		cards: ` + cardsJS + `,
		// The step's words, without the icon (hidden from screen readers).
		resumed: steps.map((li) => li.className + ": " + [...li.querySelector(".step-resumed").childNodes].filter((n) => n.nodeType === Node.TEXT_NODE).map((n) => n.textContent).join("")),
		hidden: steps.map((li) => li.querySelector(".step-resumed-icon").getAttribute("aria-hidden") === "true"),
		lostMs: [...list.querySelectorAll(".run-resumed")].map((n) => n.dataset.lostMs),
	};
})()`

// TestBrowserResumedRun: a run's subagent resumes after a restart and
// then on another instance, its records committed through the server's
// writer while the page is open. Live, the conversation shows a quiet
// notice where each resumption is, with the time lost, the card's status
// line says it resumed, its step list shows each resumed step as a marker
// of its own (not the model's words), and the run's timeline marks each
// gap on every row; after a reload the page shows exactly the same.
func TestBrowserResumedRun(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("resumed")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")
	run := newResumedRun(t, th, u.id, time.Now().Add(-2*time.Minute))
	card := cardJS("Read notes.md")

	a.commit(run.batches[0]...)
	b.waitFor("the card reading", card+`?.querySelector(".card-status").textContent === "Reading notes.md"`, 10*time.Second)
	b.activate("expand the card", cardSel(b.card("Read notes.md").ID, ".card-toggle"))
	b.waitFor("its first step", card+`.querySelectorAll(".card-step").length === 1`, 10*time.Second)

	a.commit(run.batches[1]...)
	b.waitFor("the restart's notice and step", `document.querySelectorAll("#messages .run-resumed").length === 1 && `+card+`.querySelectorAll(".card-step").length === 2`, 10*time.Second)
	if got := b.card("Read notes.md"); got.StatusText != restartStep || got.Status != "running" {
		t.Errorf("the resumed card says %q (%s), want %q, running", got.StatusText, got.Status, restartStep)
	}
	b.shot("resumed-live")

	a.commit(run.batches[2]...)
	b.waitFor("the failover's notice and step", `document.querySelectorAll("#messages .run-resumed").length === 2 && `+card+`.querySelectorAll(".card-step").length === 3`, 10*time.Second)
	if got := b.card("Read notes.md").StatusText; got != failoverStep {
		t.Errorf("the card resumed on another instance says %q, want %q", got, failoverStep)
	}
	a.commit(run.batches[3]...)
	b.waitFor("the run's end", `document.querySelector("#composer").dataset.state === "idle" && `+card+`.dataset.status === "completed" && `+card+`.querySelectorAll(".card-step").length === 4`, 10*time.Second)

	live := evalAs[resumedView](b, resumedViewJS)
	want := []string{"human: Sum up my notes.", "card: Read the notes", "resumed: " + restartNotice, "resumed: " + failoverNotice, "ai: All done: three points.", "end: completed"}
	if !slices.Equal(live.Items, want) {
		t.Errorf("live, the conversation reads\n%q\nwant\n%q", live.Items, want)
	}
	wantSteps := []string{"card-step card-step-resumed: " + restartStep, "card-step card-step-resumed: " + failoverStep}
	if !slices.Equal(live.Resumed, wantSteps) || !slices.Equal(live.Hidden, []bool{true, true}) {
		t.Errorf("live, the card's resumed steps are %q (icons hidden: %v), want %q", live.Resumed, live.Hidden, wantSteps)
	}
	if !slices.Equal(live.LostTime, []string{"4200", "65000"}) {
		t.Errorf("live, the notices' lost times are %v", live.LostTime)
	}
	const summary = "Timeline · 1 subagent · at most 1 at once · resumed 2 times, 1 min 9 s lost · 1m 14s"
	if live.Summary != summary || !slices.Equal(live.Gaps, []int{2, 2}) {
		t.Errorf("live, the timeline reads %q with gaps %v per row, want %q with 2 on each row", live.Summary, live.Gaps, summary)
	}
	b.scrollTo("#messages .run-resumed")
	b.shot("resumed-ended-live")

	b.reload() // the card stays expanded (cards.js remembers it)
	b.waitFor("its steps from the events API", card+`.querySelectorAll(".card-step").length === 4`, 10*time.Second)
	reloaded := evalAs[resumedView](b, resumedViewJS)
	if !reflect.DeepEqual(reloaded, live) {
		g, _ := json.MarshalIndent(reloaded, "", "  ")
		w, _ := json.MarshalIndent(live, "", "  ")
		t.Errorf("after a reload the page differs from live\ngot  %s\nwant %s", g, w)
	}
	b.scrollTo("#messages .run-resumed")
	b.shot("resumed-reloaded")
	b.scrollTo(".run-timeline")
	b.shot("resumed-timeline")
}
