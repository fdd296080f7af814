package server

import (
	"net/http"
	"testing"
	"time"

	"herd/agent/openai/openaitest"
)

// TestBrowserFailureWords: a wrong API key (401) reads live as its cause
// and who can fix it, with no Retry (it cannot help) and the raw cause
// under Details; the same after a reload.
func TestBrowserFailureWords(t *testing.T) {
	p := failingOpenAI(t, openaitest.Fail(http.StatusUnauthorized, "Incorrect API key provided"))
	a := newApp(t, func(c *appConfig) { c.provider = p })
	u := a.newUser("ann@example.com", false)
	th := u.newThread("wrong key")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	b.sendMessage("What is herd?")
	b.waitRunEnd(a, th)
	check := func(when string) {
		b.waitFor("the 401's words "+when, `(() => {
			const end = document.querySelector(".run-end-failed");
			return end?.dataset.errorKind === "auth"
				&& end.querySelector(".run-notice-text")?.textContent.startsWith("The model provider rejected herd's API key (HTTP 401)")
				&& !end.querySelector(".run-retry")
				&& end.querySelector(".run-error-text")?.textContent.includes("Incorrect API key provided");
		})()`, 15*time.Second)
	}
	check("live")
	b.shot("failure-401")
	b.reload()
	check("after a reload")
}
