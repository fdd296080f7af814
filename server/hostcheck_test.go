package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"herd/models"
	"herd/server/auth"
	"herd/server/render"
	"herd/static"
)

// rawGet sends method path with the given Host header and no cookies.
func (a *testApp) withHost(method, path, host string, body url.Values) response {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(body.Encode())
	}
	req, err := http.NewRequest(method, a.http.URL+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	req.Host = host
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: b, header: resp.Header}
}

// newServer builds a second Server on a's store, hub and runtime with
// changed options, served on its own listener.
func (a *testApp) newServer(change func(*Options)) *Server {
	a.t.Helper()
	o := Options{Store: a.store, Runtime: a.rt, Hub: a.hub, Settings: a.settings, Console: a.console, Markdown: render.NewMarkdown(), Static: static.FS, BcryptCost: 4, LoginPerMinute: 1000, RunsPerMinute: 10000, Files: a.opts.Files}
	change(&o)
	s, err := New(o)
	if err != nil {
		a.t.Fatal(err)
	}
	return s
}

// TestHostAllowList: a DNS-rebinding page reaches herd under its own name;
// every route but the health probes refuses a Host herd does not serve.
func TestHostAllowList(t *testing.T) {
	a := newApp(t, withAuth(func(o *auth.Options) {
		o.PublicURL, o.AllowedHosts = "https://herd.example.com", []string{"herd.lan", "192.168.1.20"}
	}))
	cases := []struct {
		host, path string
		want       int
	}{
		{"evil.example", "/setup", http.StatusMisdirectedRequest},
		{"evil.example:8080", "/login", http.StatusMisdirectedRequest},
		{"evil.example", "/", http.StatusMisdirectedRequest},
		{"evil.example", "/api/auth/me", http.StatusMisdirectedRequest},
		{"evil.example", "/static/app.css", http.StatusMisdirectedRequest},
		{"localhost.evil.example", "/login", http.StatusMisdirectedRequest},
		{"127.0.0.2", "/login", http.StatusMisdirectedRequest},
		{"evil.example", "/healthz", http.StatusOK},
		{"localhost:1234", "/login", http.StatusSeeOther}, // no user yet: on to set-up
		{"LOCALHOST", "/login", http.StatusSeeOther},
		{"127.0.0.1:9", "/login", http.StatusSeeOther},
		{"[::1]:8080", "/login", http.StatusSeeOther},
		{"herd.example.com", "/login", http.StatusSeeOther},
		{"herd.example.com.", "/login", http.StatusSeeOther},
		{"herd.lan:8080", "/login", http.StatusSeeOther},
		{"192.168.1.20", "/login", http.StatusSeeOther},
	}
	for _, c := range cases {
		r := a.withHost("GET", c.path, c.host, nil)
		if r.status != c.want {
			t.Errorf("Host %q %s: %d, want %d: %s", c.host, c.path, r.status, c.want, r.body)
		}
		if r.status == http.StatusMisdirectedRequest && r.header.Get("Set-Cookie") != "" {
			t.Errorf("Host %q %s: refused but set a cookie", c.host, c.path)
		}
	}
	r := a.withHost("GET", "/api/threads", "evil.example", nil)
	var e struct {
		Error struct{ Code, Message string }
	}
	if json.Unmarshal(r.body, &e) != nil || e.Error.Code != "unknown_host" || !strings.Contains(e.Error.Message, "server.allowed_hosts") {
		t.Errorf("API refusal %s, want code unknown_host naming server.allowed_hosts", r.body)
	}
}

