package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestBrowserContextNote: in a thread that outgrew its model's window, the
// answer to a message sent from the page shows the quiet note live, with
// its figures, and reads the same after a reload.
func TestBrowserContextNote(t *testing.T) {
	a := newApp(t, withModels(smallWindow(noUsage(demoModel("demo-small", 0, 5)))))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("long")
	for i := range 5 {
		content := fmt.Sprintf("Question %d. %s", i, strings.Repeat("Tell me more about the weather. ", 12))
		u.mustJSON("POST", "/api/threads/"+th+"/runs", map[string]string{"content": content, "model": "demo-small"}, http.StatusAccepted, nil)
		a.waitIdle(th)
	}
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.navigate("/threads/" + th)
	b.waitFor("the thread", `document.querySelectorAll("article.msg-ai").length === 5`, 10*time.Second)
	notes := `document.querySelectorAll("article.msg-ai .msg-context").length`
	before := evalAs[int](b, notes)

	b.sendMessage("And one more question about the weather, please.")
	b.waitFor("the answer", `document.querySelectorAll("article.msg-ai").length === 6 && !document.querySelector(".msg-streaming")`, 20*time.Second)
	last := `(() => { const n = [...document.querySelectorAll("article.msg-ai")].at(-1).querySelector(".msg-context"); return n ? n.textContent : ""; })()`
	live := evalAs[string](b, last)
	var sent, total int
	if _, err := fmt.Sscanf(live, "Earlier messages were left out of this answer to fit the model's context window (%d of %d turns sent).", &sent, &total); err != nil || sent < 1 || sent >= total || total != 11 {
		t.Fatalf("live note %q (%d of %d, %v), want fewer than 11 turns sent", live, sent, total, err)
	}
	if n := evalAs[int](b, notes); n != before+1 {
		t.Errorf("%d notes after the answer, want %d: one more", n, before+1)
	}
	b.shot("context-note")
	page := evalAs[string](b, `document.querySelector("#messages").innerText`)

	b.reload()
	b.waitFor("the thread after reload", `document.querySelectorAll("article.msg-ai").length === 6`, 10*time.Second)
	if got := evalAs[string](b, last); got != live {
		t.Errorf("note after reload %q, live %q", got, live)
	}
	if got := evalAs[string](b, `document.querySelector("#messages").innerText`); got != page {
		t.Errorf("after reload the thread reads\n%q\nlive it read\n%q", got, page)
	}
}
