package server

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserSingleSignOn: a person clicks the provider's button on
// herd's sign-in page, signs in on the provider's own page and lands
// signed in; the first sign-in makes the user, the herd-admins group
// makes an admin and its absence a user; a domain herd does not allow
// is refused with a page that says so; signing out ends herd's session
// and goes through the provider's end-session back to herd.
func TestBrowserSingleSignOn(t *testing.T) {
	s := newSSOApp(t)
	axe := loadAxe(t)
	b := newBrowser(t, s.http.URL)
	b.allowErrors(`favicon\.ico`)                 // the provider's pages have none
	b.allowErrors(`status of 403`)                // the refusals are 403 pages
	b.allowErrors(`/auth/oidc/test/callback.*40`) // and so logged by the browser

	for _, tc := range []struct {
		username, email string
		admin           bool
	}{
		{"alice", "alice@example.com", true},
		{"bob", "bob@example.com", false},
	} {
		b.ssoSignIn(s, tc.username)
		b.waitFor("signed in at home", `location.pathname === "/" && document.querySelector("form.sign-out") !== null`, 15*time.Second)
		u, err := s.store.UserByEmail(context.Background(), tc.email)
		if err != nil {
			t.Fatalf("%s was not created: %v", tc.email, err)
		}
		if u.IsAdmin() != tc.admin {
			t.Errorf("%s: role %s, want admin %v", tc.email, u.Role, tc.admin)
		}
		b.navigate("/admin")
		if tc.admin {
			// The users list says how alice signs in, and offers to unlink it.
			b.waitFor("the admin page", `document.title.startsWith("Admin") && document.body.innerText.includes("signs in with Test IdP")`, 10*time.Second)
			b.checkAxe(axe, "admin-identities")
		} else {
			b.waitFor("refused", `document.body.innerText.includes("admins only")`, 10*time.Second)
		}
		b.shot(tc.username + "-admin")
		b.navigate("/")
		b.markPage()
		b.activate("sign out", `form.sign-out button`)
		b.waitNewPage("herd's sign-out offers the provider's", `document.querySelector("#end-session") !== null`, 10*time.Second)
		b.checkAxe(axe, "signed-out-"+tc.username)
		b.markPage()
		b.activate("sign out of the provider too", `#end-session`)
		b.waitNewPage("back from the provider's end-session", `location.origin === `+jsString(s.http.URL)+` && location.pathname === "/login" && document.body.innerText.includes("signed out of herd")`, 15*time.Second)
		if !s.idp.Reached("/end_session") {
			t.Error("the provider's end_session was not reached")
		}
		b.navigate("/")
		b.waitFor("signed out", `location.pathname === "/login"`, 10*time.Second)
	}

	b.ssoSignIn(s, "eve")
	b.waitFor("the refusal", `location.pathname === "/auth/oidc/test/callback" && document.querySelector('[role="alert"]').innerText.includes("accounts of elsewhere.org cannot sign in to herd with Test IdP")`, 15*time.Second)
	b.shot("eve-refused")
	b.checkAxe(axe, "sso-refused")
	if _, err := s.store.UserByEmail(context.Background(), "eve@elsewhere.org"); err == nil {
		t.Error("eve was created")
	}
	if n, _ := s.store.CountUsers(context.Background()); n != 3 {
		t.Errorf("%d users, want root, alice and bob", n)
	}
}

// ssoSignIn clicks the provider's button and signs username in on the
// provider's login page.
func (b *browser) ssoSignIn(s *ssoApp, username string) {
	b.t.Helper()
	b.navigate("/login")
	b.markPage()
	b.activate("the provider's button", `a[data-provider="test"]`)
	b.waitNewPage("the provider's login page", `location.origin === `+jsString(s.idp.Issuer)+` && document.querySelector("#username") !== null`, 15*time.Second)
	b.do("log in at the provider",
		chromedp.SendKeys(chromedp.CSS(`#username`), username),
		chromedp.SendKeys(chromedp.CSS(`#password`), "verysecure"),
	)
	b.markPage()
	b.activate("log in", `button[type="submit"]`)
}

func jsString(s string) string { return `"` + s + `"` }
