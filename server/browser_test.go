package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

const chromiumPath = "/usr/bin/chromium"

// browser is a headless Debian Chromium driving one tab. It records every
// console error, uncaught exception and error log entry (CSP violations,
// failed requests): the test fails on any of them. Screenshots go to
// test-output/<test>/ at the repository root.
type browser struct {
	t      *testing.T
	ctx    context.Context
	cancel context.CancelFunc
	base   string
	out    string
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []string
	shots  int
	// allow matches error texts a test provokes on purpose.
	allow []*regexp.Regexp
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("SKIP_BROWSER_TESTS") != "" {
			t.Skip("SKIP_BROWSER_TESTS is set and Chromium is missing")
		}
		t.Fatalf("browser tests need Chromium at %s (apt-get install chromium; .ci/run does it): %v", chromiumPath, err)
	}
	dir := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.Env("TMPDIR="+dir),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx, base: base, out: filepath.Join("..", "test-output", sanitize(t.Name()))}
	b.cancel = func() { cancelCtx(); cancelAlloc() }
	if err := chromedp.Do(ctx); err != nil {
		b.cancel()
		t.Fatalf("start chromium: %v", err)
	}
	console := chromedp.Events(ctx, runtime.ConsoleAPICalled)
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	logs := chromedp.Events(ctx, log.EntryAdded)
	b.wg.Go(func() {
		for ev, err := range console {
			if err != nil {
				return
			}
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, strings.Trim(string(a.Value), `"`)+a.Description)
				}
				b.record("console." + string(ev.Type) + ": " + strings.Join(parts, " "))
			}
		}
	})
	b.wg.Go(func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			b.record("uncaught: " + msg)
		}
	})
	b.wg.Go(func() {
		for ev, err := range logs {
			if err != nil {
				return
			}
			if ev.Entry.Level == "error" {
				b.record(fmt.Sprintf("log %s: %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	})
	t.Cleanup(b.close)
	return b
}

func sanitize(name string) string {
	return regexp.MustCompile(`[^A-Za-z0-9._-]+`).ReplaceAllString(name, "_")
}

func (b *browser) record(msg string) {
	for _, re := range b.allow {
		if re.MatchString(msg) {
			return
		}
	}
	b.mu.Lock()
	b.errs = append(b.errs, msg)
	b.mu.Unlock()
}

func (b *browser) close() {
	if b.t.Failed() {
		b.shot("failure")
	}
	b.cancel()
	b.wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		b.t.Errorf("browser error: %s", e)
	}
}

// shot saves a screenshot of the viewport and returns its path.
func (b *browser) shot(name string) string {
	buf, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	if err := os.MkdirAll(b.out, 0o755); err != nil {
		b.t.Logf("screenshot dir: %v", err)
		return ""
	}
	b.shots++
	p := filepath.Join(b.out, fmt.Sprintf("%02d-%s.png", b.shots, name))
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
	abs, _ := filepath.Abs(p)
	b.t.Logf("screenshot: %s", abs)
	return p
}

// do runs actions with a deadline, failing the test on error.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression.
func evalAs[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("eval %s: %v", expr, err)
	}
	return v
}

// waitFor waits until a JavaScript condition is truthy in a fully loaded
// page. It survives page navigations (a form submit, a reload): the
// condition is re-evaluated in each new page, and not before that page has
// loaded, so the next action never meets a half-parsed document.
func (b *browser) waitFor(what, expr string, timeout time.Duration) {
	b.t.Helper()
	expr = `document.readyState === "complete" && (` + expr + `)`
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(b.ctx, time.Until(deadline))
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(time.Until(deadline)), chromedp.WithPollingInterval(20*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		lastErr = err
		if b.ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond) // a navigation destroyed the page's context; try the next page
	}
	b.t.Fatalf("waiting for %s (%s): %v", what, expr, lastErr)
}

// markPage tags the current page; waitNewPage then waits for a condition
// in a later page only. Use it when a form posts and redirects to a page
// whose condition the old page can already meet (a live frame may update
// the old page first).
func (b *browser) markPage() {
	b.t.Helper()
	evalAs[chromedp.Void](b, `window.herdOldPage = true`)
}

func (b *browser) waitNewPage(what, expr string, timeout time.Duration) {
	b.t.Helper()
	b.waitFor(what, `!window.herdOldPage && (`+expr+`)`, timeout)
}

func (b *browser) navigate(path string) {
	b.t.Helper()
	b.do("navigate "+path, chromedp.Navigate(b.base+path))
}

// activate clicks the element sel in one step inside the page, as a user
// activates it, once it is visible. chromedp.Click measures the node and
// then sends the mouse where it was: while a run's frames grow the page
// (or the page follows them down), the mouse can land on something else.
func (b *browser) activate(what, sel string) {
	b.t.Helper()
	b.do(what, chromedp.WaitVisible(chromedp.CSS(sel)))
	evalAs[chromedp.Void](b, fmt.Sprintf(`document.querySelector(%q).click()`, sel))
}

// sendMessage types a message into the composer and clicks Send.
func (b *browser) sendMessage(text string) {
	b.t.Helper()
	b.waitFor("the composer idle", `document.querySelector("#composer").dataset.state === "idle"`, 15*time.Second)
	js, _ := json.Marshal(text)
	// As typing does: the input event lets the composer enable Send.
	evalAs[chromedp.Void](b, fmt.Sprintf(`(() => {
		const input = document.querySelector("#composer-input");
		input.value = %s;
		input.dispatchEvent(new Event("input", { bubbles: true }));
	})()`, js))
	b.do("wait for Send", chromedp.WaitEnabled(chromedp.CSS("#send-button")))
	b.activate("send", "#send-button")
}

// allowErrors ignores browser errors matching pattern (provoked on purpose).
func (b *browser) allowErrors(pattern string) {
	b.allow = append(b.allow, regexp.MustCompile(pattern))
}

// signIn signs in through the sign-in page.
func (b *browser) signIn(email, password string) {
	b.t.Helper()
	b.navigate("/login")
	b.do("sign in",
		chromedp.WaitVisible(chromedp.CSS(`form[action="/login"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="email"]`), email),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), password),
		chromedp.Submit(chromedp.CSS(`form[action="/login"]`)),
	)
	b.waitFor("signed in", `location.pathname === "/"`, 10*time.Second)
}