// TestSetupToken: the set-up form needs the one-time token herd prints;
// a rebinding page has neither the token nor an accepted Host.
func TestSetupToken(t *testing.T) {
	a := newApp(t)
	anon := a.anonymous()
	link := a.setupLink()
	if !strings.HasPrefix(link, "/setup?token=") {
		t.Fatalf("link %q", link)
	}
	r := anon.do("GET", "/setup", nil)
	if r.status != http.StatusOK || strings.Contains(string(r.body), `action="/setup"`) || !strings.Contains(string(r.body), "set-up link herd printed") {
		t.Errorf("set-up page without a token: %d, shows the form or no instructions", r.status)
	}
	if r := anon.do("GET", "/setup?token=guess", nil); r.status != http.StatusForbidden || strings.Contains(string(r.body), `action="/setup"`) {
		t.Errorf("set-up page with a wrong token: %d", r.status)
	}
	form := func(tok string) url.Values {
		return url.Values{"email": {"admin@example.com"}, "password": {strongPassword}, "password_confirm": {strongPassword}, "_csrf": {preCSRFOf(t, anon)}, "token": {tok}}
	}
	for _, tok := range []string{"", "guess", tokenOf(link) + "x"} {
		if r := anon.do("POST", "/setup", form(tok)); r.status != http.StatusForbidden {
			t.Errorf("set-up with token %q: %d, want 403", tok, r.status)
		}
	}
	// The right token from a rebinding Host is refused before any handler.
	f := form(tokenOf(link))
	if r := a.withHost("POST", "/setup", "evil.example", f); r.status != http.StatusMisdirectedRequest {
		t.Errorf("set-up from Host evil.example: %d, want 421", r.status)
	}
	if n, _ := a.store.CountUsers(context.Background()); n != 0 {
		t.Fatalf("%d users after refused set-ups", n)
	}
	if r := anon.do("POST", "/setup", f); r.status != http.StatusSeeOther || r.header.Get("Location") != "/" {
		t.Fatalf("set-up with the token: %d %s", r.status, r.body)
	}
	// Once: the link is gone and a second post creates nobody.
	if l, _ := a.srv.SetupURL(context.Background(), ""); l != "" {
		t.Errorf("set-up link after set-up: %q", l)
	}
	other := a.anonymous()
	other.do("GET", "/login", nil)
	f2 := url.Values{"email": {"eve@example.com"}, "password": {strongPassword}, "password_confirm": {strongPassword}, "_csrf": {preCSRFOf(t, other)}, "token": {tokenOf(link)}}
	if r := other.do("POST", "/setup", f2); r.status != http.StatusSeeOther || r.header.Get("Location") != "/login" {
		t.Errorf("second set-up: %d → %s", r.status, r.header.Get("Location"))
	}
	if n, _ := a.store.CountUsers(context.Background()); n != 1 {
		t.Errorf("%d users, want 1", n)
	}
}

// TestSetupChecksUsersFirst: on a set-up instance the form is refused
// before its password is hashed (at cost 15, a hash takes seconds).
func TestSetupChecksUsersFirst(t *testing.T) {
	a := newApp(t)
	a.newUserNoLogin("ann@example.com")
	a.reauth(func(o *auth.Options) { o.BcryptCost = 15 })
	anon := a.anonymous()
	anon.do("GET", "/login", nil)
	start := time.Now()
	r := anon.do("POST", "/setup", url.Values{"email": {"x@example.com"}, "password": {strongPassword}, "password_confirm": {strongPassword}, "_csrf": {preCSRFOf(t, anon)}, "token": {"whatever"}})
	if took := time.Since(start); r.status != http.StatusSeeOther || took > 500*time.Millisecond {
		t.Errorf("set-up on a set-up instance: %d in %v, want a quick 303", r.status, took)
	}
	if n, _ := a.store.CountUsers(context.Background()); n != 1 {
		t.Errorf("%d users", n)
	}
}

// TestSetupURLBase: main prints the link on the listen address, a
// wildcard one made browsable.
func TestSetupURLBase(t *testing.T) {
	for in, want := range map[string]string{"0.0.0.0:8080": "127.0.0.1:8080", "[::]:80": "[::1]:80", "127.0.0.1:9": "127.0.0.1:9", "192.168.1.2:8080": "192.168.1.2:8080"} {
		if got := BrowsableAddr(in); got != want {
			t.Errorf("BrowsableAddr(%q) = %q, want %q", in, got, want)
		}
	}
	a := newApp(t)
	link, err := a.srv.SetupURL(context.Background(), "http://127.0.0.1:8080/")
	if err != nil || !strings.HasPrefix(link, "http://127.0.0.1:8080/setup?token=") || len(tokenOf(link)) < 40 {
		t.Errorf("link %q, %v", link, err)
	}
	if _, err := a.store.CreateUser(context.Background(), "a@example.com", "x", models.RoleAdmin, true); err != nil {
		t.Fatal(err)
	}
	if link, _ := a.srv.SetupURL(context.Background(), "http://127.0.0.1:8080"); link != "" {
		t.Errorf("link once a user exists: %q", link)
	}
}
