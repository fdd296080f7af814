package server

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// below is how far the page's end is under the bottom of the view, in JS.
const belowJS = `(document.documentElement.scrollHeight - document.documentElement.scrollTop - document.documentElement.clientHeight)`

// TestBrowserFollowsConversation: a reader at the bottom follows new
// output; one who scrolled up stays put and gets a "Jump to latest"
// button when output arrives below; sending scrolls to your message.
func TestBrowserFollowsConversation(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 150, 2)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("follow")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")
	jumpHidden := `document.querySelector("#jump-latest").hidden`

	// At the bottom, a run's cards and answer are followed as they come.
	b.sendMessage("Four jobs:\n- alpha\n- beta\n- gamma\n- delta")
	b.waitRunEnd(a, th)
	b.sendMessage("Four more:\n- epsilon\n- zeta\n- eta\n- theta")
	b.waitRunEnd(a, th)
	if !evalAs[bool](b, `document.documentElement.scrollHeight > 2 * innerHeight`) {
		t.Fatal("the conversation is not long enough to scroll; the test proves nothing")
	}
	// The run's end reaches the page a moment after the server: the
	// page follows its last frames (the answer, the run's end) when they
	// land.
	b.waitFor("the page followed to its end, no jump button", belowJS+` <= 120 && `+jumpHidden, 10*time.Second)

	// Scrolled up, output from another tab does not move the view, and
	// the button appears.
	evalAs[chromedp.Void](b, `window.scrollTo(0, 0)`)
	b.waitFor("the view at the top", `document.documentElement.scrollTop === 0`, 5*time.Second)
	u.startRun(th, "- iota\n- kappa")
	b.waitFor("the jump button", `!`+jumpHidden, 15*time.Second)
	b.waitRunEnd(a, th)
	if top := evalAs[float64](b, `document.documentElement.scrollTop`); top != 0 {
		t.Errorf("new output moved a reader who had scrolled up to %v px", top)
	}
	b.shot("scrolled-up-with-jump")

	b.activate("jump to latest", `#jump-latest`)
	b.waitFor("the bottom", belowJS+` < 120 && `+jumpHidden, 5*time.Second)

	// Scrolled up again, sending brings your message into view.
	evalAs[chromedp.Void](b, `window.scrollTo(0, 0)`)
	b.waitFor("the view at the top", `document.documentElement.scrollTop === 0`, 5*time.Second)
	b.sendMessage("Where did it all go?")
	b.waitFor("your message in view", `(() => {
		const mine = [...document.querySelectorAll("#messages .msg-human")].at(-1);
		if (!mine || !mine.textContent.includes("Where did it all go?")) return false;
		const r = mine.getBoundingClientRect();
		return r.top >= 0 && r.bottom <= innerHeight;
	})()`, 15*time.Second)
	b.waitRunEnd(a, th)
	b.waitFor("the answer followed to the page's end", belowJS+` <= 120`, 10*time.Second)
	b.shot("after-send")
}
