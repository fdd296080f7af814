package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"herd/agent"
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

// checkPages checks each page in the light and the dark theme, on a
// desktop and on a phone (390×844): axe-core, the phone's layout, and a
// screenshot of each.
func (b *browser) checkPages(src string, pages []a11yPage) {
	b.t.Helper()
	for _, theme := range []string{"light", "dark"} {
		b.emulateMedia(map[string]string{"prefers-color-scheme": theme})
		for _, p := range pages {
			name := p.name + "-" + theme
			b.do("desktop", chromedp.EmulateViewport(1280, 900))
			b.openPage(p, theme)
			b.checkAxe(src, name)
			b.checkKeyboard(name)
			b.shot(name)
			b.do("phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
			b.openPage(p, theme)
			b.checkAxe(src, name+"-phone")
			b.checkPhone(name)
			evalAs[chromedp.Void](b, `scrollTo(0, 0)`)
			b.shot(name + "-phone")
		}
	}
	b.do("desktop", chromedp.EmulateViewport(1280, 900))
}

// openPage loads p, waits until it shows what is checked and every
// transition has run, and opens what p opens.
func (b *browser) openPage(p a11yPage, theme string) {
	b.t.Helper()
	b.navigate(p.path)
	b.waitFor(p.name, cmpOr(p.ready, "true"), 20*time.Second)
	if !evalAs[bool](b, `matchMedia("(prefers-color-scheme: `+theme+`)").matches`) {
		b.t.Fatalf("%s: the %s theme is not in effect", p.name, theme)
	}
	if p.open != "" {
		evalAs[chromedp.Void](b, p.open)
	}
	b.waitFor(p.name+" settled", settled, 10*time.Second)
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
// thread with a running and a finished card, settings, account, admin,
// usage, and the 404 and 403 error pages — in the light and the dark
// theme: axe-core reports no serious or critical violation, and each fits
// a phone.
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
	b.checkAxe(src, "login-error")
	b.shot("login-error")
	b.signIn(admin.email, "password123")

	// A finished conversation, a thread with a card still running beside a
	// finished one, and a deleted thread for the Undo notice.
	done := admin.newThread("Finished work")
	admin.startRun(done, "Two jobs:\n- alpha\n- beta")
	a.waitIdle(done)
	live := admin.newThread("Live work")
	admin.startRun(live, "Two jobs:\n- `sleep 300`\n- alpha")
	gone := admin.newThread("Deleted work")
	admin.mustJSON("DELETE", "/api/threads/"+gone, nil, http.StatusNoContent, nil)
	admin.mustJSON("POST", "/api/tokens", map[string]string{"name": "laptop"}, http.StatusCreated, &struct{}{})
	liveReady := `document.documentElement.dataset.herdReady === "1"
		&& [...document.querySelectorAll("#messages section.card")].some((c) => c.dataset.status === "running" && c.querySelector(".card-status").textContent.includes("bash"))
		&& [...document.querySelectorAll("#messages section.card")].some((c) => c.dataset.status === "completed")`
	b.checkPages(src, []a11yPage{
		{name: "threads", path: "/?deleted=" + gone, ready: `!!document.querySelector("#undo-delete")`},
		{name: "search", path: "/?q=work", ready: `!!document.querySelector(".search-head")`},
		{name: "new-thread", path: "/threads/new", ready: `document.documentElement.dataset.herdReady === "1"`},
		{name: "thread-finished", path: "/threads/" + done, ready: `document.documentElement.dataset.herdReady === "1"`,
			open: `document.querySelector("#messages .card-toggle").click(); document.querySelector("#usage-panel")?.setAttribute("open", "")`},
		{name: "thread-live", path: "/threads/" + live, ready: liveReady,
			open: `[...document.querySelectorAll("#messages section.card")].find((c) => c.dataset.status === "completed").querySelector(".card-toggle").click();
				document.querySelector(".thread-menu").setAttribute("open", "")`},
		{name: "settings", path: "/settings", ready: `!!document.querySelector("form[action='/settings/preferences']")`},
		{name: "account", path: "/account", ready: `!!document.querySelector("#sessions")`},
		{name: "admin", path: "/admin", ready: `!!document.querySelector("h1")`},
		{name: "usage", path: "/admin/usage", ready: `!!document.querySelector("h1")`},
		{name: "not-found", path: "/threads/00000000-0000-4000-8000-000000000000", ready: `!!document.querySelector(".error-page")`},
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
// is reached, and each shows where the focus is.
func (b *browser) checkKeyboard(page string) {
	b.t.Helper()
	evalAs[chromedp.Void](b, kbJS)
	controls := evalAs[[]string](b, `kb.controls()`)
	evalAs[chromedp.Void](b, `document.activeElement?.blur(); scrollTo(0, 0)`)
	reached := map[string]bool{}
	for range len(controls) + 3 {
		b.do("Tab", chromedp.KeyEvent(kb.Tab))
		f := evalAs[focusedControl](b, `kb.focused()`)
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
