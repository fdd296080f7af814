package server

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd/agent"
	"herd/agent/demo"
)

// flakyLead streams the start of an answer and times out on its first
// call, then answers as the demo does.
type flakyLead struct {
	calls atomic.Int32
	next  agent.Provider
}

func (f *flakyLead) Complete(ctx context.Context, req agent.Request, onDelta func(string)) (agent.Response, error) {
	if f.calls.Add(1) == 1 {
		onDelta("The first words of an answer ")
		return agent.Response{}, fmt.Errorf("%w: demo-fast: timed out after 2m0s (timeout_seconds): %w", agent.ErrProvider, context.DeadlineExceeded)
	}
	return f.next.Complete(ctx, req, onDelta)
}

// conversationJS snapshots what the conversation shows, item by item:
// what a reload must rebuild identically.
const conversationJS = `JSON.stringify([...document.querySelectorAll("#messages > [data-seq]")].map((n) => [
	n.className, n.id, n.dataset.runId ?? "", n.dataset.status ?? "",
	n.querySelector(".msg-body")?.textContent.trim() ?? "",
	[...n.querySelectorAll(".msg-note, .run-notice, .version-count, .run-retry, .msg-edit")].map((x) => x.className + ":" + x.textContent.trim()).join("|"),
]))`

// TestBrowserRetryRegenerateEdit: a failed run leaves its partial answer,
// marked incomplete, and a notice in plain words with Retry, live and
// after a reload alike; Retry answers the same message once more,
// Regenerate replaces the latest answer, and Edit replaces a message and
// what followed it — each the same after a reload.
func TestBrowserRetryRegenerateEdit(t *testing.T) {
	fast := demoModel("demo-fast", 5, 1)
	fast.TimeoutSeconds = 120
	flaky := &flakyLead{next: demo.New(fast)}
	a := newApp(t, withModels(fast), func(c *appConfig) { c.provider = flaky })
	u := a.newUser("ann@example.com", false)
	th := u.newThread("answers")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	b.sendMessage("What is herd?")
	b.waitRunEnd(a, th)
	b.waitFor("the failure's notice", `document.querySelector(".run-end-failed .run-notice-text")?.textContent.startsWith("The model server stopped answering (timeout after 120 s). Retry;")
		&& document.querySelector(".run-end-failed .run-retry")?.textContent === "Retry"`, 15*time.Second)
	if got := evalAs[string](b, `document.querySelector(".msg-ai .msg-body")?.textContent.trim() ?? ""`); got != "The first words of an answer" {
		t.Errorf("the partial answer shows %q", got)
	}
	if !evalAs[bool](b, `!!document.querySelector(".msg-ai .msg-incomplete") && document.querySelector("#composer-error").textContent === ""`) {
		t.Error("the partial answer is not marked incomplete, or the failure went to the composer's line")
	}
	b.shot("failure-light")
	sameAfterReload(b, "the failure")
	setTheme(b, "dark")
	b.shot("failure-dark")
	b.do("phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	b.reload()
	b.shot("failure-phone")
	b.do("desktop", chromedp.EmulateViewport(1280, 900))
	setTheme(b, "light")

	b.activate("retry", ".run-retry")
	b.waitRunEnd(a, th)
	b.waitFor("the retry's answer", `document.querySelector(".run-end-completed .run-retry")?.textContent === "Regenerate"
		&& document.querySelectorAll(".run-retry").length === 1 && document.querySelectorAll(".msg-ai .msg-body").length === 2`, 15*time.Second)
	if n := evalAs[int](b, `document.querySelectorAll("#messages .msg-human").length`); n != 1 {
		t.Errorf("%d user messages after Retry, want the one", n)
	}
	if !evalAs[bool](b, `!!document.querySelector(".run-end-failed .run-notice") && !document.querySelector(".run-end-failed .run-retry")`) {
		t.Error("the failure is not kept as history above the retry's answer")
	}
	b.shot("retried")
	sameAfterReload(b, "the retry")

	answer := evalAs[string](b, `[...document.querySelectorAll(".msg-ai")].at(-1).id`)
	// The focus is what this step checks: a click gives the button the
	// focus, and the run's start, which takes the button away, must hand
	// it to the composer. So focus it as the click would, then activate
	// it inside the page (b.activate says why not with the mouse).
	regenerate := ".run-end-completed .run-retry"
	b.do("wait for Regenerate", chromedp.WaitVisible(chromedp.CSS(regenerate)))
	evalAs[chromedp.Void](b, fmt.Sprintf(`(() => { const r = document.querySelector(%q); r.focus(); r.click(); })()`, regenerate))
	b.waitRunEnd(a, th)
	b.waitFor("the regenerated answer", fmt.Sprintf(`!document.getElementById(%q) && document.querySelectorAll(".msg-ai .msg-body").length === 2
		&& document.querySelectorAll(".run-end-completed .run-retry").length === 1`, answer), 15*time.Second)
	if !evalAs[bool](b, `document.activeElement?.id === "composer-input"`) {
		t.Error("the focus was lost with the Regenerate button")
	}
	sameAfterReload(b, "the regenerate")
	setTheme(b, "dark")
	b.shot("regenerated-dark")
	setTheme(b, "light")

	b.activate("edit", ".msg-human .msg-edit")
	b.waitFor("the edit form", `document.activeElement?.matches(".msg-edit-input") && document.activeElement.value === "What is herd?"`, 5*time.Second)
	b.shot("editing")
	b.do("Escape gives the message back", chromedp.KeyEvent("\u001b"))
	b.waitFor("the edit form closed", `!document.querySelector(".msg-edit-form") && document.activeElement?.matches(".msg-edit")`, 5*time.Second)
	b.do("phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	b.reload()
	b.activate("edit again", ".msg-human .msg-edit")
	b.waitFor("the edit form", `document.activeElement?.matches(".msg-edit-input")`, 5*time.Second)
	b.shot("editing-phone")
	evalAs[chromedp.Void](b, `(() => { document.querySelector(".msg-edit-input").value = "What is herd, in one line?"; })()`)
	b.do("send the edit with Enter", chromedp.KeyEvent("\r"))
	b.waitRunEnd(a, th)
	b.waitFor("the edited conversation", `document.querySelectorAll(".msg-human").length === 1
		&& document.querySelector(".msg-human .msg-body").textContent.trim() === "What is herd, in one line?"
		&& !document.querySelector(".run-end-failed") && document.querySelectorAll(".msg-ai .msg-body").length === 1
		&& document.querySelector(".run-end-completed .run-retry")?.textContent === "Regenerate"`, 15*time.Second)
	b.shot("edited")
	sameAfterReload(b, "the edit")
}

// sameAfterReload fails the test when a reload shows the conversation
// otherwise than it was built live.
func sameAfterReload(b *browser, what string) {
	b.t.Helper()
	live := evalAs[string](b, conversationJS)
	b.reload()
	if got := evalAs[string](b, conversationJS); got != live {
		b.t.Errorf("%s: after a reload the conversation is\n%s\nlive it was\n%s", what, got, live)
	}
	if strings.Count(live, "[") < 2 {
		b.t.Errorf("%s: the conversation is empty: %s", what, live)
	}
}

func setTheme(b *browser, theme string) {
	b.t.Helper()
	evalAs[chromedp.Void](b, fmt.Sprintf(`(() => { document.documentElement.dataset.theme = %q; })()`, theme))
}

// TestBrowserVersions: an Edit and a Regenerate keep the answers they
// replace as versions; the switcher shows "2 / 2" live, and picking the
// first shows its message, cards, timeline and totals, as a reload does.
func TestBrowserVersions(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 50, 2)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("versions")
	b := newBrowser(t, a.http.URL)
	b.do("desktop", chromedp.EmulateViewport(1280, 900))
	b.signIn(u.email, "password123")
	b.openThread(th, "")
	// What the page shows of the conversation: the user's text, the cards'
	// titles, the timeline's head, the versions and the usage total.
	const shownJS = `JSON.stringify({
		asked: [...document.querySelectorAll("#messages .msg-human .msg-body")].map((n) => n.textContent.trim()),
		cards: [...document.querySelectorAll("#messages section.card")].map((c) => c.querySelector(".card-title").textContent),
		timeline: [...document.querySelectorAll("#messages .timeline-summary")].map((n) => n.textContent),
		versions: [...document.querySelectorAll("#messages .version-count")].map((n) => n.textContent),
	})`

	b.sendMessage("Plan:\n- apples")
	b.waitRunEnd(a, th)
	b.activate("edit", ".msg-human .msg-edit")
	b.waitFor("the edit form", `document.activeElement?.matches(".msg-edit-input")`, 5*time.Second)
	evalAs[chromedp.Void](b, `(() => { document.querySelector(".msg-edit-input").value = "Plan:\n- pears\n- plums"; })()`)
	b.do("send the edit", chromedp.KeyEvent("\r"))
	b.waitRunEnd(a, th)
	b.waitFor("2 / 2 live", `document.querySelector("#messages .version-count")?.textContent === "2 / 2" && document.querySelectorAll("#messages section.card").length === 2`, 15*time.Second)
	second := evalAs[string](b, shownJS)
	if !strings.Contains(second, `"pears"`) || strings.Contains(second, `"apples"`) {
		t.Errorf("the edited version shows %s", second)
	}
	b.shot("version-2-of-2")
	b.reload()
	if got := evalAs[string](b, shownJS); got != second {
		t.Errorf("after a reload: %s, live %s", got, second)
	}

	b.activate("the first version", "#messages .version-prev")
	b.waitFor("1 / 2", `document.querySelector("#messages .version-count")?.textContent === "1 / 2" && document.documentElement.dataset.herdReady === "1"`, 15*time.Second)
	first := evalAs[string](b, shownJS)
	if !strings.Contains(first, `"apples"`) || strings.Contains(first, `"pears"`) || !strings.Contains(first, "Plan:\\n- apples") && !strings.Contains(first, "apples") {
		t.Errorf("the first version shows %s", first)
	}
	if !strings.Contains(first, "1 subagent") {
		t.Errorf("the first version's timeline: %s", first)
	}
	b.shot("version-1-of-2")
	b.reload()
	if got := evalAs[string](b, shownJS); got != first {
		t.Errorf("the pick after a reload: %s, before %s", got, first)
	}

	// A Regenerate of the first version adds a third, live.
	b.activate("regenerate", ".run-end-completed .run-retry")
	b.waitRunEnd(a, th)
	b.waitFor("3 / 3 live", `document.querySelector("#messages .version-count")?.textContent === "3 / 3"`, 15*time.Second)
	live := evalAs[string](b, conversationJS)
	b.reload()
	if got := evalAs[string](b, conversationJS); got != live {
		t.Errorf("after the Regenerate a reload shows\n%s\nlive\n%s", got, live)
	}
	b.shot("version-3-of-3")
}

// TestBrowserContinue: an answer stopped while it streams offers
// Continue; Continue goes on in one bubble that starts with the stopped
// text and ends as the demo's whole answer does, without the stopped
// bubble or its notice, live and after a reload.
func TestBrowserContinue(t *testing.T) {
	slow := demoModel("demo-slow", 20, 60)
	a := newApp(t, withModels(slow))
	u := a.newUser("ann@example.com", false)
	whole := u.newThread("whole")
	u.startRun(whole, "What can you do?")
	a.waitIdle(whole)
	th := u.newThread("continue")
	b := newBrowser(t, a.http.URL)
	b.do("desktop", chromedp.EmulateViewport(1280, 900))
	b.signIn(u.email, "password123")
	b.openThread(whole, "")
	want := evalAs[string](b, `document.querySelector("article.msg-ai .msg-body").textContent.trim()`)
	b.openThread(th, "")
	b.sendMessage("What can you do?")
	b.waitFor("streamed text", `(() => { const s = document.querySelector(".msg-streaming .msg-body"); return s && s.textContent.length > 20; })()`, 15*time.Second)
	b.activate("stop", "#stop-button")
	b.waitRunEnd(a, th)
	b.waitFor("Continue offered", `!!document.querySelector(".run-end-cancelled .run-continue")`, 10*time.Second)
	stopped := evalAs[string](b, `document.querySelector("article.msg-ai .msg-body").textContent.trim()`)
	if stopped == "" || stopped == want || !strings.HasPrefix(want, stopped[:min(len(stopped), 20)]) {
		t.Fatalf("stopped at %q; the whole answer is %q", stopped, want)
	}
	b.shot("stopped")
	b.activate("continue", ".run-continue")
	b.waitRunEnd(a, th)
	b.waitFor("one answer", `document.querySelectorAll("article.msg-ai").length === 1 && !document.querySelector(".msg-streaming") && !document.querySelector(".run-end-cancelled")`, 15*time.Second)
	if got := evalAs[string](b, `document.querySelector("article.msg-ai .msg-body").textContent.trim()`); got != want {
		t.Errorf("the continued answer reads\n%q\nwant the whole answer\n%q", got, want)
	}
	if evalAs[bool](b, `[...document.querySelectorAll("#messages .msg-note")].some((n) => n.textContent === "Stopped")`) {
		t.Error("the continued answer is still marked stopped")
	}
	b.shot("continued")
	sameAfterReload(b, "the continued answer")
}
