package server

import (
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// TestBrowserCopy: every message has Copy, every code block its own, live
// and after a reload; what they copy is the text and the code.
func TestBrowserCopy(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("copy")
	b := newBrowser(t, a.http.URL)
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(b.ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: name}, Setting: cdpbrowser.PermissionSettingGranted, Origin: a.http.URL,
		}); err != nil {
			t.Fatalf("grant %s: %v", name, err)
		}
	}
	// The clipboard takes text only from a focused document ("Document is
	// not focused"). A mouse click focuses the page; the Copy buttons are
	// activated inside the page (below), which does not, so the page is
	// focused as the window a user clicks in would be.
	if _, err := chromedp.Call(b.ctx, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true}); err != nil {
		t.Fatalf("focus the page: %v", err)
	}
	b.signIn(u.email, "password123")
	b.openThread(th, "")
	b.sendMessage("Explain this:\n```\nfmt.Println(\"hi\")\n```")
	b.waitRunEnd(a, th)

	clipboard := func(click string) string {
		t.Helper()
		// As b.activate explains: a late frame can move the page between
		// a mouse click's measuring and its landing.
		b.activate("copy "+click, click)
		b.waitFor("copied", `document.querySelector(`+"`"+click+"`"+`).textContent === "Copied"`, 5*time.Second)
		return evalAwait[string](b, `navigator.clipboard.readText()`)
	}
	check := func(when string) {
		if n := evalAs[int](b, `document.querySelectorAll("#messages .msg .msg-copy").length`); n != 2 {
			t.Errorf("%s: %d message Copy buttons, want 2", when, n)
		}
		if got := clipboard(".msg-human .code-copy"); got != "fmt.Println(\"hi\")\n" {
			t.Errorf("%s: the code block copied %q", when, got)
		}
		if got := clipboard(".msg-ai .msg-copy"); !strings.HasPrefix(got, "You wrote:") || strings.Contains(got, "<") {
			t.Errorf("%s: the answer copied %q", when, got)
		}
	}
	check("live")
	b.shot("copy")
	b.reload()
	check("after a reload")
}
