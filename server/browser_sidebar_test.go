package server

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	_ "github.com/mattn/go-sqlite3"
)

// TestBrowserSidebar: beside a conversation the user's threads are listed
// by day in their time zone, the open one marked; typing filters them,
// Enter searches all titles; on a phone the list is a drawer.
func TestBrowserSidebar(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	other := a.newUser("bob@example.com", false)
	old := u.newThread("Quarterly report")
	current := u.newThread("Launch plan")
	u.newThread("Launch retro")
	other.newThread("Bob's launch")
	// One thread was last active ten days ago.
	db, err := sql.Open("sqlite3", filepath.Join(a.dir, "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), "UPDATE threads SET updated_at = ? WHERE id = ?", time.Now().UTC().Add(-240*time.Hour), old); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(current, "")

	groups := evalAs[[]string](b, `[...document.querySelectorAll("#sidebar-list .group-head")].map((h) => h.textContent)`)
	if len(groups) != 2 || groups[0] != "Today" || groups[1] != "Previous 30 days" {
		t.Errorf("sidebar groups %v, want Today and Previous 30 days", groups)
	}
	titles := evalAs[[]string](b, `[...document.querySelectorAll("#sidebar-list .sidebar-item a")].map((a) => a.textContent)`)
	if len(titles) != 3 || titles[2] != "Quarterly report" {
		t.Errorf("sidebar threads %v, want the user's three, the old one last", titles)
	}
	if got := evalAs[string](b, `document.querySelector('#sidebar-list a[aria-current="page"]')?.textContent`); got != "Launch plan" {
		t.Errorf("the open thread marked in the sidebar is %q", got)
	}
	b.shot("sidebar")

	b.do("filter", chromedp.SendKeys(`#sidebar-q`, "LAUNCH"))
	shown := evalAs[[]string](b, `[...document.querySelectorAll("#sidebar-list li:not([hidden])")].map((li) => li.textContent.trim())`)
	if len(shown) != 3 || shown[0] != "Today" {
		t.Errorf("filtered sidebar shows %v, want the Today heading and the two launch threads", shown)
	}
	b.do("search all", chromedp.SendKeys(`#sidebar-q`, "\r"))
	b.waitFor("the search results", `location.pathname === "/" && new URLSearchParams(location.search).get("q") === "LAUNCH"`, 10*time.Second)
	if got := evalAs[string](b, `document.querySelector(".search-head").textContent`); got == "" || evalAs[int](b, `document.querySelectorAll(".thread-list .thread-item").length`) != 2 {
		t.Errorf("search page: %q with %d results, want the two launch threads", got, evalAs[int](b, `document.querySelectorAll(".thread-list .thread-item").length`))
	}

	// A phone: the sidebar is a drawer behind the Threads button.
	b.do("phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	b.openThread(current, "")
	if evalAs[bool](b, `document.querySelector("#sidebar").checkVisibility({ visibilityProperty: true })`) {
		t.Error("on a phone the sidebar is open before it is asked for")
	}
	b.activate("open the drawer", `.sidebar-toggle`)
	b.waitFor("the drawer", `document.querySelector("#sidebar").checkVisibility({ visibilityProperty: true }) && document.querySelector("#sidebar").getBoundingClientRect().left === 0 && document.querySelector(".sidebar-toggle").getAttribute("aria-expanded") === "true"`, 5*time.Second)
	b.shot("phone-drawer")
	b.do("close it", chromedp.KeyEvent("\u001b"))
	b.waitFor("the drawer closed", `document.querySelector(".sidebar-toggle").getAttribute("aria-expanded") === "false"`, 5*time.Second)
}
