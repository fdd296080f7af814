package server

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd/agent/tools"
)

// TestBrowserCommandsOff: in host mode a plain user sees, under the
// composer, why commands are off, and asking for one gets the same reason
// as the answer; the page raises no error.
func TestBrowserCommandsOff(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 50, 10)), withServer(hostMode), func(c *appConfig) {
		c.tools = append(tools.Workspace(), hostBash(t))
	})
	u := a.newUser("ann@example.com", false)
	th := u.newThread("commands")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.navigate("/threads/" + th)
	b.do("see the note", chromedp.WaitVisible(chromedp.CSS("#commands-note")))
	note := evalAs[string](b, `document.querySelector("#commands-note").textContent`)
	if !strings.Contains(note, "Commands are turned off for your account") || !strings.Contains(note, "only admins") {
		t.Errorf("note = %q", note)
	}
	b.waitFor("the page to be ready", `document.documentElement.dataset.herdReady === "1"`, 10*time.Second)
	b.sendMessage("Run `cat /proc/self/environ`")
	b.waitFor("the answer", `[...document.querySelectorAll("#messages .msg-ai")].some(m => m.textContent.includes("only admins may run commands on this host"))`, 15*time.Second)
	b.shot("commands-off")
}
