package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"herd/agent"
	"herd/server/auth"
)

// Accessibility in a real browser (issue 13 point 10): axe-core on every
// page in both themes, the keyboard, reduced motion and the phone layout.

// axeScript is axe-core from the npm registry, installed by `make axe-core`
// (make test, and so .ci/run, does it). Its absence fails the tests, as the
// MCP test server's does: an accessibility check that quietly skips proves
// nothing.
const axeScript = "../.cache/axe/node_modules/axe-core/axe.min.js"

func loadAxe(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(axeScript)
	if err != nil {
		t.Fatalf("%s is missing: run `make test` (or `make axe-core`), which installs it with npm: %v", axeScript, err)
	}
	return string(src)
}

// emulateMedia sets CSS media features (prefers-color-scheme,
// prefers-reduced-motion) for the tab, as the operating system would.
func (b *browser) emulateMedia(features map[string]string) {
	b.t.Helper()
	p := emulation.SetEmulatedMediaParams{}
	for name, value := range features {
		p.Features = append(p.Features, &emulation.MediaFeature{Name: name, Value: value})
	}
	b.do("emulate media", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, p)
		return err
	}))
}

// axeViolation is one failed axe-core rule with the nodes it failed on.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// axeRun injects axe-core into the page (through the DevTools protocol,
// which the page's CSP does not govern) and returns its violations.
const axeRun = `(async () => {
	const r = await axe.run(document, { resultTypes: ["violations"] });
	return r.violations.map((v) => ({
		id: v.id, impact: v.impact || "", help: v.help,
		nodes: v.nodes.map((n) => n.target.join(" ") + " — " + (n.failureSummary || "").replace(/\s+/g, " ")),
	}));
})()`

