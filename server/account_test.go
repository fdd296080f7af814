package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// expectClosed reads conn until the server closes it and checks the code:
// the socket must end at once, not at the next ping.
func expectClosed(t *testing.T, conn *websocket.Conn, code int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		_ = conn.SetReadDeadline(deadline)
		_, _, err := conn.ReadMessage()
		if err == nil {
			continue // frames sent before the close
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != code {
			t.Fatalf("socket ended with %v, want close code %d", err, code)
		}
		return
	}
}

// TestSessionsFollowTheAccount: each way a credential or a user's rights
// end closes their open socket at once (code 4401) and refuses the old
// cookie; an admin's change also stops the user's runs.
func TestSessionsFollowTheAccount(t *testing.T) {
	cases := []struct {
		name      string
		admin     bool // the user is an admin (to be demoted)
		act       func(t *testing.T, admin, victim *user)
		stopsRuns bool
	}{
		{name: "disabled", act: func(t *testing.T, admin, v *user) {
			admin.mustJSON("PATCH", "/api/admin/users/"+v.id, map[string]bool{"disabled": true}, http.StatusOK, nil)
		}, stopsRuns: true},
		{name: "demoted", admin: true, act: func(t *testing.T, admin, v *user) {
			admin.mustJSON("PATCH", "/api/admin/users/"+v.id, map[string]string{"role": "user"}, http.StatusOK, nil)
		}, stopsRuns: true},
		{name: "demoted on the admin page", admin: true, act: func(t *testing.T, admin, v *user) {
			if r := admin.do("POST", "/admin/users/"+v.id, url.Values{"role": {"user"}, "_csrf": {admin.csrf}}); r.status != http.StatusOK {
				t.Fatalf("demote: %d", r.status)
			}
		}, stopsRuns: true},
		{name: "deleted", act: func(t *testing.T, admin, v *user) {
			admin.mustJSON("DELETE", "/api/admin/users/"+v.id, nil, http.StatusNoContent, nil)
		}, stopsRuns: true},
		{name: "signed out", act: func(t *testing.T, _, v *user) {
			v.mustJSON("POST", "/api/auth/logout", nil, http.StatusNoContent, nil)
		}},
		{name: "signed out everywhere from another browser", act: func(t *testing.T, _, v *user) {
			other := v.a.signInAgain(v)
			other.mustJSON("DELETE", "/api/account/sessions", nil, http.StatusNoContent, nil)
		}},
		{name: "password changed in another browser", act: func(t *testing.T, _, v *user) {
			other := v.a.signInAgain(v)
			other.mustJSON("POST", "/api/account/password", map[string]string{"current_password": "password123", "new_password": strongPassword}, http.StatusNoContent, nil)
			if r := other.do("GET", "/api/auth/me", nil); r.status != http.StatusOK {
				t.Errorf("the browser that changed the password: %d, want still signed in", r.status)
			}
		}},
		{name: "session signed out from the list", act: func(t *testing.T, _, v *user) {
			other := v.a.signInAgain(v)
			var list struct{ Sessions []sessionJSON }
			other.mustJSON("GET", "/api/account/sessions", nil, http.StatusOK, &list)
			for _, x := range list.Sessions {
				if !x.Current {
					other.mustJSON("DELETE", "/api/account/sessions/"+x.ID, nil, http.StatusNoContent, nil)
				}
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newApp(t, withModels(demoModel("slow", 1000, 20)))
			admin := a.newUser("admin@example.com", true)
			victim := a.newUser("bob@example.com", c.admin)
			th := victim.newThread("t")
			conn, err := victim.dial(th, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			victim.startRun(th, "hello")
			c.act(t, admin, victim)
			expectClosed(t, conn, 4401)
			if r := victim.do("GET", "/api/auth/me", nil); r.status != http.StatusUnauthorized {
				t.Errorf("old session cookie: %d, want 401", r.status)
			}
			if _, err := victim.dial(th, 0); err == nil || !strings.Contains(err.Error(), "HTTP 401") && !strings.Contains(err.Error(), "HTTP 404") {
				t.Errorf("reconnecting with the old cookie: %v, want refused", err)
			}
			_, active := a.rt.ActiveRun(th)
			if c.stopsRuns && active {
				t.Error("the user's run is still active after the admin's change")
			}
			a.waitIdle(th)
		})
	}
}

// signInAgain signs u in from a second browser.
func (a *testApp) signInAgain(u *user) *user {
	a.t.Helper()
	other := a.anonymous()
	other.id, other.email = u.id, u.email
	var out struct {
		CSRF string `json:"csrf_token"`
	}
	other.mustJSON("POST", "/api/auth/login", map[string]string{"email": u.email, "password": "password123"}, http.StatusOK, &out)
	other.csrf = out.CSRF
	return other
}

// TestTokenRevokeClosesSocket: a socket opened with an API token closes
// when the token is deleted, and the token no longer works.
func TestTokenRevokeClosesSocket(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	var tok struct{ ID, Token string }
	u.mustJSON("POST", "/api/tokens", map[string]string{"name": "script"}, http.StatusCreated, &tok)
	hdr := http.Header{"Authorization": {"Bearer " + tok.Token}}
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(a.http.URL, "http")+"/api/threads/"+th+"/stream", hdr)
	if err != nil {
		t.Fatalf("dial with token: %v %v", err, resp)
	}
	defer conn.Close()
	other, resp2, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(a.http.URL, "http")+"/api/threads/"+th+"/stream", hdr)
	if err != nil {
		t.Fatalf("dial with token: %v %v", err, resp2)
	}
	defer other.Close()
	session, err := u.dial(th, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	u.mustJSON("DELETE", "/api/tokens/"+tok.ID, nil, http.StatusNoContent, nil)
	expectClosed(t, conn, 4401)
	expectClosed(t, other, 4401)
	// The session's socket is not the token's: it stays.
	if _, err := readFrame(session, 300*time.Millisecond); err != nil && !isTimeout(err) {
		t.Errorf("the session's socket ended too: %v", err)
	}
	r := a.anonymous().do("GET", "/api/threads", nil, "Authorization", "Bearer "+tok.Token)
	if r.status != http.StatusUnauthorized {
		t.Errorf("revoked token: %d", r.status)
	}
}

// TestSessionsList: the account's sessions carry when, where and what,
// the current one marked, never the cookie or its hash.
func TestSessionsList(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	other := a.signInAgain(u)
	var list struct{ Sessions []sessionJSON }
	u.mustJSON("GET", "/api/account/sessions", nil, http.StatusOK, &list)
	if len(list.Sessions) != 2 {
		t.Fatalf("%d sessions, want 2", len(list.Sessions))
	}
	current := 0
	for _, x := range list.Sessions {
		if x.Current {
			current++
		}
		if x.IP != "127.0.0.1" || x.UserAgent == "" || x.LastSeenAt == nil || x.CreatedAt.IsZero() || len(x.ID) != 24 {
			t.Errorf("session %+v lacks its details", x)
		}
	}
	if current != 1 {
		t.Errorf("%d sessions marked current", current)
	}
	ss, _ := a.store.Sessions(context.Background(), u.id)
	r := u.do("GET", "/api/account/sessions", nil)
	for _, x := range ss {
		if strings.Contains(string(r.body), x.ID) {
			t.Error("the list shows a stored session id")
		}
	}
	if r := u.do("DELETE", "/api/account/sessions/nope", nil); r.status != http.StatusNotFound {
		t.Errorf("unknown session: %d", r.status)
	}
	// Signing out everywhere signs this browser out too.
	u.mustJSON("DELETE", "/api/account/sessions", nil, http.StatusNoContent, nil)
	for _, c := range []*user{u, other} {
		if r := c.do("GET", "/api/auth/me", nil); r.status != http.StatusUnauthorized {
			t.Errorf("after signing out everywhere: %d", r.status)
		}
	}
}

// TestPasswordChange: the current password is required (and counted as a
// sign-in failure when wrong), the rules apply, and the new one works.
func TestPasswordChange(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	cases := []struct {
		name, current, next string
		want                int
		code                string
	}{
		{"wrong current password", "password124", strongPassword, http.StatusForbidden, "wrong_password"},
		{"too short", "password123", "short one", http.StatusUnprocessableEntity, "weak_password"},
		{"73 bytes", "password123", strings.Repeat("a", 73), http.StatusUnprocessableEntity, "weak_password"},
		{"common", "password123", "Password1234!", http.StatusUnprocessableEntity, "weak_password"},
	}
	for _, c := range cases {
		r := u.do("POST", "/api/account/password", map[string]string{"current_password": c.current, "new_password": c.next})
		if r.status != c.want || r.errorCode() != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.body, c.want, c.code)
		}
	}
	// Others' failed sign-ins do not keep the owner from changing it.
	a.srv.e.IPExtractor, _ = ipExtractor([]string{"127.0.0.1/32"})
	for range 20 {
		loginAs(a.anonymous(), "ann@example.com", "guess-password", "203.0.113.9")
	}
	if r := loginAs(a.anonymous(), "ann@example.com", "password123", "198.51.100.1"); r.status != http.StatusTooManyRequests {
		t.Fatalf("the account is not in a back-off window (%d): the next check proves nothing", r.status)
	}
	u.mustJSON("POST", "/api/account/password", map[string]string{"current_password": "password123", "new_password": strongPassword}, http.StatusNoContent, nil)
	a.srv.limits = newAuthLimits(1000, time.Now)
	anon := a.anonymous()
	if r := loginAs(anon, "ann@example.com", "password123", ""); r.status != http.StatusUnauthorized {
		t.Errorf("old password: %d", r.status)
	}
	if r := loginAs(anon, "ann@example.com", strongPassword, ""); r.status != http.StatusOK {
		t.Errorf("new password: %d", r.status)
	}
}

