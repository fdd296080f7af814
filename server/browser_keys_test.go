package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"herd/agent/demo"
)

// gate holds the calls of a demo model while shut: Stop, Esc and a hidden
// tab need a run that still runs when the test acts.
type gate struct {
	mu   sync.Mutex
	open chan struct{}
}

func newGate(t *testing.T) *gate {
	g := &gate{open: make(chan struct{})}
	close(g.open)
	t.Cleanup(g.release)
	return g
}

func (g *gate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// sleep is the demo's wait: first for the gate, then for d.
func (g *gate) sleep(ctx context.Context, d time.Duration) error {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
	case <-ctx.Done():
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// phone makes the tab a 390 px touch screen: (pointer: coarse) and
// (hover: none) match, as on a phone.
func (b *browser) phone() {
	b.t.Helper()
	b.do("a touch phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateTouch))
}

func (b *browser) desktop() {
	b.t.Helper()
	b.do("a desktop", chromedp.EmulateViewport(1280, 900), chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetTouchEmulationEnabled, emulation.SetTouchEmulationEnabledParams{Enabled: false})
		return err
	}))
}

// key presses a key with modifiers (chromedp.ModifierCtrl, …) as a keyboard
// does: one key down and up through the DevTools protocol.
func (b *browser) key(what, key string, mods ...chromedp.Modifier) {
	b.t.Helper()
	b.do(what, chromedp.KeyEvent(key, chromedp.KeyModifiers(mods...)))
}

func (b *browser) focused() string {
	b.t.Helper()
	return evalAs[string](b, `(() => { const e = document.activeElement; return e ? (e.id || e.className || e.tagName) : ""; })()`)
}

func (b *browser) humanCount() int {
	b.t.Helper()
	return evalAs[int](b, `document.querySelectorAll("#messages .msg-human").length`)
}

// TestBrowserEnterKey: on a desktop Enter sends and Shift+Enter adds a
// line; on a 390 px touch screen Enter adds a line and only Send sends;
// the user's setting overrides both, and Ctrl+Enter sends everywhere.
func TestBrowserEnterKey(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("enter")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	b.waitFor("the composer focused on load", `document.activeElement?.id === "composer-input"`, 5*time.Second)
	b.do("type", chromedp.KeyEvent("one"))
	b.key("Shift+Enter", kb.Enter, chromedp.ModifierShift)
	b.do("type", chromedp.KeyEvent("two"))
	if got := evalAs[string](b, `document.querySelector("#composer-input").value`); got != "one\ntwo" || b.humanCount() != 0 {
		t.Fatalf("desktop Shift+Enter: the field holds %q and %d messages went, want a line break and none", got, b.humanCount())
	}
	b.shot("desktop-two-lines")
	b.key("Enter", kb.Enter)
	b.waitFor("Enter sent the message", `document.querySelectorAll("#messages .msg-human").length === 1 && document.querySelector("#composer-input").value === ""`, 10*time.Second)
	b.waitRunEnd(a, th)

	b.phone()
	b.reload()
	if !evalAs[bool](b, `matchMedia("(pointer: coarse)").matches && innerWidth === 390`) {
		t.Fatal("the emulated phone is not a 390 px touch screen")
	}
	if got := b.focused(); got == "composer-input" {
		t.Error("on a touch screen the field took the focus on load (the keyboard would cover the page)")
	}
	evalAs[chromedp.Void](b, `document.querySelector("#composer-input").focus()`)
	b.do("type", chromedp.KeyEvent("three"))
	b.key("Enter", kb.Enter)
	b.do("type", chromedp.KeyEvent("four"))
	if got := evalAs[string](b, `document.querySelector("#composer-input").value`); got != "three\nfour" || b.humanCount() != 1 {
		t.Fatalf("phone Enter: the field holds %q and %d messages show, want a line break and the one", got, b.humanCount())
	}
	if ph := evalAs[string](b, `document.querySelector("#composer-input").placeholder`); strings.Contains(ph, "Enter sends") {
		t.Errorf("the phone's placeholder says %q", ph)
	}
	b.shot("phone-two-lines")
	b.activate("Send", "#send-button")
	b.waitFor("Send sent it", `document.querySelectorAll("#messages .msg-human").length === 2`, 10*time.Second)
	b.waitRunEnd(a, th)
	b.shot("phone-sent")

	// The setting: Enter sends on the phone too.
	u.mustJSON("PUT", "/api/account/preferences", map[string]string{"enter_key": "send"}, http.StatusOK, nil)
	b.reload()
	evalAs[chromedp.Void](b, `document.querySelector("#composer-input").focus()`)
	b.do("type", chromedp.KeyEvent("five"))
	b.key("Enter", kb.Enter)
	b.waitFor("Enter sends on the phone when set so", `document.querySelectorAll("#messages .msg-human").length === 3`, 10*time.Second)
	b.waitRunEnd(a, th)

	// And Enter adds a line on the desktop, where Ctrl+Enter sends.
	u.mustJSON("PUT", "/api/account/preferences", map[string]string{"enter_key": "newline"}, http.StatusOK, nil)
	b.desktop()
	b.reload()
	b.waitFor("the composer focused on load", `document.activeElement?.id === "composer-input"`, 5*time.Second)
	b.do("type", chromedp.KeyEvent("six"))
	b.key("Enter", kb.Enter)
	b.do("type", chromedp.KeyEvent("seven"))
	if got := evalAs[string](b, `document.querySelector("#composer-input").value`); got != "six\nseven" || b.humanCount() != 3 {
		t.Fatalf("desktop Enter set to add a line: the field holds %q, %d messages", got, b.humanCount())
	}
	b.key("Ctrl+Enter", kb.Enter, chromedp.ModifierCtrl)
	b.waitFor("Ctrl+Enter sent it", `document.querySelectorAll("#messages .msg-human").length === 4`, 10*time.Second)
	b.waitRunEnd(a, th)
}