// checkAxe fails the test with every serious or critical axe-core
// violation of the page as it is now, by rule id and impact; lesser ones
// are logged.
func (b *browser) checkAxe(src, page string) {
	b.t.Helper()
	if !evalAs[bool](b, `typeof axe === "object"`) {
		evalAs[chromedp.Void](b, src)
	}
	for _, v := range evalAwait[[]axeViolation](b, axeRun) {
		msg := fmt.Sprintf("%s: axe %s (%s): %s\n\t%s", page, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n\t"))
		if v.Impact == "serious" || v.Impact == "critical" {
			b.t.Error(msg)
		} else {
			b.t.Log(msg)
		}
	}
}

// a11yPage is one page of the accessibility walk: how to reach it and
// what to open on it before checking, so hidden parts are checked too.
type a11yPage struct {
	name string
	path string
	// ready is a JavaScript condition the page meets once it shows what
	// is checked; open runs before the check.
	ready string
	open  string
}

// checkPages checks each page on a desktop and on a phone (390×844), in
// the light and the dark theme, with a screenshot of each: axe-core on
// the desktop in both themes and on the phone in the light one (only
// colours change with the theme), the keyboard walk once, and the phone's
// layout in both. A page loads once per screen; the theme switches live,
// as it does when the system's changes.
func (b *browser) checkPages(src string, pages []a11yPage) {
	b.t.Helper()
	for _, p := range pages {
		for _, phone := range []bool{false, true} {
			if phone {
				b.do("phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
			} else {
				b.do("desktop", chromedp.EmulateViewport(1280, 900))
			}
			b.emulateMedia(map[string]string{"prefers-color-scheme": "light"})
			b.openPage(p)
			for _, theme := range []string{"light", "dark"} {
				name := p.name + "-" + theme
				b.emulateMedia(map[string]string{"prefers-color-scheme": theme})
				if !evalAs[bool](b, `matchMedia("(prefers-color-scheme: `+theme+`)").matches`) {
					b.t.Fatalf("%s: the %s theme is not in effect", name, theme)
				}
				b.waitFor(name+" settled", settled, 10*time.Second)
				switch {
				case !phone:
					b.checkAxe(src, name)
					if theme == "light" {
						b.checkKeyboard(name)
					}
				case theme == "light":
					b.checkAxe(src, name+"-phone")
				}
				if phone {
					b.checkPhone(name)
					evalAs[chromedp.Void](b, `scrollTo(0, 0)`)
					name += "-phone"
				}
				b.shot(name)
			}
		}
	}
	b.do("desktop", chromedp.EmulateViewport(1280, 900))
}

// openPage loads p, waits until it shows what is checked, and opens what
// p opens.
func (b *browser) openPage(p a11yPage) {
	b.t.Helper()
	b.navigate(p.path)
	b.waitFor(p.name, cmpOr(p.ready, "true"), 20*time.Second)
	if p.open != "" {
		evalAs[chromedp.Void](b, p.open)
	}
}

// settled holds once no finite animation or transition is running (a
// spinner's runs forever).
const settled = `document.getAnimations().every((a) => a.playState !== "running" || a.effect?.getTiming().iterations === Infinity)`

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// checkPhone fails when a page does not fit a phone's width: nothing
// scrolls sideways, and the header is one row whose parts do not overlap.
func (b *browser) checkPhone(name string) {
	b.t.Helper()
	type layout struct {
		ScrollWidth int      `json:"scrollWidth"`
		Width       int      `json:"width"`
		Header      float64  `json:"header"`
		Overlaps    []string `json:"overlaps"`
	}
	got := evalAs[layout](b, `(() => {
		const parts = [...document.querySelectorAll(".site-header-inner > *, .site-nav a, .sign-out button")]
			.filter((e) => e.checkVisibility()).map((e) => [e, e.getBoundingClientRect()]);
		const overlaps = [];
		for (const [a, ra] of parts) {
			if (ra.right > innerWidth + 0.5 || ra.left < -0.5) overlaps.push((a.textContent.trim() || a.className) + " leaves the screen");
			for (const [c, rc] of parts) {
				if (a === c || a.contains(c) || c.contains(a) || a.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_PRECEDING) continue;
				if (ra.left < rc.right - 0.5 && rc.left < ra.right - 0.5 && ra.top < rc.bottom - 0.5 && rc.top < ra.bottom - 0.5) {
					overlaps.push((a.textContent.trim() || a.className) + " overlaps " + (c.textContent.trim() || c.className));
				}
			}
		}
		return { scrollWidth: document.documentElement.scrollWidth, width: innerWidth,
			header: document.querySelector(".site-header").getBoundingClientRect().height, overlaps };
	})()`)
	if got.ScrollWidth > got.Width {
		b.t.Errorf("%s on a phone: the page is %dpx wide on a %dpx screen", name, got.ScrollWidth, got.Width)
	}
	if got.Header > 56 {
		b.t.Errorf("%s on a phone: the header is %.0fpx high, want one row", name, got.Header)
	}
	for _, o := range got.Overlaps {
		b.t.Errorf("%s on a phone: %s", name, o)
	}
}

// TestBrowserAccessibility walks every page a user or an admin meets —
// set-up, sign-in, sign-up, the thread list and a search, a new thread, a
// thread with a running and a finished card, one whose run resumed,
// settings, account, admin, usage, and the 404 and 403 error pages — in
// the light and the dark theme: axe-core reports no serious or critical
// violation, and each fits a phone.
func TestBrowserAccessibility(t *testing.T) {
	src := loadAxe(t)
	a := newApp(t, withHostBash(t), withModels(demoModel("demo-fast", 150, 2), demoModel("demo-deep", 150, 2)),
		withSubagents(agent.SubagentsConfig{CancelGraceSeconds: 5}),
		func(c *appConfig) { c.server = func(o *Options) { o.AllowSignup = true } })
	b := newBrowser(t, a.http.URL)
	// The failed sign-in and the error pages answer with their status.
	b.allowErrors(`status of (401|403|404) .*/(login|admin|threads/0+-0+-4000-8000-0+)$`)
	link, err := a.srv.SetupURL(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	form := `!!document.querySelector("form[action='/setup']")`
	b.checkPages(src, []a11yPage{
		{name: "setup-link", path: "/setup", ready: `document.body.innerText.includes("set-up link")`},
		{name: "setup", path: strings.TrimPrefix(link, a.http.URL), ready: form},
	})

	admin := a.newUser("admin@example.com", true)
	user := a.newUser("ann@example.com", false)
	b.checkPages(src, []a11yPage{
		{name: "login", path: "/login", ready: `!!document.querySelector("form[action='/login']")`},
		{name: "signup", path: "/signup", ready: `!!document.querySelector("form[action='/signup']")`},
	})
	b.signIn(admin.email, "password123")
	b.do("a failed sign-in: its error notice", chromedp.Submit(`form[action="/logout"]`))
	b.waitFor("signed out", `location.pathname === "/login"`, 10*time.Second)
	b.do("sign in wrongly",
		chromedp.SendKeys(`input[name="email"]`, admin.email),
		chromedp.SendKeys(`input[name="password"]`, "not the password"),
		chromedp.Submit(`form[action="/login"]`),
	)
	b.waitFor("the error notice", `!!document.querySelector(".notice-error")`, 10*time.Second)
	for _, theme := range []string{"light", "dark"} {
		b.emulateMedia(map[string]string{"prefers-color-scheme": theme})
		b.checkAxe(src, "login-error-"+theme)
		b.shot("login-error-" + theme)
	}
	b.signIn(admin.email, "password123")

	// A finished conversation (a code block, two cards), a thread with a card still running beside a
	// finished one, and a deleted thread for the Undo notice.
	done := admin.newThread("Finished work")
	admin.startRun(done, "What does this print?\n\n```go\nfunc main() {\n\tfmt.Println(\"hi\", 42) // greet\n}\n```")
	a.waitIdle(done)
	admin.startRun(done, "Two jobs:\n- alpha\n- beta")
	a.waitIdle(done)
	live := admin.newThread("Live work")
	admin.startRun(live, "Two jobs:\n- `sleep 300`\n- alpha")
	gone := admin.newThread("Deleted work")
	admin.mustJSON("DELETE", "/api/threads/"+gone, nil, http.StatusNoContent, nil)
	admin.mustJSON("POST", "/api/tokens", map[string]string{"name": "laptop"}, http.StatusCreated, &struct{}{})
	// An entry of the audit log, its fields shown.
	admin.mustJSON("POST", "/api/admin/users", map[string]string{"email": "bea@example.com", "password": "tall ocean lantern"}, http.StatusCreated, &struct{}{})
	// The live thread goes first, while its card still runs.
	liveReady := `document.documentElement.dataset.herdReady === "1"
		&& [...document.querySelectorAll("#messages section.card")].some((c) => c.dataset.status === "running")
		&& [...document.querySelectorAll("#messages section.card")].some((c) => c.dataset.status === "completed")`
	b.checkPages(src, []a11yPage{
		{name: "thread-live", path: "/threads/" + live, ready: liveReady,
			open: `[...document.querySelectorAll("#messages section.card")].find((c) => c.dataset.status === "completed").querySelector(".card-toggle").click();
				document.querySelector(".thread-menu").setAttribute("open", "")`},
		{name: "threads", path: "/?deleted=" + gone, ready: `!!document.querySelector("#undo-delete")`},
		{name: "search", path: "/?q=work", ready: `!!document.querySelector(".search-head")`},
		{name: "new-thread", path: "/threads/new", ready: `document.documentElement.dataset.herdReady === "1"`},
		{name: "thread-finished", path: "/threads/" + done, ready: `document.documentElement.dataset.herdReady === "1"`,
			open: `document.querySelector("#messages .card-toggle").click(); document.querySelector("#usage-panel")?.setAttribute("open", "")`},
		{name: "thread-files", path: "/threads/" + done + "#files", ready: `document.documentElement.dataset.herdReady === "1" && !!document.querySelector('#files-tree li.files-folder[data-key="notes"]')`,
			open: `document.querySelector('#files-tree li.files-folder[data-key="notes"] > .files-toggle').click()`},
		{name: "thread-file-preview", path: "/threads/" + done + "#files=notes%2Falpha%2Fplan.md", ready: `document.documentElement.dataset.herdReady === "1" && !!document.querySelector('#file-preview-body .file-preview[data-kind="markdown"]')`},
		{name: "settings", path: "/settings", ready: `!!document.querySelector("form[action='/settings/preferences']")`},
		{name: "account", path: "/account", ready: `!!document.querySelector("#sessions")`},
		{name: "admin", path: "/admin", ready: `!!document.querySelector("h1")`},
		{name: "usage", path: "/admin/usage", ready: `!!document.querySelector("h1")`},
		{name: "audit", path: "/admin/audit", ready: `!!document.querySelector("#audit-entries .audit-diff")`,
			open: `document.querySelector("#audit-entries .audit-diff").setAttribute("open", "")`},
		{name: "not-found", path: "/threads/00000000-0000-4000-8000-000000000000", ready: `!!document.querySelector(".error-page")`},
	})

	// A run that resumed twice (issue 24): its notices in the
	// conversation and its card's resumed steps, the card left expanded so
	// every load shows its steps.
	resumed := admin.newThread("Resumed work")
	for _, batch := range newResumedRun(t, resumed, admin.id, time.Now().Add(-2*time.Minute)).batches {
		a.commit(batch...)
	}
	b.openThread(resumed, "")
	b.activate("expand the resumed card", "#messages .card-toggle")
	b.checkPages(src, []a11yPage{
		{name: "thread-resumed", path: "/threads/" + resumed, ready: `document.documentElement.dataset.herdReady === "1"
			&& document.querySelectorAll("#messages .run-resumed").length === 2 && document.querySelectorAll("#messages .card-step-resumed").length === 2`},
	})

	b.do("sign out", chromedp.Submit(`form[action="/logout"]`))
	b.waitFor("signed out", `location.pathname === "/login"`, 10*time.Second)
	b.signIn(user.email, "password123")
	b.checkPages(src, []a11yPage{
		{name: "forbidden", path: "/admin", ready: `!!document.querySelector(".error-page")`},
	})
}

// kbJS defines, on the page, the keyboard walk's helpers: the controls a
// keyboard must reach (visible, enabled; one per radio group, as Tab
// visits a group once), numbered in data-kb, and what the focused element
// is and whether its focus can be seen (an outline or a box shadow).
const kbJS = `window.kb = {
	describe(e) {
		const text = (e.getAttribute("aria-label") || e.textContent || e.placeholder || e.name || "").trim().replace(/\s+/g, " ").slice(0, 40);
		return e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className && typeof e.className === "string" ? "." + e.className.trim().split(/\s+/).join(".") : "") + (text ? " \"" + text + "\"" : "");
	},
	controls() {
		const sel = 'a[href], button, input:not([type="hidden"]), select, textarea, summary, [tabindex]:not([tabindex="-1"])';
		const radios = new Set();
		const all = [...document.querySelectorAll(sel)].filter((e) => {
			if (e.disabled || e.closest("[inert], template") || !e.checkVisibility({ visibilityProperty: true })) return false;
			if (e.type === "radio") {
				if (radios.has(e.name)) return false;
				radios.add(e.name);
			}
			return true;
		});
		all.forEach((e, i) => (e.dataset.kb = String(i)));
		return all.map((e) => kb.describe(e));
	},
	focused() {
		const e = document.activeElement;
		if (!e || e === document.body) return { kb: "", what: "body", ring: false };
		const s = getComputedStyle(e);
		const ring = (s.outlineStyle !== "none" && parseFloat(s.outlineWidth) > 0) || s.boxShadow !== "none";
		const kbi = e.dataset.kb ?? (e.type === "radio" ? document.querySelector('input[type="radio"][name="' + e.name + '"][data-kb]')?.dataset.kb : undefined) ?? "";
		return { kb: kbi, what: kb.describe(e), ring: ring && e.matches(":focus-visible") };
	},
};`

type focusedControl struct {
	KB   string `json:"kb"`
	What string `json:"what"`
	Ring bool   `json:"ring"`
}

// checkKeyboard tabs through the whole page from its top: every control
// is reached, and each shows where the focus is. The page notes each
// focus as it happens (focusin), so the walk is one burst of Tab presses.
func (b *browser) checkKeyboard(page string) {
	b.t.Helper()
	evalAs[chromedp.Void](b, kbJS)
	controls := evalAs[[]string](b, `kb.controls()`)
	evalAs[chromedp.Void](b, `document.activeElement?.blur(); scrollTo(0, 0);
		window.kbSeen = [];
		document.addEventListener("focusin", () => kbSeen.push(kb.focused()))`)
	// A date field takes three Tabs, one per part (month, day, year).
	parts := evalAs[int](b, `document.querySelectorAll('input[type="date"]').length * 2`)
	tabs := make([]chromedp.Action[chromedp.Void], len(controls)+3+parts)
	for i := range tabs {
		tabs[i] = chromedp.KeyEvent(kb.Tab)
	}
	b.do("Tab through "+page, tabs...)
	reached := map[string]bool{}
	for _, f := range evalAs[[]focusedControl](b, `kbSeen`) {
		if f.KB == "" {
			continue
		}
		if !f.Ring && !reached[f.KB] {
			b.t.Errorf("%s: %s has the focus and shows no focus ring", page, f.What)
		}
		reached[f.KB] = true
	}
	for i, c := range controls {
		if !reached[strconv.Itoa(i)] {
			b.t.Errorf("%s: Tab never reaches %s", page, c)
		}
	}
}

// tabTo presses Tab until the focus is on an element matching selector.
func (b *browser) tabTo(selector string) {
	b.t.Helper()
	for range 200 {
		if evalAs[bool](b, fmt.Sprintf(`!!document.activeElement?.matches(%q)`, selector)) {
			return
		}
		b.do("Tab", chromedp.KeyEvent(kb.Tab))
	}
	b.t.Fatalf("Tab never reaches %s", selector)
}

// liveJS records, from when it runs, what a screen reader would announce:
// changes inside a live region (aria-live, or the log, status and alert
// roles) that is not switched off (aria-live="off") or busy (aria-busy),
// leaving out added nodes that are themselves off or busy. Changes made in
// one task reach the screen reader together: one entry per region per
// MutationObserver callback, as "region id: text".
const liveJS = `(() => {
	const quiet = (n) => n.nodeType === 1 && (n.getAttribute("aria-busy") === "true" || n.getAttribute("aria-live") === "off");
	const region = (node) => {
		for (let n = node; n && n.nodeType === 1; n = n.parentElement) {
			if (n.getAttribute("aria-busy") === "true") return "";
			const live = n.getAttribute("aria-live");
			if (live) return live === "off" ? "" : n.id || n.className;
			const role = n.getAttribute("role");
			if (role === "log" || role === "status" || role === "alert") return n.id || n.className;
		}
		return "";
	};
	window.spoken = [];
	new MutationObserver((records) => {
		const said = new Map();
		for (const r of records) {
			const node = r.type === "characterData" ? r.target.parentElement : r.target;
			const where = region(node);
			if (where === "") continue;
			const text = r.type === "childList" ? [...r.addedNodes].filter((n) => !quiet(n)).map((n) => n.textContent).join(" ") : node.textContent;
			if (text.trim() === "") continue; // removals and quiet additions are not announced
			said.set(where, ((said.get(where) ?? "") + " " + text).trim().replace(/\s+/g, " "));
		}
		for (const [where, text] of said) window.spoken.push(where + ": " + text.slice(0, 80));
	}).observe(document.body, { subtree: true, childList: true, characterData: true });
})()`

// TestBrowserKeyboardAndAnnouncements uses a thread page by keyboard
// alone — Send stays disabled on an empty or blank message, typing and
// Enter send, a card opens and closes with Enter and Space — and listens
// as a screen reader would: a run with many streamed tokens and two cards
// is announced as its messages and one line per card state change, never
// token by token or tick by tick.
func TestBrowserKeyboardAndAnnouncements(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 20, 1), demoModel("demo-deep", 20, 1)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("keyboard")
	u.startRun(th, "Two jobs:\n- alpha\n- beta")
	a.waitIdle(th)
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	b.tabTo("#composer-input")
	if !evalAs[bool](b, `document.querySelector("#send-button").disabled`) {
		t.Error("Send is enabled on an empty message")
	}
	b.do("type blanks", chromedp.KeyEvent("   "))
	if !evalAs[bool](b, `document.querySelector("#send-button").disabled`) {
		t.Error("Send is enabled on a blank message")
	}
	b.do("type", chromedp.KeyEvent("Hello"))
	if evalAs[bool](b, `document.querySelector("#send-button").disabled`) {
		t.Fatal("Send stays disabled once there is a message")
	}
	b.tabTo("#send-button")
	if !evalAs[bool](b, `document.activeElement.matches(":focus-visible")`) {
		t.Error("Send has the keyboard focus but not :focus-visible")
	}
	b.shot("send-focused")
	evalAs[chromedp.Void](b, liveJS)
	b.do("send with Enter on Send", chromedp.KeyEvent(kb.Enter))
	b.waitFor("the message sent", `[...document.querySelectorAll(".msg-human")].some((m) => m.textContent.includes("Hello"))`, 10*time.Second)
	b.waitRunEnd(a, th)

	// Open and close a card from the keyboard.
	evalAs[chromedp.Void](b, `document.activeElement?.blur(); scrollTo(0, 0)`)
	b.tabTo("#messages .card-toggle")
	b.shot("card-focused")
	b.do("Enter", chromedp.KeyEvent(kb.Enter))
	b.waitFor("the card open", `document.activeElement.getAttribute("aria-expanded") === "true" && !document.getElementById(document.activeElement.getAttribute("aria-controls")).hidden`, 10*time.Second)
	b.do("Space", chromedp.KeyEvent(" "))
	b.waitFor("the card closed", `document.activeElement.getAttribute("aria-expanded") === "false"`, 10*time.Second)

	// A run with two cards, listened to.
	evalAs[chromedp.Void](b, `window.spoken.length = 0`)
	b.sendMessage("Two more jobs:\n- gamma\n- delta")
	b.waitRunEnd(a, th)
	b.waitFor("the cards completed", `[...document.querySelectorAll("#messages section.card")].filter((c) => c.dataset.status === "completed").length === 4`, 10*time.Second)
	spoken := evalAs[[]string](b, `window.spoken`)
	lines := evalAs[[]string](b, `[...document.querySelectorAll("#announcer p")].map((p) => p.textContent)`)
	titles := evalAs[[]string](b, `[...document.querySelectorAll("#messages section.card")].slice(2).map((c) => c.querySelector(".card-title").textContent)`)
	deltas := evalAs[int](b, `document.querySelector("#messages .msg-ai:last-child .msg-body")?.textContent.length ?? 0`)
	t.Logf("announced (%d changes for an answer of %d characters): %q", len(spoken), deltas, spoken)
	for _, title := range titles {
		for _, want := range []string{title + ": started", title + ": Completed"} {
			if n := count(lines, want); n != 1 {
				t.Errorf("the announcer said %q %d times, want once (lines %q)", want, n, lines)
			}
		}
	}
	if len(lines) != 2*len(titles) {
		t.Errorf("the announcer said %q, want a start and an end for each of the cards %q", lines, titles)
	}
	for _, s := range spoken {
		if !strings.HasPrefix(s, "messages: ") && !strings.HasPrefix(s, "announcer: ") && !strings.HasPrefix(s, "run-status: ") {
			t.Errorf("announced outside the conversation and the announcer: %q", s)
		}
	}
	// The human message, each answer (with its cards) and, in a later
	// task, the answer's own controls (Regenerate), and a line per card
	// state change: a bound that does not grow with the tokens.
	answers := evalAs[int](b, `(() => {
		const all = [...document.querySelectorAll("#messages > .msg")];
		return all.slice(all.findLastIndex((m) => m.matches(".msg-human")) + 1).filter((m) => m.matches(".msg-ai")).length;
	})()`)
	if max := 1 + 2*answers + 2*len(titles); len(spoken) > max {
		t.Errorf("%d announced changes, want at most %d: %q", len(spoken), max, spoken)
	}
}

func count(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// TestBrowserReducedMotion: with the system asking for reduced motion,
// nothing on a thread page moves — the running card's spinner, the
// streaming caret, the phone drawer's slide — while without it they do
// (so the check can fail).
func TestBrowserReducedMotion(t *testing.T) {
	a := newApp(t, withHostBash(t), withModels(demoModel("demo-fast", 150, 2)), withSubagents(agent.SubagentsConfig{CancelGraceSeconds: 5}))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("motion")
	u.startRun(th, "Two jobs:\n- `sleep 300`\n- alpha")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	running := `document.documentElement.dataset.herdReady === "1" && [...document.querySelectorAll("#messages section.card")].some((c) => c.dataset.status === "running")`
	// A streaming bubble, as an ai_delta frame makes one.
	stream := `document.dispatchEvent(new CustomEvent("herd:frame", { detail: { type: "ai_delta", data: { message_id: "streaming", text: "Thinking out loud" } } }))`
	moving := `document.getAnimations().filter((a) => a.playState === "running").map((a) => a.animationName || a.transitionProperty)`

	for _, reduce := range []bool{false, true} {
		pref := map[bool]string{false: "no-preference", true: "reduce"}[reduce]
		b.emulateMedia(map[string]string{"prefers-reduced-motion": pref})
		b.do("phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
		b.navigate("/threads/" + th)
		b.waitFor("a running card", running, 20*time.Second)
		evalAs[chromedp.Void](b, stream)
		b.activate("open the drawer", `.sidebar-toggle`)
		got := evalAs[[]string](b, moving)
		b.shot("drawer-" + pref)
		if reduce && len(got) != 0 {
			t.Errorf("with reduced motion these still move: %q", got)
		}
		if !reduce {
			for _, want := range []string{"card-spin", "caret", "transform"} {
				if !slices.Contains(got, want) {
					t.Errorf("without reduced motion %q does not move (moving: %q): the check proves nothing", want, got)
				}
			}
		}
	}
}

// TestBrowserPasswordRules: the set-up page and the password change state
// the server's password rules before a password is tried — as the field's
// description, with the server's limits — and the browser stops a short
// one before it is sent.
func TestBrowserPasswordRules(t *testing.T) {
	a := newApp(t)
	b := newBrowser(t, a.http.URL)
	link, err := a.srv.SetupURL(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	check := func(page string) {
		t.Helper()
		rules := evalAs[string](b, `(() => {
			const input = document.querySelector('input[name="password"]');
			const rules = document.getElementById(input.getAttribute("aria-describedby"));
			return rules && rules.checkVisibility() ? rules.textContent : "";
		})()`)
		for _, want := range []string{"At least " + strconv.Itoa(auth.MinPassword) + " characters", strconv.Itoa(auth.MaxPasswordBytes) + " bytes", "common password"} {
			if !strings.Contains(rules, want) {
				t.Errorf("%s: the password's description %q does not say %q", page, rules, want)
			}
		}
		if got := evalAs[string](b, `document.querySelector('input[name="password"]').getAttribute("minlength")`); got != strconv.Itoa(auth.MinPassword) {
			t.Errorf("%s: the password field's minlength is %q, want %d", page, got, auth.MinPassword)
		}
		b.do("a short password", chromedp.SendKeys(`input[name="password"]`, "short"))
		if evalAs[bool](b, `document.querySelector('input[name="password"]').checkValidity()`) {
			t.Errorf("%s: the browser would send a %d-character password", page, len("short"))
		}
	}
	b.navigate(strings.TrimPrefix(link, a.http.URL))
	b.waitFor("the set-up form", `!!document.querySelector("form[action='/setup']")`, 10*time.Second)
	check("set-up")
	b.shot("setup")

	u := a.newUser("ann@example.com", false)
	b.signIn(u.email, "password123")
	b.navigate("/account")
	b.waitFor("the password form", `!!document.querySelector("form[action='/account/password']")`, 10*time.Second)
	check("password change")
	b.shot("account")
}
