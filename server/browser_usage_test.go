package server

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserAdminUsage opens the usage page from /admin in Chromium with
// a month of ledger rows of four users on three models: both charts draw
// (coloured by the stylesheet, which the CSP lets through), no script or
// style is refused, and the whole page is saved under test-output/.
func TestBrowserAdminUsage(t *testing.T) {
	a := newApp(t)
	root := a.newUser("root@example.com", true)
	now := time.Now()
	var seeds []ledgerSeed
	for i, email := range []string{"root@example.com", "ann@example.com", "bob@example.com", "carol@example.com"} {
		u := root
		if i > 0 {
			u = a.newUser(email, false)
		}
		th := u.newThread("t")
		for d := range 30 {
			if (d+i)%4 == 3 {
				continue // a quiet day
			}
			model := []string{"demo-fast", "demo-deep", "gpt-4o"}[(d+i)%3]
			seeds = append(seeds, ledgerSeed{u, th, model, d, int64(400*(i+1) + 90*((d*7+i)%11)), int64(60 * (i + 1)), 0})
		}
	}
	a.seedLedger(now, seeds)

	b := newBrowser(t, a.http.URL)
	b.signIn(root.email, "password123")
	b.navigate("/admin")
	b.activate("open the usage page", `a[href="/admin/usage"]`)
	b.waitFor("two charts", `location.pathname === "/admin/usage" && document.querySelectorAll("svg.chart").length === 2`, 10*time.Second)
	bars := evalAs[int](b, `document.querySelectorAll("#usage-by-user svg.chart rect").length`)
	if want := len(seeds); bars != want { // one bar part per user and day with calls
		t.Errorf("%d bar parts in the users' chart, want %d", bars, want)
	}
	if fill := evalAs[string](b, `getComputedStyle(document.querySelector("#usage-by-user rect.chart-s0")).fill`); fill != "rgb(36, 87, 197)" {
		t.Errorf("the first series is filled %q, want the stylesheet's blue", fill)
	}
	total := evalAs[string](b, `document.querySelector("[data-usage-total]").textContent`)
	if want := groupDigits(sumSeeds(seeds, 30, -1, func(ledgerSeed) bool { return true }).TotalTokens); total != want {
		t.Errorf("total %q, want %q", total, want)
	}
	b.fullShot("usage-30-days")

	b.do("pick 7 days", chromedp.SetValue(chromedp.CSS("#usage-days"), "7"), chromedp.Submit(chromedp.CSS("form.usage-range")))
	b.waitFor("the 7-day range", `location.search === "?days=7" && document.querySelectorAll("#usage-by-model svg.chart rect").length > 0`, 10*time.Second)
	b.fullShot("usage-7-days")
}

// fullShot saves a screenshot of the whole page, beyond the viewport.
func (b *browser) fullShot(name string) {
	b.t.Helper()
	buf, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(b.out, 0o755); err != nil {
		b.t.Fatal(err)
	}
	b.shots++
	p := filepath.Join(b.out, fmt.Sprintf("%02d-%s.png", b.shots, name))
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
	abs, _ := filepath.Abs(p)
	b.t.Logf("screenshot: %s", abs)
}
