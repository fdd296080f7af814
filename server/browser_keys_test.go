package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
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

// typeKey presses a printable key as a keyboard does: one keyDown that
// carries its text, so a handler that prevents the keydown keeps the
// text out of a field (chromedp.KeyEvent sends the text as a separate
// char event, which no keydown handler can cancel).
func (b *browser) typeKey(what string, r rune) {
	b.t.Helper()
	ev := kb.Encode(r)
	down, up := *ev[0], *ev[len(ev)-1]
	down.Text, down.UnmodifiedText = string(r), string(r)
	b.do(what, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, down); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, t, input.DispatchKeyEvent, up)
		return err
	}))
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

// grantClipboard lets the page read and write the clipboard, focused as
// a window a user clicked in (TestBrowserCopy says why).
func (b *browser) grantClipboard() {
	b.t.Helper()
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(b.ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: name}, Setting: cdpbrowser.PermissionSettingGranted, Origin: b.base,
		}); err != nil {
			b.t.Fatalf("grant %s: %v", name, err)
		}
	}
	if _, err := chromedp.Call(b.ctx, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true}); err != nil {
		b.t.Fatalf("focus the page: %v", err)
	}
}

// TestBrowserShortcuts: ? opens the dialog listing every shortcut, an
// accessible modal whose Tab stays inside and Esc closes, giving the
// focus back; each shortcut does what the dialog says: / focuses the
// field, Esc stops a run, Ctrl+Shift+E expands and collapses every card,
// Ctrl+Shift+C copies the last answer, Ctrl+Shift+S hides the sidebar,
// Ctrl+K searches, Ctrl+Shift+O opens a new thread. A ? typed in the
// field is text.
func TestBrowserShortcuts(t *testing.T) {
	src := loadAxe(t)
	g := newGate(t)
	a := newApp(t, withDemo("demo-fast", demo.WithSleep(g.sleep)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("shortcuts")
	u.startRun(th, "Two jobs:\n- alpha\n- beta")
	a.waitIdle(th)
	b := newBrowser(t, a.http.URL)
	b.grantClipboard()
	b.signIn(u.email, "password123")
	b.openThread(th, "")
	ctrlShift := []chromedp.Modifier{chromedp.ModifierCtrl, chromedp.ModifierShift}

	b.typeKey("? in the field", '?')
	if got := evalAs[string](b, `document.querySelector("#composer-input").value`); got != "?" || evalAs[bool](b, `!!document.querySelector("#shortcuts[open]")`) {
		t.Errorf("a ? typed in the field: the field holds %q, the dialog open: %v; want the text and no dialog", got, evalAs[bool](b, `!!document.querySelector("#shortcuts[open]")`))
	}
	evalAs[chromedp.Void](b, `(() => { const i = document.querySelector("#composer-input"); i.value = ""; i.blur(); })()`)

	b.typeKey("?", '?')
	b.waitFor("the dialog", `document.querySelector("#shortcuts")?.open && document.querySelector("#shortcuts").contains(document.activeElement)`, 5*time.Second)
	rows := evalAs[[]string](b, `[...document.querySelectorAll("#shortcuts tr")].map((r) => r.textContent.replace(/\s+/g, " ").trim())`)
	for _, want := range []string{"Show these shortcuts?", "New thread" + "Ctrl+Shift+O", "Focus the message field/ or Shift+Esc", "Stop the run (while one runs)Esc",
		"Search threadsCtrl+K", "Show or hide the sidebarCtrl+Shift+S", "Copy the last answerCtrl+Shift+C", "Expand or collapse all cardsCtrl+Shift+E"} {
		if !slicesContainsPrefix(rows, want) {
			t.Errorf("the dialog has no row %q: %q", want, rows)
		}
	}
	b.checkAxe(src, "the shortcuts dialog")
	b.shot("dialog")
	for range 3 {
		b.key("Tab", kb.Tab)
		if !evalAs[bool](b, `document.querySelector("#shortcuts").contains(document.activeElement)`) {
			t.Fatalf("Tab left the open dialog for %q", b.focused())
		}
	}
	b.key("Esc", kb.Escape)
	b.waitFor("the dialog closed", `!document.querySelector("#shortcuts").open`, 5*time.Second)

	b.typeKey("/", '/')
	b.waitFor("/ focuses the field", `document.activeElement?.id === "composer-input" && document.activeElement.value === ""`, 5*time.Second)
	evalAs[chromedp.Void](b, `document.activeElement.blur()`)

	b.key("Ctrl+Shift+E", "e", ctrlShift...)
	b.waitFor("every card expanded", `(() => { const t = [...document.querySelectorAll("#messages .card-toggle")]; return t.length === 2 && t.every((x) => x.getAttribute("aria-expanded") === "true"); })()`, 5*time.Second)
	b.shot("cards-expanded")
	b.key("Ctrl+Shift+E", "e", ctrlShift...)
	b.waitFor("every card collapsed", `[...document.querySelectorAll("#messages .card-toggle")].every((x) => x.getAttribute("aria-expanded") === "false")`, 5*time.Second)

	evalAs[chromedp.Void](b, `navigator.clipboard.writeText("")`)
	b.key("Ctrl+Shift+C", "c", ctrlShift...)
	b.waitFor("the last answer's Copy says Copied", `[...document.querySelectorAll("#messages .msg-ai .msg-copy")].at(-1).textContent === "Copied"`, 5*time.Second)
	want := evalAs[string](b, `[...document.querySelectorAll("#messages .msg-ai .msg-body")].at(-1).innerText`)
	if got := evalAwait[string](b, `navigator.clipboard.readText()`); got != want || got == "" {
		t.Errorf("Ctrl+Shift+C copied %q, want the last answer %q", got, want)
	}

	sidebar := `document.getElementById("sidebar").checkVisibility()`
	before := evalAs[bool](b, sidebar)
	b.key("Ctrl+Shift+S", "s", ctrlShift...)
	b.waitFor("the sidebar toggled", fmt.Sprintf(`%s === %v`, sidebar, !before), 5*time.Second)
	b.shot("sidebar-toggled")
	if before {
		b.key("Ctrl+Shift+S", "s", ctrlShift...)
		b.waitFor("the sidebar back", sidebar, 5*time.Second)
	}
	b.key("Ctrl+K", "k", chromedp.ModifierCtrl)
	b.waitFor("Ctrl+K focuses the search", `document.activeElement?.id === "sidebar-q"`, 5*time.Second)
	b.key("Esc leaves the search alone", kb.Escape)

	// Esc stops a run, from the field where Send left the focus.
	g.hold()
	b.sendMessage("hold on")
	b.waitFor("the run running", `document.querySelector("#composer").dataset.state === "running"`, 10*time.Second)
	evalAs[chromedp.Void](b, `document.querySelector("#composer-input").focus()`)
	b.key("Esc", kb.Escape)
	b.waitRunEnd(a, th)
	g.release()
	b.waitFor("the run stopped", `document.querySelector(".run-end-cancelled") !== null`, 10*time.Second)

	b.markPage()
	b.key("Ctrl+Shift+O", "o", ctrlShift...)
	b.waitNewPage("the new-thread page", `location.pathname === "/threads/new" && document.activeElement?.id === "composer-input"`, 10*time.Second)
}

func slicesContainsPrefix(xs []string, prefix string) bool {
	for _, x := range xs {
		if strings.HasPrefix(x, prefix) {
			return true
		}
	}
	return false
}

// setHiddenJS makes the page believe its tab is hidden or shown, as a
// switch of tabs does: document.hidden, visibilityState and the event.
const setHiddenJS = `window.setHidden = (h) => {
	Object.defineProperty(document, "hidden", { value: h, configurable: true });
	Object.defineProperty(document, "visibilityState", { value: h ? "hidden" : "visible", configurable: true });
	document.dispatchEvent(new Event("visibilitychange"));
}`

// notesJS records the desktop notifications the page shows, by title,
// in window.notes; they are still the browser's own.
const notesJS = `(() => {
	window.notes = [];
	const Real = window.Notification;
	window.Notification = class extends Real {
		constructor(title, options) { super(title, options); window.notes.push(title); }
	};
})()`

// TestBrowserHiddenTab: while its tab is hidden a thread page's title
// and favicon say a run runs, then that it is done (or failed); shown
// again, both are as before. With notifications turned on in Settings
// (the permission asked on that click), a run's end in the hidden tab
// shows one; a shown tab shows none.
func TestBrowserHiddenTab(t *testing.T) {
	g := newGate(t)
	a := newApp(t, withDemo("demo-fast", demo.WithSleep(g.sleep)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("Garden plan")
	b := newBrowser(t, a.http.URL)
	if _, err := chromedp.CallBrowser(b.ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
		Permission: &cdpbrowser.PermissionDescriptor{Name: "notifications"}, Setting: cdpbrowser.PermissionSettingGranted, Origin: a.http.URL,
	}); err != nil {
		t.Fatalf("grant notifications: %v", err)
	}
	b.signIn(u.email, "password123")

	b.navigate("/settings")
	b.do("the notification switch", chromedp.WaitVisible(chromedp.CSS("#notify-toggle")))
	b.activate("turn notifications on", "#notify-toggle")
	b.waitFor("notifications on", `localStorage.getItem("herd.notify") === "1" && document.querySelector("#notify-toggle").checked
		&& document.querySelector("#notify-note").textContent.startsWith("Notifications on")`, 5*time.Second)
	b.shot("settings")

	b.openThread(th, "")
	evalAs[chromedp.Void](b, setHiddenJS)
	evalAs[chromedp.Void](b, notesJS)
	title := evalAs[string](b, `document.title`)
	icon := evalAs[string](b, `document.querySelector('link[rel="icon"]').href`)

	g.hold()
	b.sendMessage("plan the beds")
	b.waitFor("the run running", `document.querySelector("#composer").dataset.state === "running"`, 10*time.Second)
	if got := evalAs[string](b, `document.title`); got != title {
		t.Errorf("a shown tab's title is %q during a run, want %q", got, title)
	}
	evalAs[chromedp.Void](b, `setHidden(true)`)
	b.waitFor("the running mark", `document.title === "● Running — Garden plan" && document.querySelector('link[rel="icon"]').href.startsWith("data:image/svg+xml,")
		&& decodeURIComponent(document.querySelector('link[rel="icon"]').href).includes('fill="#d08700"')`, 5*time.Second)
	g.release()
	b.waitFor("the done mark", `document.title === "✓ Done — Garden plan"
		&& decodeURIComponent(document.querySelector('link[rel="icon"]').href).includes('fill="#1a7f37"')`, 15*time.Second)
	if got := evalAs[[]string](b, `window.notes`); len(got) != 1 || got[0] != "Done — Garden plan" {
		t.Errorf("notifications %q, want the one run's end", got)
	}
	evalAs[chromedp.Void](b, `setHidden(false)`)
	b.waitFor("the title and icon back", fmt.Sprintf(`document.title === %q && document.querySelector('link[rel="icon"]').href === %q`, title, icon), 5*time.Second)

	// A run that fails while hidden (its frames, as the socket brings
	// them), and one that ends in a shown tab, which needs no mark.
	evalAs[chromedp.Void](b, `setHidden(true)`)
	evalAs[chromedp.Void](b, `(() => {
		const frame = (detail) => document.dispatchEvent(new CustomEvent("herd:frame", { detail }));
		frame({ seq: 1e9, type: "run.start", run_id: "r-failing", data: { run_id: "r-failing" } });
		frame({ seq: 1e9 + 1, type: "run.end", run_id: "r-failing", data: { run_id: "r-failing", status: "failed", error: "boom", notice: "The run failed." } });
	})()`)
	b.waitFor("the failed mark", `document.title === "✕ Failed — Garden plan"`, 5*time.Second)
	evalAs[chromedp.Void](b, `setHidden(false)`)
	b.waitFor("the title back", fmt.Sprintf(`document.title === %q`, title), 5*time.Second)
	if got := evalAs[[]string](b, `window.notes`); len(got) != 2 || got[1] != "Failed — Garden plan" {
		t.Errorf("notifications %q, want the done and the failed run's", got)
	}
	evalAs[chromedp.Void](b, `(() => {
		const frame = (detail) => document.dispatchEvent(new CustomEvent("herd:frame", { detail }));
		frame({ seq: 1e9 + 2, type: "run.start", run_id: "r-shown", data: { run_id: "r-shown" } });
		frame({ seq: 1e9 + 3, type: "run.end", run_id: "r-shown", data: { run_id: "r-shown", status: "completed" } });
	})()`)
	b.waitFor("the shown run ended", `document.querySelector("#composer").dataset.state === "idle"`, 5*time.Second)
	if got := evalAs[string](b, `document.title`); got != title || len(evalAs[[]string](b, `window.notes`)) != 2 {
		t.Errorf("a run ending in a shown tab: title %q, notifications %q; want no mark and none", got, evalAs[[]string](b, `window.notes`))
	}
}

// TestBrowserKeyboardOnlyRun runs a thread by keyboard alone, Tab and
// Enter: the new-thread page's field has the focus, typing and Enter
// send, the thread's page takes the focus back to its field, Tab reaches
// Regenerate and Enter answers again, the focus back in the field; the
// page is axe-clean at each stop, the shortcuts dialog too.
func TestBrowserKeyboardOnlyRun(t *testing.T) {
	src := loadAxe(t)
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.navigate("/threads/new")
	b.waitFor("the new-thread page, its field focused", `document.documentElement.dataset.herdReady === "1" && document.activeElement?.id === "composer-input"`, 10*time.Second)
	b.checkAxe(src, "the new-thread page")
	b.do("type", chromedp.KeyEvent("What is herd?"))
	b.markPage()
	b.key("Enter", kb.Enter)
	b.waitNewPage("the thread's page, its field focused", `location.pathname.startsWith("/threads/") && location.pathname !== "/threads/new"
		&& document.documentElement.dataset.herdReady === "1" && document.activeElement?.id === "composer-input"`, 15*time.Second)
	th := evalAs[string](b, `decodeURIComponent(location.pathname.slice("/threads/".length))`)
	b.waitRunEnd(a, th)
	b.waitFor("the answer", `document.querySelector(".run-end-completed .run-retry") !== null`, 10*time.Second)
	b.checkAxe(src, "the thread after a run")
	b.shot("answered")

	evalAs[chromedp.Void](b, `document.activeElement.blur(); scrollTo(0, 0)`)
	b.tabTo(".run-retry")
	b.shot("regenerate-focused")
	b.key("Enter on Regenerate", kb.Enter)
	b.waitRunEnd(a, th)
	b.waitFor("answered again, the focus in the field", `document.querySelectorAll(".run-end-completed .run-retry").length === 1 && document.activeElement?.id === "composer-input"`, 15*time.Second)

	evalAs[chromedp.Void](b, `document.activeElement.blur()`)
	b.typeKey("?", '?')
	b.waitFor("the dialog", `document.querySelector("#shortcuts")?.open`, 5*time.Second)
	b.checkAxe(src, "the shortcuts dialog")
	b.key("Enter on Close", kb.Enter)
	b.waitFor("the dialog closed", `!document.querySelector("#shortcuts").open`, 5*time.Second)
	b.checkAxe(src, "the thread after the dialog")
}