// TestBrowserComposerFocus: the message field has the focus on load (the
// new-thread page and a thread) and after Send, Stop, Retry and Edit —
// Edit's own field while editing, the composer once the edit is sent.
func TestBrowserComposerFocus(t *testing.T) {
	g := newGate(t)
	a := newApp(t, withDemo("demo-fast", demo.WithSleep(g.sleep)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("focus")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")

	b.navigate("/threads/new")
	b.waitFor("the new-thread page", `document.documentElement.dataset.herdReady === "1"`, 10*time.Second)
	if got := b.focused(); got != "composer-input" {
		t.Errorf("the new-thread page loads with the focus on %q, want the composer", got)
	}
	b.openThread(th, "")
	if got := b.focused(); got != "composer-input" {
		t.Errorf("a thread loads with the focus on %q, want the composer", got)
	}

	// pressButton focuses and clicks, as a click on it does.
	pressButton := func(sel string) {
		t.Helper()
		b.do("wait for "+sel, chromedp.WaitVisible(chromedp.CSS(sel)))
		evalAs[chromedp.Void](b, fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.focus(); e.click(); })()`, sel))
	}
	evalAs[chromedp.Void](b, `(() => { const i = document.querySelector("#composer-input"); i.value = "hello"; i.dispatchEvent(new Event("input", { bubbles: true })); })()`)
	g.hold()
	pressButton("#send-button")
	b.waitFor("the run running", `document.querySelector("#composer").dataset.state === "running"`, 10*time.Second)
	if got := b.focused(); got != "composer-input" {
		t.Errorf("after Send the focus is on %q, want the composer", got)
	}
	pressButton("#stop-button")
	b.waitRunEnd(a, th)
	if got := b.focused(); got != "composer-input" {
		t.Errorf("after Stop the focus is on %q, want the composer", got)
	}
	g.release()
	b.shot("stopped")

	pressButton(".run-retry")
	b.waitRunEnd(a, th)
	b.waitFor("the retried answer", `document.querySelector(".run-end-completed .run-retry")?.textContent === "Regenerate"`, 10*time.Second)
	if got := b.focused(); got != "composer-input" {
		t.Errorf("after Retry the focus is on %q, want the composer", got)
	}

	pressButton(".msg-human .msg-edit")
	b.waitFor("the edit's own field focused", `document.activeElement?.matches(".msg-edit-input")`, 5*time.Second)
	evalAs[chromedp.Void](b, `document.querySelector(".msg-edit-input").value = "hello again"`)
	b.key("send the edit", kb.Enter)
	b.waitRunEnd(a, th)
	b.waitFor("the edited message", `document.querySelector(".msg-human .msg-body")?.textContent.trim() === "hello again"`, 10*time.Second)
	if got := b.focused(); got != "composer-input" {
		t.Errorf("after an edit was sent the focus is on %q, want the composer", got)
	}
	b.shot("edited")
}
