package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserTotalsFollowCards: while a run is still going, the thread's
// usage panel catches up with the cards: its subagents figure equals the
// sum of the cards' totals, and the total is lead plus subagents.
func TestBrowserTotalsFollowCards(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 600, 2)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("totals")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	b.sendMessage("Three jobs:\n- alpha\n- beta\n- gamma")
	num := `((s) => Number((s ?? "").replace(/[^0-9]/g, "")))`
	b.waitFor("the panel equal to the cards while all three run", `(() => {
		const num = `+num+`;
		const cards = [...document.querySelectorAll("#messages section.card")];
		const running = cards.length === 3 && cards.every((c) => c.dataset.status === "running");
		const sum = cards.reduce((n, c) => n + Number(c.dataset.totalTokens || 0), 0);
		const panel = (k) => num(document.querySelector('#usage-panel [data-usage="' + k + '"]')?.textContent);
		return running && sum > 0 && panel("subagents") === sum && panel("total") === panel("lead") + sum;
	})()`, 20*time.Second)
	b.shot("totals-mid-run")
	b.waitRunEnd(a, th)
}

// TestBrowserEightItems: a list of 8 at 4 per response is 8 cards and a
// timeline of 8 (docs/DESIGN.md §9): the 4 the limit held back wait in
// their place ("Waiting: at most 4 start per response"), and the lead's
// next turn runs them in those same cards — live, and after a reload.
func TestBrowserEightItems(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 300, 1)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("eight")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")
	// Every status line each card showed, and the most cards ever on the
	// page: what a user saw live, not only where it ended.
	evalAs[chromedp.Void](b, `(() => {
		window.seen = { most: 0, texts: {} };
		const note = () => {
			const cards = document.querySelectorAll("#messages section.card");
			seen.most = Math.max(seen.most, cards.length);
			for (const c of cards) {
				const text = c.querySelector(".card-status").textContent;
				const log = (seen.texts[c.id] ??= []);
				if (log.at(-1) !== text) log.push(text);
			}
		};
		new MutationObserver(note).observe(document.querySelector("#messages"), { subtree: true, childList: true, characterData: true, attributes: true });
	})()`)
	b.sendMessage("Eight:\n- one\n- two\n- three\n- four\n- five\n- six\n- seven\n- eight")
	const waiting = "Waiting: at most 4 start per response"
	b.waitFor("4 cards waiting for the next response", `[...document.querySelectorAll("#messages section.card .card-status")].filter((s) => s.textContent === "`+waiting+`").length === 4`, 20*time.Second)
	b.shot("eight-waiting")
	// The page as the server renders it mid-run (agent.ProjectCards): the
	// same 8 cards, the held ones saying so, whatever has started since.
	mid := evalAwait[map[string]any](b, `fetch(location.href).then((r) => r.text()).then((html) => {
		const cards = [...new DOMParser().parseFromString(html, "text/html").querySelectorAll("#messages section.card")];
		const held = cards.filter((c) => c.dataset.refusalReason !== "" && c.dataset.status === "queued");
		return { cards: cards.length, held: held.length, texts: held.map((c) => c.querySelector(".card-status").textContent + (c.querySelector(".card-cancel").hidden ? "" : " +cancel")) };
	})`)
	if mid["cards"] != float64(8) {
		t.Errorf("mid-run, the server renders %v cards, want 8", mid["cards"])
	}
	for _, s := range mid["texts"].([]any) {
		if s != waiting {
			t.Errorf("mid-run, a held card renders %q, want %q and no Cancel", s, waiting)
		}
	}
	t.Logf("mid-run, the server rendered %v of the cards held", mid["held"])
	b.waitRunEnd(a, th)
	// One card per item: where it sits (its slot, the item's first call),
	// the call it ran as, its status line and times; the timeline's rows.
	state := `(() => {
		const cards = [...document.querySelectorAll("#messages section.card")];
		const fig = document.querySelector(".run-timeline");
		return JSON.stringify({
			cards: cards.map((c) => [c.closest(".task-slot").dataset.taskId, c.dataset.taskId, c.dataset.status, c.querySelector(".card-status").textContent,
				c.dataset.queuedAt, c.dataset.startedAt, c.dataset.endedAt, c.querySelector(".card-cancel").hidden]),
			rows: fig ? fig.querySelectorAll(".timeline-row").length : 0,
			summary: fig?.querySelector(".timeline-summary").textContent ?? "",
		});
	})()`
	type view struct {
		Cards   [][]any `json:"cards"`
		Rows    int     `json:"rows"`
		Summary string  `json:"summary"`
	}
	read := func() (view, string) {
		raw := evalAs[string](b, state)
		var v view
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			t.Fatal(err)
		}
		return v, raw
	}
	live, liveRaw := read()
	if len(live.Cards) != 8 || live.Rows != 9 {
		t.Fatalf("live: %d cards and %d timeline rows, want 8 and 9 (the lead's and one per card): %s", len(live.Cards), live.Rows, liveRaw)
	}
	if !strings.HasPrefix(live.Summary, "Timeline · 8 subagents · at most 4 at once · 4 waited") {
		t.Errorf("live: the timeline says %q, want 8 subagents, 4 at once, 4 waited", live.Summary)
	}
	continued := 0
	for _, c := range live.Cards {
		if c[2] != "completed" || c[3] != "Completed" {
			t.Errorf("live: card %v, want completed", c)
		}
		if c[0] != c[1] {
			continued++
			if c[4] == "" || c[5] == "" {
				t.Errorf("live: continued card %v has no wait or start", c)
			}
		}
	}
	if continued != 4 {
		t.Errorf("live: %d cards continued a held call, want 4", continued)
	}
	seen := evalAs[map[string]any](b, `window.seen`)
	if seen["most"] != float64(8) {
		t.Errorf("live: at most %v cards on the page at once, want 8", seen["most"])
	}
	held := 0
	for id, texts := range seen["texts"].(map[string]any) {
		log := fmt.Sprint(texts)
		if !strings.Contains(log, waiting) {
			continue
		}
		held++
		if ts := texts.([]any); ts[len(ts)-1] != "Completed" || slices.Contains(ts, any("Not started · limit of 4 per response")) {
			t.Errorf("live: held card %s showed %v", id, ts)
		}
	}
	if held != 4 {
		t.Errorf("live: %d cards waited for the next response, want 4: %v", held, seen["texts"])
	}
	evalAs[chromedp.Void](b, `document.querySelector(".run-timeline").scrollIntoView()`)
	b.shot("eight")
	b.reload()
	if _, raw := read(); raw != liveRaw {
		t.Errorf("after a reload:\n%s\nlive:\n%s", raw, liveRaw)
	}
}
