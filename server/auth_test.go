package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"herd/models"
	"herd/server/auth"
	"herd/server/hub"
	"herd/server/limits"
)

func TestLoginRateLimit(t *testing.T) {
	a := newApp(t, withServer(func(o *Options) { o.LoginPerMinute = 3 }))
	a.newUserNoLogin("ann@example.com")
	anon := a.anonymous()
	var statuses []int
	for range 5 {
		r := anon.do("POST", "/api/auth/login", map[string]string{"email": "ann@example.com", "password": "wrong-password"})
		statuses = append(statuses, r.status)
	}
	want := []int{401, 401, 401, 429, 429}
	for i := range want {
		if statuses[i] != want[i] {
			t.Fatalf("statuses = %v, want %v", statuses, want)
		}
	}
	// The right password is refused too while limited: no oracle.
	r := anon.do("POST", "/api/auth/login", map[string]string{"email": "ann@example.com", "password": "password123"})
	if r.status != http.StatusTooManyRequests || r.header.Get("Set-Cookie") != "" {
		t.Errorf("limited login: %d, cookie %q", r.status, r.header.Get("Set-Cookie"))
	}
}

func (a *testApp) newUserNoLogin(email string) {
	a.t.Helper()
	hash, _ := a.srv.auth.HashPassword("password123")
	if _, err := a.store.CreateUser(context.Background(), email, hash, models.RoleUser, false); err != nil {
		a.t.Fatal(err)
	}
}

func TestSessionCookieAndRotation(t *testing.T) {
	a := newApp(t)
	a.newUserNoLogin("ann@example.com")
	anon := a.anonymous()
	login := func() (string, string) {
		r := anon.do("POST", "/api/auth/login", map[string]string{"email": "ann@example.com", "password": "password123"})
		if r.status != 200 {
			t.Fatalf("login: %d %s", r.status, r.body)
		}
		ck := r.header.Get("Set-Cookie")
		for _, attr := range []string{"HttpOnly", "SameSite=Lax", "Path=/"} {
			if !strings.Contains(ck, attr) {
				t.Errorf("session cookie %q lacks %s", ck, attr)
			}
		}
		for _, c := range anon.c.Jar.Cookies(mustURL(a.http.URL)) {
			if c.Name == sessionCookie {
				return c.Value, ck
			}
		}
		t.Fatal("no session cookie")
		return "", ""
	}
	first, _ := login()
	second, _ := login()
	if first == second {
		t.Error("signing in again kept the session id")
	}
	if _, _, err := a.store.SessionUser(context.Background(), auth.HashToken(first)); err == nil {
		t.Error("the previous session still works after a new sign-in")
	}
	// Sign-out ends the session.
	r := anon.do("POST", "/api/auth/logout", nil, "X-CSRF-Token", csrfOf(t, anon))
	if r.status != http.StatusNoContent {
		t.Fatalf("logout: %d %s", r.status, r.body)
	}
	if r := anon.do("GET", "/api/threads", nil); r.status != http.StatusUnauthorized {
		t.Errorf("after logout: %d, want 401", r.status)
	}
}

func csrfOf(t *testing.T, u *user) string {
	var me struct {
		CSRF string `json:"csrf_token"`
	}
	u.mustJSON("GET", "/api/auth/me", nil, http.StatusOK, &me)
	return me.CSRF
}

func TestSetupOnlyOnEmptyInstance(t *testing.T) {
	a := newApp(t)
	anon := a.anonymous()
	link := a.setupLink()
	page := anon.do("GET", link, nil)
	if page.status != 200 {
		t.Fatalf("setup page: %d", page.status)
	}
	form := url.Values{"email": {"admin@example.com"}, "password": {strongPassword}, "password_confirm": {strongPassword}, "_csrf": {preCSRFOf(t, anon)}, "token": {tokenOf(link)}}
	if r := anon.do("POST", "/setup", form); r.status != http.StatusSeeOther {
		t.Fatalf("setup: %d %s", r.status, r.body)
	}
	u, err := a.store.UserByEmail(context.Background(), "admin@example.com")
	if err != nil || u.Role != models.RoleAdmin {
		t.Fatalf("admin = %+v, %v", u, err)
	}
	// A second set-up is refused: it redirects and creates nothing.
	other := a.anonymous()
	other.do("GET", "/login", nil)
	if r := other.do("GET", "/setup", nil); r.status != http.StatusSeeOther {
		t.Errorf("setup page on a set-up instance: %d, want 303", r.status)
	}
	if n, _ := a.store.CountUsers(context.Background()); n != 1 {
		t.Errorf("%d users after a second set-up attempt", n)
	}
}

