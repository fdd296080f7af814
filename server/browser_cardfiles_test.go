package server

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd/views"
)

// TestBrowserCardFiles runs a list whose demo subagents each write
// notes/<item>/plan.md: every card lists its file while it runs, from the
// workspace frames (no reload), shows the same after a reload, and its
// link downloads the file's bytes from the thread's files route.
func TestBrowserCardFiles(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 300, 2)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("files")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")
	// What each card showed of its files, per status, as rendered; and a
	// mark a reload would wipe.
	evalAs[chromedp.Void](b, `(() => {
		window.__sameDocument = true;
		window.__filesLog = [];
		new MutationObserver(() => {
			for (const c of document.querySelectorAll("#messages section.card")) {
				const files = [...c.querySelectorAll(".card-file")].map((li) => li.textContent).join("|");
				const count = c.querySelector(".card-files-count");
				const e = c.dataset.taskId + " " + c.dataset.status + " " + (count.hidden ? "-" : count.textContent) + " " + files;
				if (!window.__filesLog.includes(e)) window.__filesLog.push(e);
			}
		}).observe(document.getElementById("messages"), { subtree: true, childList: true, attributes: true, characterData: true });
	})()`)

	b.sendMessage("Plan:\n- apples\n- pears")
	b.waitRunEnd(a, th)
	b.waitFor("both cards done with a file", `(() => {
		const cs = [...document.querySelectorAll("#messages section.card")];
		return cs.length === 2 && cs.every((c) => c.dataset.status === "completed" && c.querySelectorAll(".card-file").length === 1);
	})()`, 10*time.Second)
	if !evalAs[bool](b, `window.__sameDocument === true`) {
		t.Fatal("the page reloaded during the run")
	}

	want := map[string]string{} // task → its file's path
	for _, c := range b.cards() {
		item := map[bool]string{true: "apples", false: "pears"}[strings.Contains(c.Prompt, "apples")]
		want[c.TaskID] = "notes/" + item + "/plan.md"
	}
	if len(want) != 2 {
		t.Fatalf("%d tasks, want 2", len(want))
	}
	log := evalAs[[]string](b, `window.__filesLog`)
	for task, path := range want {
		raw, err := os.ReadFile(filepath.Join(a.workspace(th), path))
		if err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("Wrote %s · %s", path, views.FileSize(int64(len(raw))))
		// Shown while the card was still running: the workspace frame, not
		// the card's end, put it there.
		if !slices.Contains(log, task+" running 1 file "+line) {
			t.Errorf("card %s never showed %q while running; it showed:\n%s", task, line, strings.Join(log, "\n"))
		}
		c := evalAs[map[string]string](b, fmt.Sprintf(`(() => {
			const c = document.querySelector('section.card[data-task-id=%q]');
			const a = c.querySelector(".card-file a");
			return { line: c.querySelector(".card-file").textContent, count: c.querySelector(".card-files-count").textContent, href: new URL(a.href).pathname, target: a.target };
		})()`, task))
		wantHref := "/api/threads/" + th + "/files/" + path
		if c["line"] != line || c["count"] != "1 file" || c["href"] != wantHref || c["target"] != "_blank" {
			t.Errorf("card %s: %v, want %q, \"1 file\", %q, _blank", task, c, line, wantHref)
		}
		got := evalAwait[string](b, fmt.Sprintf(`(async () => {
			const res = await fetch(document.querySelector('section.card[data-task-id=%q] .card-file a').href);
			return res.ok ? await res.text() : "HTTP " + res.status;
		})()`, task))
		if got != string(raw) {
			t.Errorf("card %s: the link downloaded %q, want the file's %q", task, got, raw)
		}
	}
	b.shot("cardfiles-collapsed")
	b.do("expand the first card", chromedp.Click(`#messages section.card .card-toggle`))
	b.waitFor("its body", `!document.querySelector("#messages section.card .card-body").hidden`, 5*time.Second)
	evalAs[chromedp.Void](b, `document.querySelector("#messages section.card").scrollIntoView({ block: "start" })`)
	b.shot("cardfiles-expanded")

	live := b.cards()
	b.reload()
	sameCards(t, "after a reload", b.cards(), live)
	b.shot("cardfiles-reloaded")
}