// TestAccountPageForms: the page lists the sessions and its forms work.
func TestAccountPageForms(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	other := a.signInAgain(u)
	r := u.do("GET", "/account", nil)
	body := string(r.body)
	if r.status != http.StatusOK || strings.Count(body, `class="item session"`) != 2 || !strings.Contains(body, "this browser") {
		t.Fatalf("account page: %d\n%s", r.status, body)
	}
	form := url.Values{"current_password": {"password123"}, "password": {strongPassword}, "password_confirm": {"something else entirely"}, "_csrf": {u.csrf}}
	if r := u.do("POST", "/account/password", form); r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "do not match") {
		t.Errorf("mismatched confirmation: %d", r.status)
	}
	form.Set("password_confirm", strongPassword)
	if r := u.do("POST", "/account/password", form); r.status != http.StatusOK || !strings.Contains(string(r.body), "Password changed") {
		t.Errorf("change password: %d", r.status)
	}
	if r := other.do("GET", "/api/auth/me", nil); r.status != http.StatusUnauthorized {
		t.Errorf("other browser after the change: %d", r.status)
	}
	if r := u.do("POST", "/account/sessions/delete", url.Values{"_csrf": {u.csrf}}); r.status != http.StatusSeeOther || r.header.Get("Location") != "/login" {
		t.Errorf("sign out everywhere: %d %s", r.status, r.header.Get("Location"))
	}
	if r := u.do("GET", "/account", nil); r.status != http.StatusSeeOther {
		t.Errorf("account page after signing out everywhere: %d", r.status)
	}
}
