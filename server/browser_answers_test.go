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
	[...n.querySelectorAll(".msg-note, .run-notice, .run-retry, .msg-edit")].map((x) => x.className + ":" + x.textContent.trim()).join("|"),
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
