package server

import (
	"archive/zip"
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// pngBytes is a w×h PNG.
func pngBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), 200, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestBrowserFilesPanel opens a thread's Files panel as a user does: the
// uploads listed with their folder's count, a run's files appearing while
// the panel is open (workspace frames, no reload), folders opened one at
// a time, each preview kind, a file's bytes and a folder's zip through
// the panel's links, its place kept across a reload, a card's file link
// opening it, and the whole screen on a phone.
func TestBrowserFilesPanel(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 300, 2)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("panel")
	script := []byte("<h1>hi</h1><script>window.__ran = true</script><img src=x onerror=\"window.__ran = true\">")
	u.upload(th,
		upload{name: "table.csv", data: []byte("fruit,count\napples,3\npears,5\n")},
		upload{name: "dot.png", data: pngBytes(t, 40, 30)},
		upload{name: "main.go", data: []byte("package main\n\nfunc main() { println(\"hi\") }\n")},
		upload{name: "paper.pdf", data: []byte("%PDF-1.4\n%âãÏÓ\n1 0 obj <<>> endobj\n%%EOF\n")},
		upload{name: "page.html", data: script},
	)

	b := newBrowser(t, a.http.URL)
	b.do("desktop", chromedp.EmulateViewport(1280, 900))
	b.signIn(u.email, "password123")
	b.openThread(th, "")
	evalAs[chromedp.Void](b, `window.__sameDocument = true`)
	b.activate("open Files", "#files-button")
	b.waitFor("the uploads folder", `(() => {
		const f = document.querySelector('#files-tree > li.files-folder[data-key="uploads"]');
		return f && f.querySelector(".files-meta").textContent.startsWith("5 files · ");
	})()`, 10*time.Second)
	if got := evalAs[string](b, `document.querySelector("#files-summary").textContent`); !strings.HasPrefix(got, "5 files · ") {
		t.Errorf("summary %q, want 5 files", got)
	}
	if !evalAs[bool](b, `location.hash === "#files" && document.querySelector("#files-button").getAttribute("aria-expanded") === "true"`) {
		t.Error("the open panel is not in the address or on its button")
	}

	// A run's files appear while the panel is open.
	b.sendMessage("Plan:\n- apples\n- pears")
	b.waitFor("notes/ live", `(() => {
		const f = document.querySelector('#files-tree > li.files-folder[data-key="notes"]');
		return f && f.querySelector(".files-meta").textContent.startsWith("2 files · ");
	})()`, 20*time.Second)
	b.waitRunEnd(a, th)
	b.waitFor("7 files in all", `document.querySelector("#files-summary").textContent.startsWith("7 files · ")`, 5*time.Second)
	if !evalAs[bool](b, `window.__sameDocument === true`) {
		t.Fatal("the page reloaded during the run")
	}

	// Folders open one level at a time; a file names the card that wrote it.
	b.activate("open notes/", `li.files-folder[data-key="notes"] > .files-toggle`)
	b.waitFor("notes/apples/", `!!document.querySelector('li.files-folder[data-key="notes/apples"]')`, 5*time.Second)
	if n := evalAs[int](b, `document.querySelectorAll("#files-tree li.files-file[data-path^='notes/']").length`); n != 0 {
		t.Errorf("%d files of notes/ listed before their folder opened", n)
	}
	b.activate("open notes/apples/", `li.files-folder[data-key="notes/apples"] > .files-toggle`)
	plan := "notes/apples/plan.md"
	b.waitFor("plan.md", fmt.Sprintf(`!!document.querySelector('li.files-file[data-path=%q] .files-writer')`, plan), 5*time.Second)
	writer := evalAs[map[string]string](b, fmt.Sprintf(`(() => {
		const li = document.querySelector('li.files-file[data-path=%q]');
		const card = document.querySelector('section.card[data-task-id="' + li.dataset.taskId + '"]');
		return { by: li.querySelector(".files-writer").textContent, title: card ? card.querySelector(".card-title").textContent : "", prompt: card ? card.querySelector(".card-prompt").textContent : "" };
	})()`, plan))
	if writer["by"] == "" || writer["by"] != writer["title"] || !strings.Contains(writer["prompt"], "apples") {
		t.Errorf("plan.md's writer %v, want the apples card's title", writer)
	}
	b.shot("files-panel-tree")

	// Markdown renders; the download is the file's bytes.
	b.activate("preview plan.md", fmt.Sprintf(`li.files-file[data-path=%q] .files-open`, plan))
	b.waitFor("the Markdown preview", `!!document.querySelector('#file-preview-body .file-preview[data-kind="markdown"]')`, 5*time.Second)
	raw, err := os.ReadFile(filepath.Join(a.workspace(th), plan))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(evalAs[string](b, `document.querySelector("#file-preview-body").innerHTML`), "# ") {
		t.Error("the Markdown preview shows raw Markdown")
	}
	got := evalAwait[string](b, `(async () => { const r = await fetch(document.querySelector("#file-preview-download").href); return r.ok ? r.text() : "HTTP " + r.status })()`)
	if got != string(raw) {
		t.Errorf("the panel's download gave %q, want %q", got, raw)
	}
	if h := evalAs[string](b, `location.hash`); h != "#files="+strings.ReplaceAll(plan, "/", "%2F") {
		t.Errorf("hash %q after opening plan.md", h)
	}
	b.shot("files-panel-markdown")

	// The place survives a reload.
	b.reload()
	b.waitFor("plan.md again after the reload", `!document.querySelector("#files-panel").hidden && !!document.querySelector('#file-preview-body .file-preview[data-kind="markdown"]')`, 10*time.Second)

	// Each kind of preview, and no upload runs as a page.
	b.activate("back to the tree", "#file-preview-back")
	b.activate("open uploads/", `li.files-folder[data-key="uploads"] > .files-toggle`)
	kinds := map[string]string{"table.csv": "csv", "dot.png": "image", "main.go": "code", "paper.pdf": "pdf", "page.html": "code"}
	for name, kind := range kinds {
		p := "uploads/" + name
		b.waitFor(p+" listed", fmt.Sprintf(`!!document.querySelector('li.files-file[data-path=%q] .files-open')`, p), 5*time.Second)
		b.activate("preview "+p, fmt.Sprintf(`li.files-file[data-path=%q] .files-open`, p))
		b.waitFor(p+" as "+kind, fmt.Sprintf(`!!document.querySelector('#file-preview-body .file-preview[data-kind=%q][data-path=%q]')`, kind, p), 5*time.Second)
		switch kind {
		case "csv":
			cells := evalAs[[]string](b, `[...document.querySelectorAll("#file-preview-body table th, #file-preview-body table td")].map((c) => c.textContent)`)
			if !slices.Equal(cells, []string{"fruit", "count", "apples", "3", "pears", "5"}) {
				t.Errorf("the CSV table holds %q", cells)
			}
		case "image":
			b.waitFor("the image drawn", `document.querySelector("#file-preview-body img")?.naturalWidth === 40`, 5*time.Second)
		case "pdf":
			if !evalAs[bool](b, `!!document.querySelector("#file-preview-body a.file-download[download]")`) {
				t.Error("the PDF has no download link")
			}
		}
		if name == "page.html" {
			if got := evalAs[string](b, `document.querySelector("#file-preview-body").textContent`); !strings.Contains(got, "<script>") {
				t.Errorf("page.html is not shown as its source: %q", got)
			}
		}
		b.shot("files-panel-" + kind)
		b.activate("back", "#file-preview-back")
	}
	if evalAs[bool](b, `window.__ran === true`) {
		t.Error("an uploaded page's script ran")
	}

	// A folder's zip holds its files.
	href := evalAs[string](b, `new URL(document.querySelector('li.files-folder[data-key="notes"] > .files-zip-folder').href).pathname + new URL(document.querySelector('li.files-folder[data-key="notes"] > .files-zip-folder').href).search`)
	res := u.do("GET", href, nil)
	if res.status != http.StatusOK {
		t.Fatalf("the folder's zip: HTTP %d", res.status)
	}
	zr, err := zip.NewReader(bytes.NewReader(res.body), int64(len(res.body)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		if strings.HasSuffix(f.Name, "apples/plan.md") {
			r, _ := f.Open()
			b, _ := io.ReadAll(r)
			if !bytes.Equal(b, raw) {
				t.Errorf("the zip's %s differs from the file", f.Name)
			}
		}
	}
	if len(names) != 2 {
		t.Errorf("the notes/ zip holds %q, want the two plans", names)
	}

	// A card's file link opens the panel at its file.
	b.activate("close", "#files-close")
	b.waitFor("closed", `document.querySelector("#files-panel").hidden && location.hash === ""`, 5*time.Second)
	b.activate("expand a card", "#messages section.card .card-toggle")
	cardPath := evalAs[string](b, `document.querySelector("#messages .card-file a").dataset.filePath`)
	b.activate("a card's file", "#messages .card-file a")
	b.waitFor("the card's file in the panel", fmt.Sprintf(`!document.querySelector("#files-panel").hidden && !!document.querySelector('#file-preview-body .file-preview[data-path=%q]')`, cardPath), 5*time.Second)

	// On a phone the panel is the screen.
	b.do("phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	b.reload()
	b.waitFor("the panel on the phone", `!document.querySelector("#files-panel").hidden`, 10*time.Second)
	if w := evalAs[float64](b, `document.querySelector("#files-panel").getBoundingClientRect().width - innerWidth`); w < -1 || w > 1 {
		t.Errorf("the panel on a phone is %v px narrower than the screen", -w)
	}
	b.shot("files-panel-phone")
	b.activate("back to the tree on the phone", "#file-preview-back")
	b.shot("files-panel-phone-tree")
}

// TestBrowserFilesRoundTrip is issue 25's whole path in a browser: a file
// dropped on the composer, "summarise the attached file", the card that
// reads it, the summary its subagent writes appearing in the open Files
// panel without a reload, the answer's link to it opening it there, and
// the panel's download giving the file's bytes.
func TestBrowserFilesRoundTrip(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 300, 2)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("round trip")
	b := newBrowser(t, a.http.URL)
	b.do("desktop", chromedp.EmulateViewport(1280, 900))
	b.signIn(u.email, "password123")
	b.openThread(th, "")
	b.activate("open Files", "#files-button")
	b.waitFor("the empty panel", `!document.querySelector("#files-empty").hidden`, 10*time.Second)
	// When the summary first shows in the panel, and whether the page
	// was ever reloaded.
	evalAs[chromedp.Void](b, `(() => {
		window.__sameDocument = true;
		new MutationObserver(() => {
			if (!window.__summaryAt && document.querySelector('#files-tree li.files-folder[data-key="summaries"]')) window.__summaryAt = performance.now();
		}).observe(document.getElementById("files-tree"), { subtree: true, childList: true });
	})()`)

	notes := "Apples: 3 crates\nPears: 2 crates\nPlums: none this week\n"
	evalAs[chromedp.Void](b, fmt.Sprintf(`(() => {
		const dt = new DataTransfer();
		dt.items.add(new File([%q], "harvest.txt", { type: "text/plain" }));
		const composer = document.querySelector("#composer");
		composer.dispatchEvent(new DragEvent("dragenter", { dataTransfer: dt, bubbles: true, cancelable: true }));
		composer.dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
	})()`, notes))
	b.waitFor("the chip done", `document.querySelector("#composer-files .file-chip")?.dataset.state === "done"`, 10*time.Second)
	b.waitFor("the upload in the panel", `document.querySelector('#files-tree li.files-folder[data-key="uploads"] .files-meta')?.textContent.startsWith("1 file · ")`, 5*time.Second)

	b.sendMessage("summarise the attached file")
	b.waitFor("the summary in the panel", `!!window.__summaryAt`, 20*time.Second)
	b.waitRunEnd(a, th)
	if !evalAs[bool](b, `window.__sameDocument === true`) {
		t.Fatal("the page reloaded")
	}

	// The card read the attachment.
	b.activate("expand the card", "#messages section.card .card-toggle")
	b.waitFor("its steps", `[...document.querySelectorAll("#messages section.card .card-step")].some((s) => s.textContent.includes("read_file") && s.textContent.includes("uploads/harvest.txt"))`, 10*time.Second)

	const summary = "summaries/harvest.md"
	raw, err := os.ReadFile(filepath.Join(a.workspace(th), summary))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "Apples: 3 crates") {
		t.Errorf("the summary does not quote the file: %q", raw)
	}

	// The answer's link opens the summary in the panel.
	b.activate("the answer's link", fmt.Sprintf(`.msg-ai .msg-body a.file-link[data-file-path=%q]`, summary))
	b.waitFor("the summary previewed", fmt.Sprintf(`!!document.querySelector('#file-preview-body .file-preview[data-kind="markdown"][data-path=%q]')`, summary), 5*time.Second)
	b.shot("roundtrip-preview")

	// In the tree, with its writer, and its download is its bytes.
	b.activate("back to the tree", "#file-preview-back")
	b.activate("open summaries/", `li.files-folder[data-key="summaries"] > .files-toggle`)
	row := fmt.Sprintf(`document.querySelector('li.files-file[data-path=%q]')`, summary)
	b.waitFor("the summary's row", row+` !== null`, 5*time.Second)
	if by := evalAs[string](b, row+`.querySelector(".files-writer")?.textContent ?? ""`); by != evalAs[string](b, `document.querySelector("#messages section.card .card-title").textContent`) {
		t.Errorf("the summary's writer reads %q, want the card's title", by)
	}
	got := evalAwait[string](b, `fetch(`+row+`.querySelector(".files-download").href).then((r) => r.text())`)
	if got != string(raw) {
		t.Errorf("the panel's download gave %q, want %q", got, raw)
	}
	b.shot("roundtrip-tree")
}
