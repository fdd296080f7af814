package server

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd/server/files"
	"herd/views"
)

// TestBrowserAttach: a file picked with Attach uploads with its progress
// bar to done, is sent with "summarise the attached file", a subagent's
// card reads it and the answer names it; the message keeps its chip
// after a reload, and the chip's link gives back the very bytes.
func TestBrowserAttach(t *testing.T) {
	a, b := openEmptyThread(t, "attach")
	th := strings.TrimPrefix(evalAs[string](b, `location.pathname`), "/threads/")
	notes := []byte("Apples: 3 crates\nPears: 2 crates\nPlums: none this week\n")
	local := filepath.Join(t.TempDir(), "harvest notes.txt")
	if err := os.WriteFile(local, notes, 0o644); err != nil {
		t.Fatal(err)
	}

	// A chip's size reads the same built live as rendered with the page.
	sizes := []int64{0, 1, 1023, 1024, 1075, 1076, 10 << 10, 1<<20 - 52, 1<<20 - 51, 1 << 20, 5<<20 + 52429, 3 << 30}
	want := make([]string, len(sizes))
	for i, n := range sizes {
		want[i] = views.FileSize(n)
	}
	if got := evalAwait[[]string](b, fmt.Sprintf(`import("/static/format.js").then((m) => %s.map(m.fileSize))`, jsInts(sizes))); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("fileSize: static/format.js says %q, views.FileSize %q", got, want)
	}

	if label := evalAs[string](b, `document.querySelector("#attach-button").textContent`); label != "Attach" {
		t.Errorf("the attach button reads %q", label)
	}
	b.do("pick the file", chromedp.SetUploadFiles(chromedp.CSS("#attach-input"), []string{local}))
	b.waitFor("the chip done", `(() => {
		const c = document.querySelector("#composer-files .file-chip");
		return c && c.dataset.state === "done" && c.querySelector(".file-chip-progress").value === 100;
	})()`, 10*time.Second)
	if got := evalAs[string](b, `document.querySelector("#composer-files .file-chip").innerText`); !strings.Contains(got, "harvest notes.txt") || !strings.Contains(got, "55 B") {
		t.Errorf("the chip reads %q, want the name and 55 B", got)
	}
	b.shot("attached")

	b.sendMessage("summarise the attached file")
	b.waitFor("the chips cleared", `document.querySelector("#composer-files").hidden && document.querySelectorAll("#composer-files li").length === 0`, 10*time.Second)
	b.waitFor("the card read the file", `(() => {
		const c = document.querySelector("#messages section.card");
		return c && c.dataset.status === "completed";
	})()`, 30*time.Second)
	b.waitRunEnd(a, th)
	b.waitFor("the answer names the file", `[...document.querySelectorAll("article.msg-ai .msg-body")].some((n) => n.textContent.includes("harvest notes.txt"))`, 10*time.Second)
	live := messageChips(b)
	b.shot("answered")

	b.reload()
	reloaded := messageChips(b)
	evalAs[chromedp.Void](b, `document.querySelector(".msg-human").scrollIntoView({ block: "center" })`)
	b.shot("reloaded-chip")
	if live != reloaded || !strings.Contains(live, "uploads/harvest notes.txt|harvest notes.txt|55 B||/api/threads/"+th+"/files/uploads/harvest%20notes.txt") {
		t.Errorf("the message's chips: live %q, after reload %q", live, reloaded)
	}
	got := evalAwait[string](b, `(async () => {
		const res = await fetch(document.querySelector(".msg-human .msg-attachments a").href);
		return res.ok ? await res.text() : "HTTP " + res.status;
	})()`)
	if !bytes.Equal([]byte(got), notes) {
		t.Errorf("downloaded %q through the chip, want %q", got, notes)
	}

	b.do("phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	b.reload()
	b.do("pick the file again", chromedp.SetUploadFiles(chromedp.CSS("#attach-input"), []string{local}))
	b.waitFor("the chip done", `document.querySelector("#composer-files .file-chip")?.dataset.state === "done"`, 10*time.Second)
	if over := evalAs[bool](b, `document.documentElement.scrollWidth > innerWidth`); over {
		t.Error("the page scrolls sideways on a phone with a chip in the composer")
	}
	b.shot("phone")

	// Removing the unsent chip deletes its upload; the sent one stays.
	evalAs[chromedp.Void](b, `(() => {
		const f = window.fetch;
		window.fetch = (...args) => {
			const p = f(...args);
			if (args[1]?.method === "DELETE") window.__deleted = p.then((r) => r.status);
			return p;
		};
	})()`)
	b.do("remove the chip", chromedp.Click(`#composer-files .file-chip-remove`))
	b.waitFor("the delete sent", `document.querySelectorAll("#composer-files .file-chip").length === 0 && !!window.__deleted`, 5*time.Second)
	if status := evalAwait[int](b, `window.__deleted`); status != 204 {
		t.Errorf("the removed chip's delete answered %d, want 204", status)
	}
	listed := evalAwait[[]string](b, `fetch("/api/threads/`+th+`/files?prefix=uploads").then((r) => r.json()).then((j) => j.files.map((f) => f.path))`)
	if strings.Join(listed, "|") != "uploads/harvest notes.txt" {
		t.Errorf("after removing the chip uploads/ lists %q, want the sent file alone", listed)
	}
}

