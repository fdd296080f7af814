package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd/models"
)

// TestDeleteUndo: a deleted thread leaves its owner's view at once and can
// be restored, whole, within the undo window; after it, it is gone for
// good with everything recorded in it, and restoring says so. A server
// that stopped before a purge finishes it when it starts.
func TestDeleteUndo(t *testing.T) {
	purged := make(chan string, 8)
	a := newApp(t, withServer(func(o *Options) {
		o.UndoWindow = 300 * time.Millisecond
		o.OnThreadPurged = func(id string) { purged <- id }
	}))
	u := a.newUser("ann@example.com", false)
	bob := a.newUser("bob@example.com", false)
	th := u.newThread("precious")
	u.startRun(th, "Two jobs:\n- alpha\n- beta")
	a.waitIdle(th)
	before := len(u.thread(th).Messages)
	listed := func() bool {
		return strings.Contains(string(u.do("GET", "/api/threads", nil).body), th)
	}

	// The form deletes, and the list offers Undo.
	r := u.do("POST", "/threads/"+th+"/delete", url.Values{"_csrf": {u.csrf}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/?deleted="+th {
		t.Fatalf("delete form: %d → %s", r.status, r.header.Get("Location"))
	}
	if page := string(u.do("GET", "/?deleted="+th, nil).body); !strings.Contains(page, `action="/threads/`+th+`/restore"`) {
		t.Error("the thread list offers no Undo after a delete")
	}
	if listed() || u.do("GET", "/api/threads/"+th, nil).status != http.StatusNotFound {
		t.Error("a deleted thread is still listed or readable")
	}
	if r := bob.do("POST", "/api/threads/"+th+"/restore", nil); r.status != http.StatusNotFound {
		t.Errorf("another user restored the thread: %d", r.status)
	}
	r = u.do("POST", "/threads/"+th+"/restore", url.Values{"_csrf": {u.csrf}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/threads/"+th {
		t.Fatalf("undo: %d → %s", r.status, r.header.Get("Location"))
	}
	if !listed() || len(u.thread(th).Messages) != before {
		t.Fatal("the restored thread is not back whole")
	}
	select {
	case id := <-purged:
		t.Fatalf("thread %s was purged after its delete was undone", id)
	case <-time.After(500 * time.Millisecond):
	}

	// Without undo it is gone for good.
	u.mustJSON("DELETE", "/api/threads/"+th, nil, http.StatusNoContent, nil)
	if got := <-purged; got != th {
		t.Fatalf("purged %s, want %s", got, th)
	}
	if r := u.do("POST", "/api/threads/"+th+"/restore", nil); r.status != http.StatusNotFound || !strings.Contains(string(r.body), "can be restored only") {
		t.Errorf("restore after the window: %d %s", r.status, r.body)
	}
	if msgs, _ := a.store.Messages(context.Background(), th); len(msgs) != 0 {
		t.Errorf("%d messages of the purged thread remain", len(msgs))
	}

	// A purge the server did not get to is finished by the next start.
	other := u.newThread("left behind")
	u.mustJSON("DELETE", "/api/threads/"+other, nil, http.StatusNoContent, nil)
	a.srv.purger.Cancel(other) // as if the server stopped before its timer
	time.Sleep(400 * time.Millisecond)
	if _, err := a.store.RestoreThread(context.Background(), u.id, other); err != nil {
		t.Fatalf("the pending thread should still be in the database: %v", err)
	}
	u.mustJSON("DELETE", "/api/threads/"+other, nil, http.StatusNoContent, nil)
	a.srv.purger.Cancel(other)
	time.Sleep(400 * time.Millisecond)
	if err := a.srv.ResumeDeletes(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := <-purged; got != other {
		t.Fatalf("purged %s, want %s", got, other)
	}
	if _, err := a.store.RestoreThread(context.Background(), u.id, other); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("after the resumed purge, restore: %v, want not found", err)
	}
}

// TestBrowserThreadMenu: rename and delete from inside a thread, then
// Undo from the thread list brings it back.
func TestBrowserThreadMenu(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("first name")
	u.startRun(th, "hello")
	a.waitIdle(th)
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	b.activate("open the actions", `.thread-menu summary`)
	b.shot("menu")
	b.markPage()
	b.do("type the new title", chromedp.SetValue(`#rename-title`, "second name"))
	b.activate("rename", `.thread-menu form[action$="/rename"] button`)
	b.waitNewPage("the new title", `document.documentElement.dataset.herdReady === "1" && document.querySelector("#thread-title")?.textContent === "second name" && location.pathname === "/threads/`+th+`"`, 10*time.Second)
	for _, f := range []string{"markdown", "json"} {
		if !evalAs[bool](b, `!!document.querySelector('.thread-menu a[href="/api/threads/`+th+`/export?format=`+f+`"][download]')`) {
			t.Errorf("no %s export link", f)
		}
	}

	b.activate("open the actions", `.thread-menu summary`)
	b.activate("delete", `#delete-thread`)
	b.waitFor("the list with Undo", `location.pathname === "/" && !!document.querySelector("#undo-delete")`, 10*time.Second)
	if evalAs[bool](b, `document.body.textContent.includes("second name")`) {
		t.Error("the deleted thread is still in the list")
	}
	b.shot("undo")
	b.activate("undo", `#undo-delete`)
	b.waitFor("the thread again", `location.pathname === "/threads/`+th+`" && document.querySelector("#thread-title")?.textContent === "second name"`, 10*time.Second)
}
