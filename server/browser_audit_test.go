package server

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd/models"
)

// TestBrowserAudit opens the audit log from /admin in Chromium after real
// admin actions: it filters by action, expands an entry's diff (a value
// shaped like HTML stays text) and follows the export link, which keeps
// the filters.
func TestBrowserAudit(t *testing.T) {
	a := newApp(t)
	admin := a.newUser("root@example.com", true)
	var ann userJSON
	admin.mustJSON("POST", "/api/admin/users", map[string]string{"email": "ann@example.com", "password": strongPassword}, http.StatusCreated, &ann)
	admin.mustJSON("PATCH", "/api/admin/users/"+ann.ID, map[string]string{"role": "admin"}, http.StatusOK, nil)
	admin.mustJSON("PUT", "/api/admin/settings", map[string]bool{"token_usage_enabled": false}, http.StatusOK, nil)
	a.srv.Audit(context.Background(), Actor{ID: admin.id, Email: admin.email}, models.AuditUserUpdate, ann.ID,
		map[string]string{"note": "plain"}, map[string]string{"note": `<img src=x onerror="alert(1)">`})

	b := newBrowser(t, a.http.URL)
	b.signIn(admin.email, "password123")
	b.navigate("/admin")
	b.activate("open the audit log", `a[href="/admin/audit"]`)
	b.waitFor("four entries", `location.pathname === "/admin/audit" && document.querySelectorAll("#audit-entries tr.audit-entry").length === 4`, 10*time.Second)

	b.markPage()
	b.do("filter to role changes", chromedp.SetValue(chromedp.CSS("#audit-action"), models.AuditUserRole), chromedp.Submit(chromedp.CSS("form.audit-filters")))
	b.waitNewPage("the role change alone", `document.querySelectorAll("#audit-entries tr.audit-entry").length === 1`, 10*time.Second)
	if got := evalAs[string](b, `location.search`); got != "?actor=&action=user.role&since=&until=" {
		t.Errorf("filter query %q", got)
	}
	b.activate("expand the diff", "#audit-entries .audit-diff summary")
	b.waitFor("the diff open", `document.querySelector("#audit-entries .audit-diff").open`, 5*time.Second)
	changed := evalAs[string](b, `[...document.querySelectorAll("#audit-entries .audit-changed")].map((r) => r.querySelector("th").textContent + ":" + r.querySelector(".audit-before").textContent.trim() + ">" + r.querySelector(".audit-after").textContent.trim()).join(" ")`)
	if changed != "role:user>admin (changed)" {
		t.Errorf("changed fields %q, want role user>admin", changed)
	}
	b.shot("audit-diff")

	csv := evalAs[string](b, `document.querySelector("#audit-csv").href`)
	u, err := url.Parse(csv)
	if err != nil || u.Path != "/api/admin/audit" || u.Query().Get("format") != "csv" || u.Query().Get("action") != models.AuditUserRole {
		t.Fatalf("export link %q", csv)
	}
	// The download, with the browser's own session.
	got, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`fetch(document.querySelector("#audit-csv").href).then((r) => r.text())`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(got), "\n"); len(lines) != 2 || !strings.Contains(lines[1], models.AuditUserRole) {
		t.Errorf("exported %q, want the header and the role change", got)
	}

	b.navigate("/admin/audit?action=user.update")
	b.activate("expand the hostile diff", "#audit-entries .audit-diff summary")
	if got := evalAs[string](b, `document.querySelector("#audit-entries .audit-after").textContent.trim()`); !strings.HasPrefix(got, `<img src=x onerror="alert(1)">`) {
		t.Errorf("a recorded value reads %q, want it as text", got)
	}
	if n := evalAs[int](b, `document.querySelectorAll("#audit-entries img").length`); n != 0 {
		t.Errorf("%d images made of a recorded value", n)
	}

	// On a phone the page is as wide as the screen: an entry is a block.
	b.do("phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	b.navigate("/admin/audit")
	b.activate("expand a diff", "#audit-entries .audit-diff summary")
	if w := evalAs[int](b, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the page is %d px wide on a 390 px phone", w)
	}
	b.fullShot("audit-phone")
}