func TestEnsureAdminFromEnv(t *testing.T) {
	a := newApp(t)
	ctx := context.Background()
	if err := a.srv.EnsureAdmin(ctx, "ops@example.com", "short"); err == nil {
		t.Error("a short password was accepted")
	}
	if err := a.srv.EnsureAdmin(ctx, "ops@example.com", "long enough pw"); err != nil {
		t.Fatal(err)
	}
	if err := a.srv.EnsureAdmin(ctx, "other@example.com", "long enough pw"); err != nil {
		t.Fatal(err)
	}
	us, _ := a.store.Users(ctx)
	if len(us) != 1 || us[0].Email != "ops@example.com" || us[0].Role != models.RoleAdmin {
		t.Errorf("users = %+v, want only the first admin", us)
	}
}

func TestAdminManagesUsers(t *testing.T) {
	a := newApp(t)
	admin := a.newUser("admin@example.com", true)
	var created userJSON
	admin.mustJSON("POST", "/api/admin/users", map[string]string{"email": "bob@example.com", "password": strongPassword}, http.StatusCreated, &created)
	if created.Role != models.RoleUser {
		t.Errorf("new user role %q", created.Role)
	}
	if r := admin.do("POST", "/api/admin/users", map[string]string{"email": "bob@example.com", "password": strongPassword}); r.status != http.StatusConflict {
		t.Errorf("duplicate email: %d", r.status)
	}
	if r := admin.do("PATCH", "/api/admin/users/"+admin.id, map[string]string{"role": "user"}); r.status != http.StatusConflict || !strings.Contains(string(r.body), "last admin") {
		t.Errorf("demoting the last admin: %d %s", r.status, r.body)
	}
	if r := admin.do("DELETE", "/api/admin/users/"+admin.id, nil); r.status != http.StatusConflict {
		t.Errorf("deleting the last admin: %d", r.status)
	}
	if r := admin.do("PATCH", "/api/admin/users/"+created.ID, map[string]string{"role": "wizard"}); r.status != http.StatusUnprocessableEntity {
		t.Errorf("bad role: %d", r.status)
	}
	bob := a.anonymous()
	bob.mustJSON("POST", "/api/auth/login", map[string]string{"email": "bob@example.com", "password": strongPassword}, http.StatusOK, nil)
	admin.mustJSON("PATCH", "/api/admin/users/"+created.ID, map[string]bool{"disabled": true}, http.StatusOK, nil)
	if r := bob.do("GET", "/api/threads", nil); r.status != http.StatusUnauthorized {
		t.Errorf("disabled user's session: %d, want 401", r.status)
	}
	if r := bob.do("POST", "/api/auth/login", map[string]string{"email": "bob@example.com", "password": strongPassword}); r.status != http.StatusForbidden {
		t.Errorf("disabled user's login: %d, want 403", r.status)
	}
	admin.mustJSON("DELETE", "/api/admin/users/"+created.ID, nil, http.StatusNoContent, nil)
}

func TestHealthAndReadiness(t *testing.T) {
	a := newApp(t)
	anon := a.anonymous()
	if r := anon.do("GET", "/healthz", nil); r.status != 200 {
		t.Errorf("healthz: %d", r.status)
	}
	if r := anon.do("GET", "/readyz", nil); r.status != 200 {
		t.Errorf("readyz: %d %s", r.status, r.body)
	}
	_ = a.store.Close() // the database goes away: not ready
	if r := anon.do("GET", "/readyz", nil); r.status != http.StatusServiceUnavailable {
		t.Errorf("readyz without a database: %d, want 503", r.status)
	}
}

