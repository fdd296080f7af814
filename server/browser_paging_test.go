package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserOlderMessages opens a thread of more than one page: the page
// shows the newest page; "Show earlier messages" loads the rest in place,
// in order, with whole, working cards; the token gate's round trip brings
// back the older cards' figures; and a live run still streams and updates
// its cards below them.
func TestBrowserOlderMessages(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 150, 2)))
	u := a.newUser("ann@example.com", false)
	root := a.newUser("root@example.com", true)
	th := u.newThread("long")
	a.seedPagedThread(th, u.id)
	// 220 newer messages: four pages before the cards' page, and more
	// than one page of the messages API (200) that the gate reads back.
	a.seedConversation(th, u.id, 110)
	stored, err := a.store.Messages(context.Background(), th)
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	const shown = `[...document.querySelectorAll("#messages > article.msg")]`
	if n := evalAs[int](b, shown+`.length`); n != messagesPage {
		t.Fatalf("the page shows %d messages, want %d", n, messagesPage)
	}
	if n := len(b.cards()); n != 0 {
		t.Fatalf("the newest page shows %d cards, want none", n)
	}
	b.shot("newest page")
	// The reader keeps their place: the message they were reading stays
	// where it was on the screen while a page is put above it.
	const reading = shown + `[0].getBoundingClientRect().top`
	total := 220 + 16
	for n := messagesPage; n < total; n = min(n+messagesPage, total) {
		evalAs[chromedp.Void](b, `window.scrollTo(0, 0)`) // up to the control, as a reader scrolls
		top, id := evalAs[float64](b, reading), evalAs[string](b, shown+`[0].id`)
		b.activate("show earlier messages", `#load-older a`)
		b.waitFor("the earlier messages", shown+`.length === `+strconv.Itoa(min(n+messagesPage, total)), 10*time.Second)
		if moved := evalAs[float64](b, fmt.Sprintf(`document.getElementById(%q).getBoundingClientRect().top`, id)) - top; moved < -2 || moved > 2 {
			t.Errorf("the message read moved %.0f px when earlier ones loaded", moved)
		}
	}
	b.waitFor("the first message, no more to load", `!document.querySelector("#load-older") && document.querySelectorAll("#messages section.card").length === 3`, 10*time.Second)
	b.shot("older loaded")
	seqs := evalAs[[]int64](b, shown+`.map((m) => Number(m.dataset.seq))`)
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("messages out of order at %d: %v", i, seqs)
		}
	}
	if first := evalAs[string](b, shown+`[0].id`); first != "msg-"+stored[0].ID {
		t.Errorf("the first message shown is %s, want the thread's first, msg-%s", first, stored[0].ID)
	}
	for _, c := range b.cards() {
		if c.Status != "completed" || c.Result != "done" || c.Tokens == nil || c.Total == "" {
			t.Errorf("older card %q: %s, result %q, tokens %v (%q)", c.Title, c.Status, c.Result, c.Tokens, c.Total)
		}
	}
	// An older card is a working card: it expands and loads its steps.
	old := b.cards()[0]
	b.activate("expand an older card", cardSel(old.ID, ".card-toggle"))
	b.waitFor("its steps", `document.querySelectorAll("[id='`+old.ID+`'] .card-step").length === 2`, 10*time.Second)

	// The gate hides every figure, then brings the older cards' back.
	for _, on := range []bool{false, true} {
		root.mustJSON("PUT", "/api/admin/settings", map[string]bool{"token_usage_enabled": on}, http.StatusOK, nil)
		want := map[bool]string{false: `=== ""`, true: `!== ""`}[on]
		b.waitFor("the gate on every card", `[...document.querySelectorAll("#messages section.card")].every((c) => c.dataset.totalTokens `+want+`)`, 10*time.Second)
	}

	b.sendMessage("Two jobs:\n- alpha\n- beta")
	b.waitFor("two live cards done", `(() => {
		const cs = [...document.querySelectorAll("#messages section.card")];
		return cs.length === 5 && cs.slice(3).every((c) => c.dataset.status === "completed" && c.dataset.totalTokens !== "");
	})()`, 30*time.Second)
	b.waitRunEnd(a, th)
	b.waitFor("the answer", shown+`.at(-1).classList.contains("msg-ai") && !document.querySelector(".msg-streaming")`, 10*time.Second)
	seqs = evalAs[[]int64](b, shown+`.map((m) => Number(m.dataset.seq))`)
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("messages out of order after the live run at %d: %v", i, seqs)
		}
	}
	if n := len(seqs); n < total+2 {
		t.Errorf("%d messages after the run, want at least %d", n, total+2)
	}
}

// TestBrowserTooManyTabs: a page over its account's socket cap says why it
// is not live, and becomes live by itself once another socket closes.
func TestBrowserTooManyTabs(t *testing.T) {
	a := newApp(t, withServer(func(o *Options) { o.MaxSocketsPerUser = 1 }))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("crowded")
	other, err := u.dial(th, 0) // another tab holds the account's only slot
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.navigate("/threads/" + th)
	b.waitFor("the reason shown", `(() => {
		const s = document.querySelector("#conn-status");
		return !s.hidden && s.textContent.includes("Too many open tabs");
	})()`, 10*time.Second)
	b.shot("too many tabs")
	other.Close()
	b.waitFor("live again", `document.querySelector("#conn-status").hidden`, 15*time.Second)
	waitSockets(t, a.srv, u.id, 1)
	b.sendMessage("Hello there")
	b.waitFor("the answer, live", `!!document.querySelector("#messages article.msg-ai .msg-body")`, 15*time.Second)
}
