package server

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestLongPasswordIs422: a password over bcrypt's 72 bytes is a clear
// 422 wherever one is set, never a 500.
func TestLongPasswordIs422(t *testing.T) {
	long := strings.Repeat("x", 70) + "yz!" // 73 bytes
	a := newApp(t)
	anon := a.anonymous()
	link := a.setupLink()
	anon.do("GET", link, nil)
	r := anon.do("POST", "/setup", url.Values{"email": {"admin@example.com"}, "password": {long}, "password_confirm": {long}, "_csrf": {preCSRFOf(t, anon)}, "token": {tokenOf(link)}})
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "72 bytes") {
		t.Errorf("set-up: %d", r.status)
	}
	admin := a.newUser("admin@example.com", true)
	if r := admin.do("POST", "/api/admin/users", map[string]string{"email": "bob@example.com", "password": long}); r.status != http.StatusUnprocessableEntity || r.errorCode() != "weak_password" {
		t.Errorf("admin create: %d %s", r.status, r.body)
	}
	if r := admin.do("POST", "/api/account/password", map[string]string{"current_password": "password123", "new_password": long}); r.status != http.StatusUnprocessableEntity {
		t.Errorf("password change: %d %s", r.status, r.body)
	}
	a.srv.allowSignup = true
	anon.do("GET", "/signup", nil)
	r = anon.do("POST", "/signup", url.Values{"email": {"carl@example.com"}, "password": {long}, "password_confirm": {long}, "_csrf": {preCSRFOf(t, anon)}})
	if r.status != http.StatusUnprocessableEntity {
		t.Errorf("sign-up: %d", r.status)
	}
	// Signing in with one is just a wrong password.
	if r := loginAs(anon, "admin@example.com", long, ""); r.status != http.StatusUnauthorized {
		t.Errorf("sign-in: %d", r.status)
	}
}
