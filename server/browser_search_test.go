package server

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"herd/models"
)

// TestBrowserSearchJumpsToTheMessage: a word said once, pages before the
// newest messages, is searched from the thread list's box; the result
// shows the word marked, and its link opens the thread with the earlier
// pages loaded and that message scrolled into view and marked. A card's
// result is found too, and its link opens the card.
func TestBrowserSearchJumpsToTheMessage(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("Breakfast plans")
	now := time.Now()
	runID := uuid.NewString()
	target := uuid.NewString()
	if err := a.writer.Write(context.Background(),
		models.Record{Run: &models.Run{ID: runID, ThreadID: th, UserID: u.id, Status: models.RunCompleted, ModelName: "demo-fast", StartedAt: now, EndedAt: &now}},
		models.Record{Message: &models.Message{ID: target, ThreadID: th, RunID: runID, Type: "human", Content: "Which marmalade goes with <b>toast</b>?"}},
	); err != nil {
		t.Fatal(err)
	}
	a.seedConversation(th, u.id, 60) // 120 newer messages: the target is two pages back

	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.navigate("/")
	b.do("search", chromedp.SendKeys("#thread-q", "marmalade"), chromedp.Submit("#thread-q"))
	b.waitFor("the message result", `!!document.querySelector(".search-hit mark")`, 10*time.Second)
	if got := evalAs[string](b, `document.querySelector(".search-snippet").innerHTML.trim()`); got != `Which <mark>marmalade</mark> goes with &lt;b&gt;toast&lt;/b&gt;?` {
		t.Errorf("snippet HTML %q: want the match marked and the tags as text", got)
	}
	b.shot("results")
	b.activate("open the result", ".search-hit-link")
	b.waitFor("the message, loaded and marked", `document.documentElement.dataset.searchJumped === "msg-`+target+`"`, 20*time.Second)
	inView := `(() => { const r = document.getElementById("msg-` + target + `").getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; })()`
	if !evalAs[bool](b, inView) {
		t.Errorf("the searched message is not in view")
	}
	if !evalAs[bool](b, `document.getElementById("msg-`+target+`").classList.contains("search-target")`) {
		t.Errorf("the searched message is not marked")
	}
	b.shot("jumped")

	cards := u.newThread("Delegated")
	a.seedCards(cards, u.id, 1, 1) // its ToolMessage: "Task Succeeded. Result: done"
	b.navigate("/?q=succeeded")
	b.waitFor("the card result", `document.querySelector(".search-hit-kind")?.textContent === "card result"`, 10*time.Second)
	href := evalAs[string](b, `document.querySelector(".search-hit-link").getAttribute("href")`)
	b.activate("open the card result", ".search-hit-link")
	b.waitFor("the card, marked", `document.querySelector("section.card.search-target") !== null && location.pathname === "/threads/`+cards+`"`, 20*time.Second)
	if id := evalAs[string](b, `document.querySelector("section.card.search-target").id`); href != "/threads/"+cards+"#"+id {
		t.Errorf("the result links to %s; the card marked is #%s", href, id)
	}
	b.shot("card")
}
