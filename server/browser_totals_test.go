package server

import (
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

// TestBrowserEightItems: a list of 8 at 4 per response ends with 8
// completed cards; the 4 the limit held back say so, quietly, and were
// started in the lead's next turn.
func TestBrowserEightItems(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 20, 1)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("eight")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")
	b.sendMessage("Eight:\n- one\n- two\n- three\n- four\n- five\n- six\n- seven\n- eight")
	b.waitRunEnd(a, th)
	check := func(when string) {
		got := evalAs[map[string]any](b, `(() => {
			const cards = [...document.querySelectorAll("#messages section.card")];
			const held = cards.filter((c) => c.dataset.notStarted === "1");
			return {
				completed: cards.filter((c) => c.dataset.status === "completed").length,
				held: held.length,
				text: held.map((c) => c.querySelector(".card-status").textContent),
				refusal: held.map((c) => c.dataset.refusalReason + "/" + c.dataset.refusalLimit),
			};
		})()`)
		if got["completed"] != float64(8) || got["held"] != float64(4) {
			t.Errorf("%s: %v completed and %v held back, want 8 and 4", when, got["completed"], got["held"])
		}
		for _, s := range got["text"].([]any) {
			if s != "Not started · limit of 4 per response" {
				t.Errorf("%s: a held-back card says %q", when, s)
			}
		}
		// The card carries the refusal's fields, built live as the page
		// writes them.
		for _, r := range got["refusal"].([]any) {
			if r != "max_concurrent_per_response/4" {
				t.Errorf("%s: a held-back card's refusal is %q", when, r)
			}
		}
	}
	check("live")
	evalAs[chromedp.Void](b, `document.querySelector("#messages section.card").scrollIntoView()`)
	b.shot("eight")
	b.reload()
	check("after a reload")
}
