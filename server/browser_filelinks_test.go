package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd/views"
)

// TestBrowserFileLinks: an answer with no path fetches no file list; a
// file attached and summarised has its subagent write
// summaries/<name>.md, which the card lists and the lead's answer links
// (live and after a reload) to the file's bytes; a path the workspace
// does not hold stays text until a workspace frame says it was written,
// and unlinks when one says it was deleted.
func TestBrowserFileLinks(t *testing.T) {
	a, b := openEmptyThread(t, "links")
	th := strings.TrimPrefix(evalAs[string](b, `location.pathname`), "/threads/")
	// The uploads post to the same path, by XMLHttpRequest (static/attach.js).
	listed := fmt.Sprintf(`performance.getEntriesByType("resource").filter((e) => e.initiatorType === "fetch" && new URL(e.name).pathname === "/api/threads/%s/files").length`, th)

	// The module's rules, on a detached body with an index that knows two
	// paths.
	got := evalAwait[string](b, `import("/static/filelinks.js").then((m) => {
		const body = document.createElement("div");
		body.className = "msg-body";
		body.innerHTML = "<p>See (notes/a.md), ./notes/a.md, notes/b.md, <code>docs/x y.txt</code>, <code>docs/none.txt</code> " +
			"and a.go, i.e. not <a href='#'>notes/a.md</a>, e.g. 1.5 or /etc/passwd.</p><pre><code>notes/a.md</code></pre>";
		const known = new Set(["notes/a.md", "docs/x y.txt"]);
		const unlinked = m.linkPaths(body, { loaded: true, has: (p) => known.has(p) }, "t1");
		return [...body.querySelectorAll("a.file-link")].map((a) => a.dataset.filePath + "=" + a.textContent + "@" + new URL(a.href).pathname).join(" | ") +
			" ; " + [...unlinked].sort().join(",") + " ; " + body.textContent;
	})`)
	want := "notes/a.md=notes/a.md@/api/threads/t1/files/notes/a.md | notes/a.md=./notes/a.md@/api/threads/t1/files/notes/a.md | " +
		"docs/x y.txt=docs/x y.txt@/api/threads/t1/files/docs/x%20y.txt ; a.go,docs/none.txt,notes/b.md ; " +
		"See (notes/a.md), ./notes/a.md, notes/b.md, docs/x y.txt, docs/none.txt and a.go, i.e. not notes/a.md, e.g. 1.5 or /etc/passwd.notes/a.md"
	if got != want {
		t.Errorf("linkPaths:\n got %s\nwant %s", got, want)
	}

	b.sendMessage("hello")
	b.waitRunEnd(a, th)
	if n := evalAs[int](b, listed); n != 0 {
		t.Errorf("an answer naming no path fetched the file list %d times", n)
	}

	notes := []byte("Apples: 3 crates\nPears: 2 crates\nPlums: none this week\n")
	local := filepath.Join(t.TempDir(), "harvest-notes.txt")
	if err := os.WriteFile(local, notes, 0o644); err != nil {
		t.Fatal(err)
	}
	b.do("pick the file", chromedp.SetUploadFiles(chromedp.CSS("#attach-input"), []string{local}))
	b.waitFor("the chip done", `document.querySelector("#composer-files .file-chip")?.dataset.state === "done"`, 10*time.Second)
	b.sendMessage("summarise the attached file")
	b.waitRunEnd(a, th)

	const summary = "summaries/harvest-notes.md"
	raw, err := os.ReadFile(filepath.Join(a.workspace(th), summary))
	if err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("Wrote %s · %s", summary, views.FileSize(int64(len(raw))))
	cardLine := `[...document.querySelectorAll("#messages section.card .card-file")].map((li) => li.textContent).join("|")`
	b.waitFor("the card lists the summary", cardLine+` === `+fmt.Sprintf("%q", line), 10*time.Second)
	link := fmt.Sprintf(`document.querySelector('.msg-ai .msg-body a.file-link[data-file-path=%q]')`, summary)
	b.waitFor("the answer links the summary", link+` !== null`, 10*time.Second)
	if href := evalAs[string](b, `new URL(`+link+`.href).pathname`); href != "/api/threads/"+th+"/files/"+summary {
		t.Errorf("the summary's link goes to %q", href)
	}
	body := evalAwait[string](b, `fetch(`+link+`.href).then((r) => r.text())`)
	if body != string(raw) {
		t.Errorf("the link gave %q, want the file's %q", body, raw)
	}
	if n := evalAs[int](b, listed); n != 1 {
		t.Errorf("the file list was fetched %d times, want once", n)
	}

	// A path no file has stays text; a frame that says it was written links
	// it, one that says it was deleted unlinks it.
	links := `[...document.querySelectorAll(".msg-ai .msg-body a.file-link")].map((a) => a.dataset.filePath).join("|")`
	const upload = "uploads/harvest-notes.txt"
	if got, want := evalAs[string](b, links), upload+"|"+upload+"|"+summary; got != want {
		t.Errorf("the answer links %q, want %q", got, want)
	}
	b.sendMessage("Where are docs/missing.md and " + summary + "?")
	b.waitRunEnd(a, th)
	before := upload + "|" + upload + "|" + summary + "|"
	b.waitFor("the new answer links the summary", links+` === "`+before+summary+`"`, 10*time.Second)
	live := evalAs[string](b, links)
	frame := func(deleted bool) {
		evalAs[chromedp.Void](b, fmt.Sprintf(`document.dispatchEvent(new CustomEvent("herd:frame", { detail: { type: "workspace", data: { changes: [{ path: "docs/missing.md", size: 3, deleted: %t }] } } }))`, deleted))
	}
	frame(false)
	b.waitFor("a written path links", links+` === "`+before+`docs/missing.md|`+summary+`"`, 5*time.Second)
	b.shot("filelinks")
	frame(true)
	b.waitFor("a deleted path unlinks", links+` === "`+live+`"`, 5*time.Second)
	if text := evalAs[string](b, `[...document.querySelectorAll(".msg-ai .msg-body")].at(-1).textContent`); !strings.Contains(text, "docs/missing.md and "+summary) {
		t.Errorf("the unlinked answer reads %q", text)
	}

	b.reload()
	b.waitFor("the links after a reload", links+` === `+fmt.Sprintf("%q", live), 10*time.Second)
	if got := evalAs[string](b, cardLine); got != line {
		t.Errorf("after a reload the card lists %q, want %q", got, line)
	}
	evalAs[chromedp.Void](b, link+`.scrollIntoView({ block: "center" })`)
	b.shot("filelinks-reloaded")
}
