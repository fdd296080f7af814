package e2e

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"herd/internal/pgtest"
)

// TestTokenRevocationRealBinary: through the real binary, an API token
// can neither mint nor list tokens, and the sockets it opened close (4401)
// whichever way it ends — deleted by its owner's session (API or settings
// page), revoking itself, or its user disabled by an admin — on one
// instance, and across two on PostgreSQL, where the token's socket is on
// the instance that did not revoke it.
func TestTokenRevocationRealBinary(t *testing.T) {
	t.Run("one instance", func(t *testing.T) {
		p := startHerd(t, t.TempDir())
		tokenRevocations(t, p, p)
		stopHerd(t, p)
	})
	t.Run("two instances", func(t *testing.T) {
		env := clusterEnv(pgtest.DSN(t))
		a := startHerdWith(t, t.TempDir(), env...)
		b := startHerdWith(t, t.TempDir(), env...)
		tokenRevocations(t, a, b)
		stopHerd(t, a)
		stopHerd(t, b)
	})
}

// tokenRevocations revokes a token on a in each way while its socket and
// a socket of its owner's session are open on b.
func tokenRevocations(t *testing.T, a, b *proc) {
	admin := a.signIn()
	cases := []struct {
		name         string
		revoke       func(owner *client, id, token string)
		sessionStays bool
	}{
		{"deleted by the owner's session", func(owner *client, id, _ string) {
			owner.call("DELETE", "/api/tokens/"+id, nil, nil)
		}, true},
		{"deleted on the settings page", func(owner *client, id, _ string) {
			resp, err := owner.http.PostForm(owner.base+"/settings/tokens/"+id+"/delete", url.Values{"_csrf": {owner.csrf}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}, true},
		{"revoking itself", func(owner *client, _, token string) {
			if code, body := bearerCall(t, owner.base, "DELETE", "/api/tokens/current", token); code != http.StatusNoContent {
				t.Fatalf("a token revoking itself: %d %s", code, body)
			}
		}, true},
		{"its user disabled by an admin", func(owner *client, _, _ string) {
			var u struct {
				User struct{ ID string } `json:"user"`
			}
			owner.call("GET", "/api/auth/me", nil, &u)
			admin.call("PATCH", "/api/admin/users/"+u.User.ID, map[string]bool{"disabled": true}, nil)
		}, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			email := "user" + string(rune('a'+i)) + "@example.com"
			admin.call("POST", "/api/admin/users", map[string]string{"email": email, "password": "tall ocean lantern"}, nil)
			onA, onB := a.signInAs(email, "tall ocean lantern"), b.signInAs(email, "tall ocean lantern")
			var tok struct{ ID, Token string }
			onA.call("POST", "/api/tokens", map[string]string{"name": "script"}, &tok)
			if code, body := bearerCall(t, a.url, "POST", "/api/tokens", tok.Token); code != http.StatusForbidden || !strings.Contains(body, "session_required") {
				t.Errorf("the token minting a token: %d %s, want 403 session_required", code, body)
			}
			if code, _ := bearerCall(t, b.url, "GET", "/api/tokens", tok.Token); code != http.StatusForbidden {
				t.Errorf("the token listing tokens: %d, want 403", code)
			}
			var th struct{ ID string }
			onB.call("POST", "/api/threads", map[string]string{"title": "watched"}, &th)
			tokenSocket, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(b.url, "http")+"/api/threads/"+th.ID+"/stream", http.Header{"Authorization": {"Bearer " + tok.Token}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			defer tokenSocket.Close()
			session := dialStream(t, b, onB, th.ID)
			time.Sleep(100 * time.Millisecond) // both sockets past their replay

			c.revoke(onA, tok.ID, tok.Token)
			if err := closedWith(tokenSocket, 10*time.Second); !websocket.IsCloseError(err, 4401) {
				t.Errorf("the token's socket on the other instance: %v, want close 4401", err)
			}
			err = closedWith(session, time.Second)
			switch {
			case c.sessionStays && !isTimeoutErr(err):
				t.Errorf("the session's socket: %v, want it open", err)
			case !c.sessionStays && !websocket.IsCloseError(err, 4401):
				t.Errorf("the session's socket: %v, want close 4401", err)
			}
			if code, _ := bearerCall(t, b.url, "GET", "/api/threads", tok.Token); code != http.StatusUnauthorized {
				t.Errorf("the token after: %d, want 401", code)
			}
		})
	}
}

// bearerCall sends a request with an API token and no body.
func bearerCall(t *testing.T, base, method, path, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	return resp.StatusCode, b.String()
}

// closedWith reads conn until it fails or wait passes, and returns why.
func closedWith(conn *websocket.Conn, wait time.Duration) error {
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	for {
		if _, _, err := conn.ReadMessage(); err != nil {
			return err
		}
	}
}

func isTimeoutErr(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}