// messageChips is the chips of the human messages as
// "path|name|size|target" lines.
func messageChips(b *browser) string {
	return evalAs[string](b, `[...document.querySelectorAll(".msg-human .msg-attachments a.file-chip")].map((a) =>
		[a.dataset.path, a.querySelector(".file-chip-name").textContent, a.querySelector(".file-chip-size").textContent, a.target, new URL(a.href).pathname].join("|")).join("\n")`)
}

// TestBrowserAttachRefused: a file over files.max_upload_mb shows its
// chip in an error state with the server's message; a chip is removed
// from the keyboard; Send still sends the message, without the file.
func TestBrowserAttachRefused(t *testing.T) {
	a := newApp(t, withFiles(func(o *files.Options) { o.MaxUploadMB = 1 }))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("refused")
	b := newBrowser(t, a.http.URL)
	b.allowErrors(`status of 413`)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	big := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(big, make([]byte, 1<<20+1), 0o644); err != nil {
		t.Fatal(err)
	}
	b.do("pick the big file", chromedp.SetUploadFiles(chromedp.CSS("#attach-input"), []string{big}))
	b.waitFor("the chip refused", `document.querySelector("#composer-files .file-chip")?.dataset.state === "error"`, 10*time.Second)
	msg := evalAs[string](b, `document.querySelector("#composer-files .file-chip-error").textContent`)
	if !strings.Contains(msg, "big.bin") || !strings.Contains(msg, "max_upload_mb") {
		t.Errorf("the refused chip says %q, want the server's message naming the file and the limit", msg)
	}
	b.shot("refused")

	// A chip is removed from the keyboard; focus goes back to Attach.
	b.do("pick it again", chromedp.SetUploadFiles(chromedp.CSS("#attach-input"), []string{big}))
	b.waitFor("two refused chips", `[...document.querySelectorAll("#composer-files .file-chip")].filter((c) => c.dataset.state === "error").length === 2`, 10*time.Second)
	if label := evalAs[string](b, `document.querySelector("#composer-files .file-chip-remove").getAttribute("aria-label")`); label != "Remove big.bin" {
		t.Errorf("the remove button is labelled %q", label)
	}
	b.do("remove one with Enter", chromedp.Focus(chromedp.CSS("#composer-files .file-chip-remove")), chromedp.KeyEvent("\r"))
	b.waitFor("one chip left", `document.querySelectorAll("#composer-files .file-chip").length === 1`, 5*time.Second)
	if id := evalAs[string](b, `document.activeElement.id`); id != "attach-button" {
		t.Errorf("after removing a chip the focus is on %q, want #attach-button", id)
	}

	b.sendMessage("hello without the file")
	b.waitRunEnd(a, th)
	b.waitFor("the message sent", `[...document.querySelectorAll(".msg-human .msg-body")].some((n) => n.textContent.includes("hello without the file"))`, 10*time.Second)
	if n := evalAs[int](b, `document.querySelectorAll(".msg-human .msg-attachments").length`); n != 0 {
		t.Errorf("the message shows %d attachment lists, want none", n)
	}
}

