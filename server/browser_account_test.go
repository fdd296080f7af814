package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"herd/server/auth"

	"github.com/chromedp/chromedp"
)

// TestBrowserAccount: a user sees their sessions, changes the password
// (the other browser is signed out and its live view told so at once),
// and signs out everywhere.
func TestBrowserAccount(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false) // an API client: the other session
	th := u.newThread("watched")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")

	b.navigate("/account")
	b.waitFor("two sessions, this one marked", `document.querySelectorAll("#sessions .session").length === 2 && document.querySelectorAll("#sessions .badge").length === 1`, 10*time.Second)
	b.shot("sessions")
	if ua := evalAs[string](b, `document.querySelector("#sessions .badge").closest(".session").innerText`); !strings.Contains(ua, "Chrome") || !strings.Contains(ua, "127.0.0.1") {
		t.Errorf("this browser's entry reads %q, want its browser and address", ua)
	}

	// The other session watches a thread while the password changes.
	conn, err := u.dial(th, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b.do("change the password",
		chromedp.SendKeys(chromedp.CSS(`input[name="current_password"]`), "password123"),
		chromedp.SendKeys(chromedp.CSS(`form[action="/account/password"] input[name="password"]`), strongPassword),
		chromedp.SendKeys(chromedp.CSS(`input[name="password_confirm"]`), strongPassword),
		chromedp.Submit(chromedp.CSS(`form[action="/account/password"]`)),
	)
	b.waitFor("the change confirmed", `document.body.innerText.includes("Password changed") && document.querySelectorAll("#sessions .session").length === 1`, 10*time.Second)
	b.shot("password-changed")
	expectClosed(t, conn, 4401)
	if r := u.do("GET", "/api/auth/me", nil); r.status != http.StatusUnauthorized {
		t.Errorf("the other session after the change: %d", r.status)
	}

	// Signing out everywhere ends the session signed in since, too.
	other := a.anonymous()
	other.mustJSON("POST", "/api/auth/login", map[string]string{"email": u.email, "password": strongPassword}, http.StatusOK, &struct{}{})
	b.navigate("/account")
	b.activate("sign out everywhere", `#sign-out-everywhere`)
	b.waitFor("the sign-in page", `location.pathname === "/login"`, 10*time.Second)
	b.shot("signed-out")
	if r := other.do("GET", "/api/auth/me", nil); r.status != http.StatusUnauthorized {
		t.Errorf("another session after signing out everywhere: %d", r.status)
	}
	b.navigate("/account")
	b.waitFor("sent to sign in", `location.pathname === "/login"`, 10*time.Second)
}

// TestBrowserSessionEndedLive: a thread page whose session is signed out
// from another browser says so at once instead of reconnecting.
func TestBrowserSessionEndedLive(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("watched")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	// The sign-out comes once the page has settled (its socket open, its
	// models list read): a request of its start refused after the
	// sign-out is a browser error this test does not mean to provoke.
	b.openThread(th, "")
	waitClients(t, a.hub, 1)
	u.mustJSON("DELETE", "/api/account/sessions", nil, http.StatusNoContent, nil)
	b.waitFor("the session-ended line", `!document.querySelector("#conn-status").hidden && document.querySelector("#conn-status").textContent.includes("Session ended")`, 5*time.Second)
	b.shot("session-ended")
}

// TestBrowserSignInPostsOnce: a double click on Sign in sends one
// password: herd checks one at a time per address and account, and a
// second sent while the first is hashed would be answered 429 in place of
// the page the first brings.
func TestBrowserSignInPostsOnce(t *testing.T) {
	a := newApp(t, withServer(func(o *Options) { o.BcryptCost = 12 })) // a check of a quarter of a second
	a.newUserNoLogin("ann@example.com")
	b := newBrowser(t, a.http.URL)
	b.navigate("/login")
	b.do("fill in the form",
		chromedp.WaitVisible(chromedp.CSS(`form[action="/login"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="email"]`), "ann@example.com"),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), "password123"),
	)
	b.markPage()
	evalAs[chromedp.Void](b, `(() => {
		const button = document.querySelector('form[action="/login"] button[type="submit"]');
		button.click();
		setTimeout(() => button.click(), 30);
	})()`)
	b.waitNewPage("signed in", `location.pathname === "/"`, 10*time.Second)
	if got := passwordChecks(t, a, auth.CheckSignIn); got != 1 {
		t.Errorf("%v passwords checked for one sign-in, want 1", got)
	}
}
