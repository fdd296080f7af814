package server

import (
	"testing"
	"time"
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