// TestBrowserAttachNewThread: on the new-thread page a dropped file (the
// drop target shows while it is dragged) and a pasted one make the thread
// first, empty; Send starts its run and opens it, the chips on its first
// message. Send waits while an upload runs.
func TestBrowserAttachNewThread(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.navigate("/threads/new")
	b.waitFor("the new-thread page", `document.documentElement.dataset.herdReady === "1"`, 10*time.Second)

	// Drag a file over the page: the drop target shows; drop it.
	evalAs[chromedp.Void](b, `(() => {
		window.__dt = new DataTransfer();
		__dt.items.add(new File(["dropped text\n"], "dropped.txt", { type: "text/plain" }));
		document.querySelector("#messages").dispatchEvent(new DragEvent("dragenter", { dataTransfer: __dt, bubbles: true, cancelable: true }));
	})()`)
	if evalAs[bool](b, `document.querySelector("#drop-target").hidden`) {
		t.Error("no drop target while a file is dragged over the page")
	}
	b.shot("dragging")
	evalAs[chromedp.Void](b, `document.querySelector("#messages").dispatchEvent(new DragEvent("drop", { dataTransfer: __dt, bubbles: true, cancelable: true }))`)
	if !evalAs[bool](b, `document.querySelector("#drop-target").hidden`) {
		t.Error("the drop target stays after the drop")
	}
	b.waitFor("the thread made and the chip done", `/^\/threads\/[0-9a-f-]{36}$/.test(location.pathname) && document.querySelector("#composer-files .file-chip")?.dataset.state === "done"`, 10*time.Second)
	th := strings.TrimPrefix(evalAs[string](b, `location.pathname`), "/threads/")

	// Paste a second file (a screenshot would come so) into the message:
	// Send waits while it uploads.
	busy := evalAs[bool](b, `(() => {
		const input = document.querySelector("#composer-input");
		input.value = "summarise the attached files";
		input.dispatchEvent(new Event("input", { bubbles: true }));
		if (document.querySelector("#send-button").disabled) return false;
		const dt = new DataTransfer();
		dt.items.add(new File(["pasted text\n"], "pasted.txt", { type: "text/plain" }));
		input.dispatchEvent(new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true }));
		return document.querySelector("#send-button").disabled;
	})()`)
	if !busy {
		t.Error("Send is not disabled while a file uploads")
	}
	b.waitFor("two chips done", `[...document.querySelectorAll("#composer-files .file-chip")].filter((c) => c.dataset.state === "done").length === 2`, 10*time.Second)
	b.shot("two-chips")

	b.markPage()
	b.sendMessage("summarise the attached files")
	b.waitNewPage("the thread page", fmt.Sprintf(`location.pathname === "/threads/%s" && !!document.querySelector("#herd-state")`, th), 10*time.Second)
	b.ready()
	b.waitRunEnd(a, th)
	if got := messageChips(b); !strings.Contains(got, "uploads/dropped.txt|dropped.txt|13 B") || !strings.Contains(got, "uploads/pasted.txt|pasted.txt|12 B") {
		t.Errorf("the first message's chips: %q", got)
	}
	if title := evalAs[string](b, `document.querySelector("#thread-title").textContent`); title != "summarise the attached files" {
		t.Errorf("the thread is titled %q, want its first message", title)
	}
	b.shot("opened")
}

func jsInts(ns []int64) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprint(n)
	}
	return "[" + strings.Join(parts, ",") + "]"
}
