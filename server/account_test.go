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

	"herd/server/limits"
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

// TestTokenRevokeClosesSocket: the sockets an API token opened close
// (4401) whichever way the token ends — deleted by its owner's session
// (API or settings page), revoking itself, or its user disabled or
// deleted by an admin — and the token no longer works; a socket of the
// owner's session stays unless the user's rights changed.
func TestTokenRevokeClosesSocket(t *testing.T) {
	cases := []struct {
		name         string
		revoke       func(t *testing.T, admin, owner *user, id, token string)
		sessionStays bool
	}{
		{"deleted by the owner's session", func(t *testing.T, _, owner *user, id, _ string) {
			owner.mustJSON("DELETE", "/api/tokens/"+id, nil, http.StatusNoContent, nil)
		}, true},
		{"deleted on the settings page", func(t *testing.T, _, owner *user, id, _ string) {
			if r := owner.do("POST", "/settings/tokens/"+id+"/delete", url.Values{"_csrf": {owner.csrf}}); r.status != http.StatusSeeOther {
				t.Fatalf("settings page delete: %d", r.status)
			}
		}, true},
		{"revoking itself", func(t *testing.T, _, owner *user, _, token string) {
			if r := owner.a.anonymous().do("DELETE", "/api/tokens/current", nil, "Authorization", "Bearer "+token); r.status != http.StatusNoContent {
				t.Fatalf("self-revocation: %d %s", r.status, r.body)
			}
		}, true},
		{"its user disabled by an admin", func(t *testing.T, admin, owner *user, _, _ string) {
			admin.mustJSON("PATCH", "/api/admin/users/"+owner.id, map[string]bool{"disabled": true}, http.StatusOK, nil)
		}, false},
		{"its user deleted by an admin", func(t *testing.T, admin, owner *user, _, _ string) {
			admin.mustJSON("DELETE", "/api/admin/users/"+owner.id, nil, http.StatusNoContent, nil)
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newApp(t)
			admin := a.newUser("admin@example.com", true)
			u := a.newUser("ann@example.com", false)
			th := u.newThread("t")
			var tok struct{ ID, Token string }
			u.mustJSON("POST", "/api/tokens", map[string]string{"name": "script"}, http.StatusCreated, &tok)
			hdr := http.Header{"Authorization": {"Bearer " + tok.Token}}
			var conns []*websocket.Conn
			for range 2 {
				conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(a.http.URL, "http")+"/api/threads/"+th+"/stream", hdr)
				if err != nil {
					t.Fatalf("dial with token: %v %v", err, resp)
				}
				defer conn.Close()
				conns = append(conns, conn)
			}
			session, err := u.dial(th, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer session.Close()
			c.revoke(t, admin, u, tok.ID, tok.Token)
			for _, conn := range conns {
				expectClosed(t, conn, 4401)
			}
			if c.sessionStays {
				if _, err := readFrame(session, 300*time.Millisecond); err != nil && !isTimeout(err) {
					t.Errorf("the session's socket ended too: %v", err)
				}
			} else {
				expectClosed(t, session, 4401)
			}
			if r := a.anonymous().do("GET", "/api/threads", nil, "Authorization", "Bearer "+tok.Token); r.status != http.StatusUnauthorized {
				t.Errorf("the token after: %d, want 401", r.status)
			}
		})
	}
}

// TestTokensNeedASession: an API token can neither create, list nor
// delete tokens, nor list or end sessions, nor change the password — by
// the API or the pages — and is told why; it can revoke itself, and a
// session can do all of it.
func TestTokensNeedASession(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	var tok, other struct{ ID, Token string }
	u.mustJSON("POST", "/api/tokens", map[string]string{"name": "script"}, http.StatusCreated, &tok)
	u.mustJSON("POST", "/api/tokens", map[string]string{"name": "other"}, http.StatusCreated, &other)
	bearer := a.anonymous()
	auth := []string{"Authorization", "Bearer " + tok.Token}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/api/tokens", nil},
		{"POST", "/api/tokens", map[string]string{"name": "minted"}},
		{"DELETE", "/api/tokens/" + other.ID, nil},
		{"DELETE", "/api/tokens/" + tok.ID, nil},
		{"GET", "/api/account/sessions", nil},
		{"DELETE", "/api/account/sessions", nil},
		{"POST", "/api/account/password", map[string]string{"current_password": "password123", "new_password": strongPassword}},
		{"GET", "/settings", nil},
		{"POST", "/settings/tokens", url.Values{"name": {"minted"}}},
		{"POST", "/settings/tokens/" + other.ID + "/delete", url.Values{}},
		{"GET", "/account", nil},
		{"POST", "/account/password", url.Values{"current_password": {"password123"}, "password": {strongPassword}, "password_confirm": {strongPassword}}},
		{"POST", "/account/sessions/delete", url.Values{}},
	} {
		r := bearer.do(c.method, c.path, c.body, auth...)
		if r.status != http.StatusForbidden || !strings.Contains(string(r.body), "an API token cannot manage") {
			t.Errorf("%s %s with a token: %d %.200s, want 403 saying a session is needed", c.method, c.path, r.status, r.body)
		}
	}
	if r := bearer.do("GET", "/api/tokens", nil, auth...); r.errorCode() != "session_required" {
		t.Errorf("error code %q, want session_required", r.errorCode())
	}
	var list struct{ Tokens []tokenJSON }
	u.mustJSON("GET", "/api/tokens", nil, http.StatusOK, &list)
	if len(list.Tokens) != 2 {
		t.Errorf("%d tokens after the token's attempts, want the 2 the session made", len(list.Tokens))
	}
	if r := u.do("GET", "/api/auth/me", nil); r.status != http.StatusOK {
		t.Errorf("the session after the token's attempts: %d", r.status)
	}
	// A session has no token to revoke as "current".
	if r := u.do("DELETE", "/api/tokens/current", nil); r.status != http.StatusBadRequest {
		t.Errorf("DELETE /api/tokens/current with a session: %d, want 400", r.status)
	}
	if r := bearer.do("DELETE", "/api/tokens/current", nil, auth...); r.status != http.StatusNoContent {
		t.Fatalf("a token revoking itself: %d %s", r.status, r.body)
	}
	if r := bearer.do("GET", "/api/threads", nil, auth...); r.status != http.StatusUnauthorized {
		t.Errorf("the token after revoking itself: %d, want 401", r.status)
	}
	u.mustJSON("GET", "/api/tokens", nil, http.StatusOK, &list)
	if len(list.Tokens) != 1 || list.Tokens[0].ID != other.ID {
		t.Errorf("tokens after the self-revocation: %+v, want only the other", list.Tokens)
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
	a.srv.e.IPExtractor, _ = limits.IPExtractor([]string{"127.0.0.1/32"})
	for range 20 {
		loginAs(a.anonymous(), "ann@example.com", "guess-password", "203.0.113.9")
	}
	if r := loginAs(a.anonymous(), "ann@example.com", "password123", "198.51.100.1"); r.status != http.StatusTooManyRequests {
		t.Fatalf("the account is not in a back-off window (%d): the next check proves nothing", r.status)
	}
	u.mustJSON("POST", "/api/account/password", map[string]string{"current_password": "password123", "new_password": strongPassword}, http.StatusNoContent, nil)
	a.reauth(nil) // fresh limits
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