func TestSecurityHeaders(t *testing.T) {
	a := newApp(t)
	r := a.anonymous().do("GET", "/login", nil)
	for h, want := range map[string]string{
		"Content-Security-Policy": "script-src 'self'",
		"X-Content-Type-Options":  "nosniff",
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "same-origin",
	} {
		if !strings.Contains(r.header.Get(h), want) {
			t.Errorf("%s = %q, want %q", h, r.header.Get(h), want)
		}
	}
	if !strings.Contains(r.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Error("CSP lacks frame-ancestors 'none'")
	}
}

func TestPing(t *testing.T) {
	a := newApp(t, withHub(hub.Options{PingInterval: 50 * time.Millisecond}))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	conn, err := u.dial(th, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	f, err := readFrame(conn, 2*time.Second)
	if err != nil || f.Type != hub.FramePing || f.Seq != nil {
		t.Fatalf("first frame %+v, %v; want a ping with seq null", f, err)
	}
}

func TestRunRateLimitPerUser(t *testing.T) {
	a := newApp(t)
	a.srv.runLimiter = limits.NewLimiter(2, time.Now)
	u := a.newUser("ann@example.com", false)
	other := a.newUser("bob@example.com", false)
	var got []int
	for range 3 {
		th := u.newThread("t")
		got = append(got, u.do("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "hi"}).status)
		a.waitIdle(th)
	}
	if got[0] != 202 || got[1] != 202 || got[2] != http.StatusTooManyRequests {
		t.Errorf("statuses %v, want 202 202 429", got)
	}
	// Another user is not limited by ann's messages.
	th := other.newThread("t")
	if r := other.do("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "hi"}); r.status != 202 {
		t.Errorf("other user: %d", r.status)
	}
	a.waitIdle(th)
}

// TestLastAdminKeepsRunning: refusing to delete the last admin must not
// stop their run on the way.
func TestLastAdminKeepsRunning(t *testing.T) {
	a := newApp(t, withModels(demoModel("slow", 1500, 5)))
	admin := a.newUser("admin@example.com", true)
	th := admin.newThread("busy")
	runID := admin.startRun(th, "hello")
	if r := admin.do("DELETE", "/api/admin/users/"+admin.id, nil); r.status != http.StatusConflict {
		t.Fatalf("deleting the last admin: %d", r.status)
	}
	if got, ok := a.rt.ActiveRun(th); !ok || got != runID {
		t.Error("the refused deletion stopped the admin's run")
	}
	a.waitIdle(th)
	if r, _ := a.store.Run(context.Background(), th, runID); r.Status != "completed" {
		t.Errorf("run %s, want completed", r.Status)
	}
}

// strongPassword passes the password rules.
const strongPassword = "tall ocean lantern"

// setupLink is the path and query of the one-time set-up link.
func (a *testApp) setupLink() string {
	a.t.Helper()
	link, err := a.srv.SetupURL(context.Background(), "")
	if err != nil || link == "" {
		a.t.Fatalf("set-up link %q, %v", link, err)
	}
	return link
}

func tokenOf(link string) string { return mustURL(link).Query().Get("token") }

// preCSRFOf is the token a signed-out form shows u's browser now: bound
// to the cookie a signed-out page set in its jar.
func preCSRFOf(t *testing.T, u *user) string {
	t.Helper()
	return boundToCookie(t, u, u.a.srv.auth)
}

// boundToCookie is the signed-out form token svc gives u's browser now,
// by its cookie.
func boundToCookie(t *testing.T, u *user, svc *auth.Service) string {
	t.Helper()
	for _, c := range u.c.Jar.Cookies(mustURL(u.a.http.URL)) {
		if c.Name == preCSRFCookie {
			req := httptest.NewRequest("GET", "/login", nil)
			req.AddCookie(c)
			return svc.PageCSRF(echo.New().NewContext(req, httptest.NewRecorder()))
		}
	}
	t.Fatal("no pre-sign-in CSRF cookie")
	return ""
}

var formTokenField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// formToken is the CSRF token of the form on page r.
func formToken(t *testing.T, r response) string {
	t.Helper()
	m := formTokenField.FindSubmatch(r.body)
	if m == nil {
		t.Fatalf("no form token on the page (%d):\n%s", r.status, r.body)
	}
	return string(m[1])
}

// TestSignupSameAnswer: signing up with an address that has an account
// answers exactly as with a new one (status, redirect, cookies, body),
// and leaves the existing account as it was.
func TestSignupSameAnswer(t *testing.T) {
	a := newApp(t)
	a.srv.allowSignup = true
	a.newUserNoLogin("ann@example.com")
	signup := func(email string) response {
		anon := a.anonymous()
		anon.do("GET", "/signup", nil)
		return anon.do("POST", "/signup", url.Values{"email": {email}, "password": {strongPassword}, "password_confirm": {strongPassword}, "_csrf": {preCSRFOf(t, anon)}})
	}
	existing, fresh := signup("ann@example.com"), signup("new@example.com")
	cookieNames := func(r response) []string {
		var names []string
		for _, c := range (&http.Response{Header: r.header}).Cookies() {
			names = append(names, c.Name)
		}
		return names
	}
	if existing.status != http.StatusSeeOther || existing.status != fresh.status ||
		existing.header.Get("Location") != fresh.header.Get("Location") ||
		string(existing.body) != string(fresh.body) ||
		strings.Join(cookieNames(existing), ",") != strings.Join(cookieNames(fresh), ",") {
		t.Errorf("existing: %d %s %v %q; new: %d %s %v %q", existing.status, existing.header.Get("Location"), cookieNames(existing), existing.body, fresh.status, fresh.header.Get("Location"), cookieNames(fresh), fresh.body)
	}
	for _, n := range cookieNames(fresh) {
		if n == sessionCookie {
			t.Error("sign-up signed the new user in: that tells a new address from a taken one")
		}
	}
	anon := a.anonymous()
	if r := anon.do("GET", fresh.header.Get("Location"), nil); !strings.Contains(string(r.body), "If this address had no account") {
		t.Errorf("the sign-in page after sign-up lacks the notice")
	}
	if r := loginAs(anon, "ann@example.com", "password123", ""); r.status != http.StatusOK {
		t.Errorf("existing account's own password after a sign-up with its address: %d", r.status)
	}
	if r := loginAs(a.anonymous(), "ann@example.com", strongPassword, ""); r.status != http.StatusUnauthorized {
		t.Errorf("the sign-up's password signs in to the existing account: %d", r.status)
	}
	if r := loginAs(a.anonymous(), "new@example.com", strongPassword, ""); r.status != http.StatusOK {
		t.Errorf("new account: %d", r.status)
	}
}

// TestPreSignInCSRFIsBound: a signed-out form's token is bound to the
// browser's own random cookie. A token fetched in another browser (the
// attacker's) is refused with the victim's cookie on every signed-out
// form, and so is a cookie sent as its own token, the shape an older herd
// accepted, a tampered or an expired token; an attacker's cookie planted
// with its token is refused from the attacker's page; the browser's own
// token works, before and after a restart.
func TestPreSignInCSRFIsBound(t *testing.T) {
	a := newApp(t)
	a.srv.allowSignup = true
	link := a.setupLink()
	// A service on the same key whose clock is 25 hours behind: the
	// tokens it binds have expired.
	past, err := auth.New(context.Background(), auth.Options{Store: a.store, Now: func() time.Time { return time.Now().Add(-25 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	forms := []struct {
		page, action string
		fields       url.Values
		ok           int
	}{
		{link, "/setup", url.Values{"token": {tokenOf(link)}, "email": {"admin@example.com"}, "password": {strongPassword}, "password_confirm": {strongPassword}}, http.StatusSeeOther},
		{"/login", "/login", url.Values{"email": {"admin@example.com"}, "password": {strongPassword}}, http.StatusSeeOther},
		{"/signup", "/signup", url.Values{"email": {"new@example.com"}, "password": {strongPassword}, "password_confirm": {strongPassword}}, http.StatusSeeOther},
	}
	for _, f := range forms {
		t.Run(f.action, func(t *testing.T) {
			attacker, victim := a.anonymous(), a.anonymous()
			stolen := formToken(t, attacker.do("GET", f.page, nil))
			own := formToken(t, victim.do("GET", f.page, nil))
			var cookie string
			for _, c := range victim.c.Jar.Cookies(mustURL(a.http.URL)) {
				if c.Name == preCSRFCookie {
					cookie = c.Value
				}
			}
			post := func(tok string) int {
				form := url.Values{"_csrf": {tok}}
				for k, v := range f.fields {
					form[k] = v
				}
				return victim.do("POST", f.action, form).status
			}
			tampered := own[:len(own)-1] + "A"
			if strings.HasSuffix(own, "A") {
				tampered = own[:len(own)-1] + "B"
			}
			for _, c := range []struct{ name, tok string }{
				{"a token from another browser", stolen},
				{"the cookie as its own token", cookie},
				{"a tampered token", tampered},
				{"an expired token", boundToCookie(t, victim, past)},
				{"no token", ""},
			} {
				if got := post(c.tok); got != http.StatusForbidden {
					t.Errorf("%s: %d, want 403", c.name, got)
				}
			}
			// An attacker who can set cookies for the site plants their
			// own browser's cookie with their token; the page that posts
			// is theirs, and the browser says so.
			planted := a.anonymous()
			planted.c.Jar.SetCookies(mustURL(a.http.URL), attacker.c.Jar.Cookies(mustURL(a.http.URL)))
			form := url.Values{"_csrf": {stolen}}
			for k, v := range f.fields {
				form[k] = v
			}
			for _, hdr := range [][]string{{"Origin", "http://evil.example"}, {"Sec-Fetch-Site", "same-site"}, {"Origin", "null"}} {
				if r := planted.do("POST", f.action, form, hdr...); r.status != http.StatusForbidden {
					t.Errorf("a planted cookie, its token, %s: %s: %d, want 403", hdr[0], hdr[1], r.status)
				}
			}
			if got := post(own); got != f.ok {
				t.Errorf("the browser's own token: %d, want %d", got, f.ok)
			}
		})
	}
	// A restart (a new server on the same database) keeps the key.
	anon := a.anonymous()
	tok := formToken(t, anon.do("GET", "/login", nil))
	restarted := a.newServer(func(*Options) {})
	form := url.Values{"email": {"nobody@example.com"}, "password": {strongPassword}, "_csrf": {tok}}
	req := httptest.NewRequest("POST", "http://127.0.0.1/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range anon.c.Jar.Cookies(mustURL(a.http.URL)) {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	restarted.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("a token issued before the restart, after it: %d, want 401 (the sign-in checked, not refused as CSRF)", rec.Code)
	}
}

// TestHostPrefixCookies: with an https public_url, the session and form
// cookies carry the __Host- prefix, Secure, Path=/ and no Domain.
func TestHostPrefixCookies(t *testing.T) {
	a := newApp(t)
	a.newUserNoLogin("ann@example.com")
	s := a.newServer(func(o *Options) { o.PublicURL = "https://herd.example.com" })
	page := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "https://herd.example.com/login", nil)
	s.ServeHTTP(page, req)
	pre := page.Result().Cookies()
	if len(pre) != 1 || pre[0].Name != "__Host-herd_csrf" || !pre[0].Secure || pre[0].Path != "/" || pre[0].Domain != "" {
		t.Fatalf("form cookie %+v", pre)
	}
	body := url.Values{"email": {"ann@example.com"}, "password": {"password123"}, "_csrf": {formToken(t, response{body: page.Body.Bytes()})}}
	req = httptest.NewRequest("POST", "https://herd.example.com/login", strings.NewReader(body.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(pre[0])
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	var sess *http.Cookie
	for _, c := range rec.Result().Cookies() {
		if c.Name == "__Host-herd_session" {
			sess = c
		}
	}
	if rec.Code != http.StatusSeeOther || sess == nil || !sess.Secure || !sess.HttpOnly || sess.Path != "/" || sess.Domain != "" {
		t.Fatalf("sign-in: %d, session cookie %+v", rec.Code, sess)
	}
	// The unprefixed name is not read: a sibling subdomain could set it.
	req = httptest.NewRequest("GET", "https://herd.example.com/api/auth/me", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: sess.Value})
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("unprefixed cookie: %d, want 401", rec.Code)
	}
	req = httptest.NewRequest("GET", "https://herd.example.com/api/auth/me", nil)
	req.AddCookie(sess)
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("prefixed cookie: %d, want 200", rec.Code)
	}
}
