package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// pageBrowser is a headless Debian Chromium on one tab for the process
// tests; the test fails on any console error or uncaught exception.
type pageBrowser struct {
	t      *testing.T
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []string
}

func newPageBrowser(t *testing.T) *pageBrowser {
	t.Helper()
	const chromium = "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("this test needs Chromium at %s (apt-get install chromium; .ci/run does it): %v", chromium, err)
	}
	dir := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(filepath.Join(dir, "profile")), chromedp.Env("TMPDIR="+dir),
		chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	br := &pageBrowser{t: t, ctx: ctx, cancel: func() { cancelCtx(); cancelAlloc() }}
	if err := chromedp.Do(ctx); err != nil {
		br.cancel()
		t.Fatalf("start chromium: %v", err)
	}
	console := chromedp.Events(ctx, runtime.ConsoleAPICalled)
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	br.wg.Go(func() {
		for ev, err := range console {
			if err != nil {
				return
			}
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				br.record("console.error: " + strings.Join(parts, " "))
			}
		}
	})
	br.wg.Go(func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			br.record("uncaught: " + ev.ExceptionDetails.Text)
		}
	})
	t.Cleanup(br.close)
	return br
}

func (br *pageBrowser) record(msg string) {
	br.mu.Lock()
	defer br.mu.Unlock()
	br.errs = append(br.errs, msg)
}

func (br *pageBrowser) close() {
	if br.t.Failed() {
		br.shot("failure")
	}
	br.cancel()
	br.wg.Wait()
	br.mu.Lock()
	defer br.mu.Unlock()
	for _, e := range br.errs {
		br.t.Errorf("browser error: %s", e)
	}
}

func (br *pageBrowser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	br.t.Helper()
	ctx, cancel := context.WithTimeout(br.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		br.t.Fatalf("%s: %v", what, err)
	}
}

// waitFor waits (up to 30 s) until expr is truthy in a loaded page,
// across navigations.
func (br *pageBrowser) waitFor(what, expr string) {
	br.t.Helper()
	expr = `document.readyState === "complete" && (` + expr + `)`
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) && br.ctx.Err() == nil {
		ctx, cancel := context.WithDeadline(br.ctx, deadline)
		_, err = chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(time.Until(deadline)), chromedp.WithPollingInterval(20*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond) // a navigation destroyed the page's context
	}
	br.t.Fatalf("waiting for %s: %v", what, err)
}

// shot saves a screenshot under test-output/<test>/ at the module root.
func (br *pageBrowser) shot(name string) {
	buf, err := chromedp.Run(br.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		br.t.Logf("screenshot %s: %v", name, err)
		return
	}
	dir := filepath.Join(repoPath(br.t, "test-output"), strings.NewReplacer("/", "_").Replace(br.t.Name()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		br.t.Logf("screenshot: %v", err)
		return
	}
	p := filepath.Join(dir, fmt.Sprintf("%s.png", name))
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		br.t.Logf("screenshot: %v", err)
	}
	abs, _ := filepath.Abs(p)
	br.t.Logf("screenshot: %s", abs)
}

// signIn signs the test admin in through base's sign-in page.
func (br *pageBrowser) signIn(base string) {
	br.t.Helper()
	br.run("sign in on "+base,
		chromedp.Navigate(base+"/login"),
		chromedp.WaitVisible(chromedp.CSS(`form[action="/login"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="email"]`), "ops@example.com"),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), "long enough pw"),
		chromedp.Submit(chromedp.CSS(`form[action="/login"]`)),
	)
	br.waitFor("signed in", `location.pathname === "/"`)
}

// scrollTo scrolls the first element sel picks to the middle of the view.
func (br *pageBrowser) scrollTo(sel string) {
	br.t.Helper()
	br.run("scroll to "+sel, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).scrollIntoView({ block: "center" })`, sel)))
}
