package server

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"html"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"herd/internal/oidctest"
	"herd/models"
	"herd/server/sso"
)

// The test provider's people: an admin by group, a plain user, one of a
// domain herd does not allow, and one whose email is not verified.
var ssoUsers = []oidctest.User{
	{ID: "alice-sub", Username: "alice", Password: "verysecure", Email: "alice@example.com", EmailVerified: true, Groups: []string{"herd-admins", "staff"}},
	{ID: "bob-sub", Username: "bob", Password: "verysecure", Email: "bob@example.com", EmailVerified: true, Groups: []string{"staff"}},
	{ID: "eve-sub", Username: "eve", Password: "verysecure", Email: "eve@elsewhere.org", EmailVerified: true},
	{ID: "una-sub", Username: "una", Password: "verysecure", Email: "una@example.com", EmailVerified: false},
}

// ssoApp is herd with the test provider as "test", and a local admin so
// the sign-in page is not the set-up page.
type ssoApp struct {
	*testApp
	idp   *oidctest.Provider
	clock atomic.Int64 // nanoseconds the server's clock is ahead
}

func newSSOApp(t *testing.T, adjust ...func(*Options)) *ssoApp {
	t.Helper()
	idp := oidctest.Start(t, ssoUsers, oidctest.Client{ID: "herd", Secret: "herd-secret"}, oidctest.Client{ID: "other", Secret: "other-secret"})
	s := &ssoApp{idp: idp}
	s.testApp = newApp(t, func(c *appConfig) {
		c.server = func(o *Options) {
			o.Now = func() time.Time { return time.Now().Add(time.Duration(s.clock.Load())) }
			o.OIDCProviders = []sso.ProviderConfig{{
				Name: "test", DisplayName: "Test IdP", Issuer: idp.Issuer, ClientID: "herd", ClientSecret: "herd-secret",
				AdminClaim: &sso.ClaimMatch{Claim: "groups", Value: "herd-admins"}, AllowedDomains: []string{"example.com"},
			}}
			for _, f := range adjust {
				f(o)
			}
		}
	})
	s.localUser("root@example.com", true)
	return s
}

// localUser makes a user with the password password123 in the store,
// signing nobody in (the switch may refuse it).
func (s *ssoApp) localUser(email string, admin bool) *models.User {
	s.t.Helper()
	role := models.RoleUser
	if admin {
		role = models.RoleAdmin
	}
	hash, err := s.srv.auth.HashPassword("password123")
	if err != nil {
		s.t.Fatal(err)
	}
	u, err := s.store.CreateUser(context.Background(), email, hash, role, false)
	if err != nil {
		s.t.Fatal(err)
	}
	return u
}

// browser is a signed-out client that keeps cookies and follows no
// redirect.
func (s *ssoApp) browser() *user {
	jar, _ := cookiejar.New(nil)
	return &user{a: s.testApp, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// start clicks the provider's button on the sign-in page and returns
// the provider's authorization URL herd sent the browser to.
func (s *ssoApp) start(b *user) *url.URL {
	s.t.Helper()
	r := b.do("GET", "/auth/oidc/test/start?next=/threads/new", nil)
	if r.status != http.StatusSeeOther {
		s.t.Fatalf("start: %d %s", r.status, r.body)
	}
	loc, err := url.Parse(r.header.Get("Location"))
	if err != nil || !strings.HasPrefix(loc.String(), s.idp.Issuer) {
		s.t.Fatalf("start sent the browser to %q, not the provider", r.header.Get("Location"))
	}
	return loc
}

// atProvider signs username in at the provider and returns herd's
// callback path it sends the browser back to.
func (s *ssoApp) atProvider(b *user, authURL *url.URL, username string) string {
	s.t.Helper()
	cb, err := oidctest.SignIn(context.Background(), b.c, authURL.String(), username, "verysecure")
	if err != nil {
		s.t.Fatal(err)
	}
	if !strings.HasPrefix(cb.String(), s.http.URL+"/auth/oidc/test/callback") {
		s.t.Fatalf("the provider sent the browser to %s", cb)
	}
	return cb.RequestURI()
}

// signOn runs a whole sign-in of username and returns the browser and
// herd's answer to the callback.
func (s *ssoApp) signOn(username string) (*user, response) {
	s.t.Helper()
	b := s.browser()
	return b, b.do("GET", s.atProvider(b, s.start(b), username), nil)
}

// me is the browser's user as /api/auth/me says, with its CSRF token
// kept for later posts; nil when signed out.
func (b *user) me(t *testing.T) *userJSON {
	t.Helper()
	var out struct {
		User userJSON `json:"user"`
		CSRF string   `json:"csrf_token"`
	}
	r := b.do("GET", "/api/auth/me", nil)
	if r.status == http.StatusUnauthorized {
		return nil
	}
	if r.status != http.StatusOK {
		t.Fatalf("me: %d %s", r.status, r.body)
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	b.csrf = out.CSRF
	return &out.User
}

func TestSSOSignInCreatesUsersAndMapsTheAdminClaim(t *testing.T) {
	s := newSSOApp(t)
	for _, tc := range []struct {
		username, email, role string
		admin                 int
	}{
		{"alice", "alice@example.com", models.RoleAdmin, http.StatusOK},
		{"bob", "bob@example.com", models.RoleUser, http.StatusForbidden},
	} {
		t.Run(tc.username, func(t *testing.T) {
			b, r := s.signOn(tc.username)
			if r.status != http.StatusSeeOther || r.header.Get("Location") != "/threads/new" {
				t.Fatalf("callback: %d to %q, want 303 to /threads/new; %s", r.status, r.header.Get("Location"), r.body)
			}
			me := b.me(t)
			if me == nil || me.Email != tc.email || me.Role != tc.role {
				t.Fatalf("me = %+v, want %s as %s", me, tc.email, tc.role)
			}
			if got := b.do("GET", "/admin", nil).status; got != tc.admin {
				t.Errorf("GET /admin: %d, want %d", got, tc.admin)
			}
			ids, err := s.store.Identities(context.Background(), me.ID)
			if err != nil || len(ids) != 1 || ids[0].Subject != tc.username+"-sub" || ids[0].Issuer != s.idp.Issuer {
				t.Errorf("identities = %+v, %v", ids, err)
			}
		})
	}
	// A second sign-in finds the same user, and the claim removes the
	// role as it granted it.
	before, _ := s.store.UserByEmail(context.Background(), "alice@example.com")
	s.idp.SetGroups("alice-sub", "staff")
	b, r := s.signOn("alice")
	if r.status != http.StatusSeeOther {
		t.Fatalf("second sign-in: %d %s", r.status, r.body)
	}
	if me := b.me(t); me.ID != before.ID || me.Role != models.RoleUser {
		t.Errorf("after the group was removed: %+v, want user %s as user", me, before.ID)
	}
	if n, _ := s.store.CountUsers(context.Background()); n != 3 {
		t.Errorf("%d users, want 3 (root, alice, bob)", n)
	}
	// Each change a sign-on made is on record, by the person signing in,
	// naming the provider; a sign-in that changed nothing leaves none.
	entries, _, err := s.store.Audit(context.Background(), models.AuditFilter{TargetID: before.ID}, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Action+" "+e.ActorEmail+" "+string(e.Before)+" → "+string(e.After))
	}
	if len(entries) != 3 || entries[0].Action != models.AuditUserRole || entries[1].Action != models.AuditUserRole || entries[2].Action != models.AuditUserCreate ||
		!strings.Contains(string(entries[0].After), `"role":"user"`) || !strings.Contains(string(entries[0].After), "admin claim of") ||
		!strings.Contains(string(entries[1].Before), `"role":"user"`) || !strings.Contains(string(entries[1].After), `"role":"admin"`) ||
		!strings.Contains(string(entries[2].After), `"subject":"alice-sub"`) || entries[2].ActorEmail != "alice@example.com" {
		t.Errorf("alice's audit trail, newest first:\n%s\nwant the claim's removal, its grant, the creation", strings.Join(got, "\n"))
	}
}

// TestSSOAccountHasNoPassword: an account made by single sign-on has no
// password to change, and its page says so.
func TestSSOAccountHasNoPassword(t *testing.T) {
	s := newSSOApp(t)
	b, _ := s.signOn("bob")
	b.me(t)
	r := b.do("POST", "/api/account/password", map[string]string{"current_password": "", "new_password": "a long new passphrase"})
	if r.status != http.StatusConflict || r.errorCode() != "no_password" {
		t.Errorf("password change: %d %s, want 409 no_password", r.status, r.body)
	}
	page := string(b.do("GET", "/account", nil).body)
	if strings.Contains(page, `action="/account/password"`) || !strings.Contains(page, "You sign in with single sign-on") {
		t.Errorf("the account page offers a password change:\n%s", page)
	}
}

func TestSSORefusesWhomTheRulesLeaveOut(t *testing.T) {
	s := newSSOApp(t)
	for _, tc := range []struct{ username, email, want string }{
		{"eve", "eve@elsewhere.org", "accounts of elsewhere.org cannot sign in to herd with Test IdP"},
		{"una", "una@example.com", "did not confirm that your email address is verified"},
	} {
		t.Run(tc.username, func(t *testing.T) {
			b, r := s.signOn(tc.username)
			if r.status != http.StatusForbidden || !strings.Contains(string(r.body), tc.want) {
				t.Fatalf("callback: %d, want 403 saying %q:\n%s", r.status, tc.want, r.body)
			}
			if b.me(t) != nil {
				t.Error("signed in anyway")
			}
			if _, err := s.store.UserByEmail(context.Background(), tc.email); err == nil {
				t.Error("a user was created")
			}
		})
	}
}

// TestSSOTrustEmail: a provider that sends no email_verified (una's
// provider omits it, as Entra ID does) is refused with words that name
// trust_email; with trust_email its email is taken as verified, and
// links the local account with it.
func TestSSOTrustEmail(t *testing.T) {
	t.Run("without", func(t *testing.T) {
		s := newSSOApp(t)
		s.localUser("una@example.com", false)
		b, r := s.signOn("una")
		if r.status != http.StatusForbidden || !strings.Contains(string(r.body), "your admin can set trust_email") {
			t.Fatalf("callback: %d, want 403 naming trust_email:\n%s", r.status, r.body)
		}
		if b.me(t) != nil {
			t.Error("signed in anyway")
		}
	})
	t.Run("with", func(t *testing.T) {
		s := newSSOApp(t, func(o *Options) { o.OIDCProviders[0].TrustEmail = true })
		local := s.localUser("una@example.com", false)
		b, r := s.signOn("una")
		if r.status != http.StatusSeeOther {
			t.Fatalf("callback: %d %s", r.status, r.body)
		}
		if me := b.me(t); me.ID != local.ID {
			t.Errorf("signed in as %s, want the local account %s", me.ID, local.ID)
		}
	})
}

// TestSSOEmailFollowsTheProvider: a linked identity whose email changed
// at the provider changes the user's, on record; an email another user
// has is refused, and changes nothing.
func TestSSOEmailFollowsTheProvider(t *testing.T) {
	s := newSSOApp(t)
	ctx := context.Background()
	b, _ := s.signOn("bob")
	id := b.me(t).ID
	s.idp.SetEmail("bob-sub", "robert@example.com", true)
	b, r := s.signOn("bob")
	if r.status != http.StatusSeeOther {
		t.Fatalf("sign-in after the change: %d %s", r.status, r.body)
	}
	if me := b.me(t); me.ID != id || me.Email != "robert@example.com" {
		t.Errorf("me = %+v, want %s as robert@example.com", me, id)
	}
	entries, _, err := s.store.Audit(ctx, models.AuditFilter{TargetID: id, Action: models.AuditUserUpdate}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || string(entries[0].Before) != `{"email":"bob@example.com"}` || !strings.Contains(string(entries[0].After), `"email":"robert@example.com"`) {
		t.Errorf("user.update entries = %+v, want bob's change of email", entries)
	}

	s.localUser("taken@example.com", false)
	s.idp.SetEmail("bob-sub", "taken@example.com", true)
	b, r = s.signOn("bob")
	if r.status != http.StatusConflict || !strings.Contains(string(r.body), "taken@example.com, belongs to another herd account") {
		t.Fatalf("sign-in with another user's email: %d, want 409 saying so:\n%s", r.status, r.body)
	}
	if b.me(t) != nil {
		t.Error("signed in anyway")
	}
	if u, err := s.store.User(ctx, id); err != nil || u.Email != "robert@example.com" {
		t.Errorf("bob's email is now %v (%v), want robert@example.com", u, err)
	}
}

// TestSSOAdminFromEnvWithPasswordsOff: HERD_ADMIN_EMAIL/PASSWORD would
// make an admin who cannot sign in; herd refuses to start, saying what
// to do instead.
func TestSSOAdminFromEnvWithPasswordsOff(t *testing.T) {
	s := newSSOApp(t, func(o *Options) { o.LocalPasswords = sso.PasswordsOff })
	err := s.srv.EnsureAdmin(context.Background(), "ops@example.com", "long enough pw")
	if err == nil || !strings.Contains(err.Error(), "HERD_ADMIN_EMAIL/HERD_ADMIN_PASSWORD") ||
		!strings.Contains(err.Error(), "auth.local_passwords: off") || !strings.Contains(err.Error(), "sign in with Test IdP") {
		t.Fatalf("EnsureAdmin = %v, want a refusal naming both settings and the provider", err)
	}
	if _, err := s.store.UserByEmail(context.Background(), "ops@example.com"); err == nil {
		t.Error("the admin was created")
	}
}

func TestSSOLinksAVerifiedEmailToItsLocalAccount(t *testing.T) {
	s := newSSOApp(t)
	local := s.localUser("bob@example.com", false)
	b, r := s.signOn("bob")
	if r.status != http.StatusSeeOther {
		t.Fatalf("callback: %d %s", r.status, r.body)
	}
	if me := b.me(t); me.ID != local.ID {
		t.Errorf("signed in as %s, want the local account %s", me.ID, local.ID)
	}
}

// flowOf is the stored flow of a sign-in started at authURL, taken out
// of the store: put it back (changed) with CreateLoginFlow.
func (s *ssoApp) flowOf(authURL *url.URL) *models.LoginFlow {
	s.t.Helper()
	sum := sha256.Sum256([]byte(authURL.Query().Get("state")))
	f, err := s.store.TakeLoginFlow(context.Background(), hex.EncodeToString(sum[:]))
	if err != nil {
		s.t.Fatal(err)
	}
	return f
}

func TestSSOCallbackRefusals(t *testing.T) {
	s := newSSOApp(t)
	ctx := context.Background()
	refused := func(t *testing.T, b *user, path string, status int, want string) {
		t.Helper()
		r := b.do("GET", path, nil)
		if r.status != status || !strings.Contains(string(r.body), want) {
			t.Errorf("GET %s: %d, want %d saying %q:\n%s", path, r.status, status, want, r.body)
		}
		if b.me(t) != nil {
			t.Error("signed in anyway")
		}
	}
	notValid := "this sign-in link is not valid"
	t.Run("no state", func(t *testing.T) {
		refused(t, s.browser(), "/auth/oidc/test/callback?code=abc", http.StatusBadRequest, notValid)
	})
	t.Run("unknown state", func(t *testing.T) {
		b := s.browser()
		s.start(b)
		refused(t, b, "/auth/oidc/test/callback?code=abc&state=forged", http.StatusBadRequest, notValid)
	})
	t.Run("replayed", func(t *testing.T) {
		b := s.browser()
		cb := s.atProvider(b, s.start(b), "bob")
		if r := b.do("GET", cb, nil); r.status != http.StatusSeeOther {
			t.Fatalf("first callback: %d %s", r.status, r.body)
		}
		b.do("POST", "/logout", url.Values{"_csrf": {csrfOfBrowser(t, b)}})
		refused(t, b, cb, http.StatusBadRequest, notValid)
	})
	t.Run("another browser", func(t *testing.T) {
		b := s.browser()
		cb := s.atProvider(b, s.start(b), "bob")
		refused(t, s.browser(), cb, http.StatusBadRequest, notValid)
	})
	couldNot := "could not be checked"
	t.Run("nonce mismatch", func(t *testing.T) {
		b := s.browser()
		auth := s.start(b)
		f := s.flowOf(auth)
		f.Nonce = "not-the-nonce-sent"
		if err := s.store.CreateLoginFlow(ctx, f); err != nil {
			t.Fatal(err)
		}
		refused(t, b, s.atProvider(b, auth, "bob"), http.StatusBadRequest, couldNot)
	})
	t.Run("PKCE", func(t *testing.T) {
		b := s.browser()
		auth := s.start(b)
		f := s.flowOf(auth)
		sum := sha256.Sum256([]byte(f.Verifier))
		if q := auth.Query(); q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") != base64.RawURLEncoding.EncodeToString(sum[:]) {
			t.Errorf("the authorization URL's challenge %q (%s) is not S256 of the flow's verifier", q.Get("code_challenge"), q.Get("code_challenge_method"))
		}
		f.Verifier = strings.Repeat("x", 64) // the provider must refuse the code without the right one
		if err := s.store.CreateLoginFlow(ctx, f); err != nil {
			t.Fatal(err)
		}
		refused(t, b, s.atProvider(b, auth, "bob"), http.StatusBadRequest, couldNot)
	})
	t.Run("a code for another client", func(t *testing.T) {
		b := s.browser()
		auth := s.start(b)
		q := auth.Query()
		q.Set("client_id", "other")
		other := *auth
		other.RawQuery = q.Encode()
		refused(t, b, s.atProvider(b, &other, "bob"), http.StatusBadRequest, couldNot)
	})
	t.Run("the provider's refusal", func(t *testing.T) {
		b := s.browser()
		st := s.start(b).Query().Get("state")
		refused(t, b, "/auth/oidc/test/callback?error=access_denied&error_description=nope&state="+url.QueryEscape(st), http.StatusForbidden, "did not sign you in (access_denied: nope)")
	})
	t.Run("unknown provider", func(t *testing.T) {
		refused(t, s.browser(), "/auth/oidc/nope/callback?code=abc&state=x", http.StatusNotFound, "sign-in provider not found")
	})
}

func csrfOfBrowser(t *testing.T, b *user) string {
	t.Helper()
	b.me(t)
	return b.csrf
}

func TestSSOCallbackIsRateLimited(t *testing.T) {
	s := newSSOApp(t, func(o *Options) { o.LoginPerMinute = 2 })
	b := s.browser()
	for i, want := range []int{http.StatusBadRequest, http.StatusBadRequest, http.StatusTooManyRequests} {
		if r := b.do("GET", "/auth/oidc/test/callback?code=x&state=forged", nil); r.status != want {
			t.Fatalf("callback %d: %d, want %d", i+1, r.status, want)
		}
	}
}

func TestSSOProviderDownAtStart(t *testing.T) {
	s := newSSOApp(t)
	s.idp.SetDown(true)
	b := s.browser()
	r := b.do("GET", "/login", nil)
	down := "Test IdP cannot be reached right now"
	if r.status != http.StatusOK || !strings.Contains(string(r.body), down) {
		t.Fatalf("sign-in page: %d, want 200 saying %q:\n%s", r.status, down, r.body)
	}
	r = b.do("GET", "/auth/oidc/test/start", nil)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), down) {
		t.Fatalf("start: %d, want 503 saying %q", r.status, down)
	}
	// Back up: herd tries again once the failure is old enough.
	s.idp.SetDown(false)
	s.clock.Store(int64(time.Minute))
	if r := b.do("GET", "/login", nil); strings.Contains(string(r.body), down) {
		t.Errorf("the page still says the provider is down")
	}
	if _, r := s.signOn("bob"); r.status != http.StatusSeeOther {
		t.Errorf("sign-in once the provider is back: %d %s", r.status, r.body)
	}
}

var endSessionLink = regexp.MustCompile(`id="end-session"[^>]*href="([^"]+)"`)

func TestSSOSignOutEndsTheProvidersSession(t *testing.T) {
	s := newSSOApp(t)
	b, _ := s.signOn("bob")
	r := b.do("POST", "/logout", url.Values{"_csrf": {csrfOfBrowser(t, b)}})
	m := endSessionLink.FindSubmatch(r.body)
	if r.status != http.StatusOK || m == nil {
		t.Fatalf("logout: %d, want a page offering the provider's end-session:\n%s", r.status, r.body)
	}
	end, err := url.Parse(html.UnescapeString(string(m[1])))
	if err != nil || !strings.HasPrefix(end.String(), s.idp.Issuer+"/end_session") {
		t.Fatalf("the sign-out page links to %q, not the provider's end_session", m[1])
	}
	if q := end.Query(); q.Get("id_token_hint") == "" || q.Get("post_logout_redirect_uri") != s.http.URL+"/login?signed_out=1" {
		t.Errorf("end-session query = %v", q)
	}
	if b.me(t) != nil {
		t.Fatal("still signed in after logout")
	}
	resp, err := b.c.Get(end.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if back := resp.Header.Get("Location"); back != s.http.URL+"/login?signed_out=1" {
		t.Errorf("the provider sent the browser to %q (%d), want herd's sign-in page", back, resp.StatusCode)
	}
	if !s.idp.Reached("/end_session") {
		t.Error("the provider's end_session was not reached")
	}
}

func TestLocalPasswordsSwitch(t *testing.T) {
	t.Run("admins", func(t *testing.T) {
		s := newSSOApp(t, func(o *Options) { o.LocalPasswords = sso.PasswordsAdmins; o.AllowSignup = true })
		page := string(s.browser().do("GET", "/login", nil).body)
		if strings.Contains(page, `action="/login"`) || !strings.Contains(page, "Admin sign-in with a password") || !strings.Contains(page, "Sign in with Test IdP") {
			t.Errorf("the sign-in page should offer the provider and an admin link, no password form:\n%s", page)
		}
		if page := string(s.browser().do("GET", "/login?password=1", nil).body); !strings.Contains(page, `action="/login"`) {
			t.Errorf("the admin sign-in page has no password form")
		}
		s.localUser("plain@example.com", false)
		r := s.browser().do("POST", "/api/auth/login", map[string]string{"email": "plain@example.com", "password": "password123"})
		if r.status != http.StatusForbidden || r.errorCode() != "passwords_off" {
			t.Errorf("a user's password sign-in: %d %s, want 403 passwords_off", r.status, r.body)
		}
		s.signIn("root@example.com") // an admin's works
		if r := s.browser().do("GET", "/signup", nil); r.status != http.StatusNotFound {
			t.Errorf("sign-up: %d, want 404", r.status)
		}
	})
	t.Run("off", func(t *testing.T) {
		s := newSSOApp(t, func(o *Options) { o.LocalPasswords = sso.PasswordsOff })
		r := s.browser().do("POST", "/api/auth/login", map[string]string{"email": "root@example.com", "password": "password123"})
		if r.status != http.StatusForbidden || r.errorCode() != "passwords_off" {
			t.Errorf("an admin's password sign-in: %d %s, want 403 passwords_off", r.status, r.body)
		}
		if page := string(s.browser().do("GET", "/login", nil).body); strings.Contains(page, `action="/login"`) || strings.Contains(page, "Admin sign-in") {
			t.Errorf("the sign-in page offers passwords:\n%s", page)
		}
	})
	t.Run("off, on an empty instance", func(t *testing.T) {
		idp := oidctest.Start(t, ssoUsers, oidctest.Client{ID: "herd", Secret: "herd-secret"})
		a := newApp(t, func(c *appConfig) {
			c.server = func(o *Options) {
				o.LocalPasswords = sso.PasswordsOff
				o.OIDCProviders = []sso.ProviderConfig{{Name: "test", DisplayName: "Test IdP", Issuer: idp.Issuer, ClientID: "herd", ClientSecret: "herd-secret"}}
			}
		})
		tok, err := a.srv.SetupURL(context.Background(), a.http.URL)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(tok)
		for _, path := range []string{"/login", u.RequestURI()} {
			r := a.anonymous().do("GET", path, nil)
			if r.status != http.StatusOK && r.header.Get("Location") != "/login" {
				t.Errorf("GET %s: %d to %q, want the sign-in page (no password set-up)", path, r.status, r.header.Get("Location"))
			}
			if r.status == http.StatusOK && !strings.Contains(string(r.body), "Sign in with Test IdP") {
				t.Errorf("GET %s: %s", path, r.body)
			}
		}
	})
}

// adminUserOf is the user with email on the admin's GET /api/admin/users.
func adminUserOf(t *testing.T, admin *user, email string) adminUserJSON {
	t.Helper()
	var out struct{ Users []adminUserJSON }
	if r := admin.do("GET", "/api/admin/users", nil); r.status != http.StatusOK || json.Unmarshal(r.body, &out) != nil {
		t.Fatalf("GET /api/admin/users: %d %s", r.status, r.body)
	}
	for _, u := range out.Users {
		if u.Email == email {
			return u
		}
	}
	t.Fatalf("%s is not on the users list", email)
	return adminUserJSON{}
}

// TestSSOAdminSeesAndUnlinksIdentities: the users list says how each
// user signs in, sessions say where they came from, and an admin unlinks
// an identity (its sessions end) unless it is the user's only way in.
func TestSSOAdminSeesAndUnlinksIdentities(t *testing.T) {
	s := newSSOApp(t)
	ctx := context.Background()
	s.localUser("bob@example.com", false)
	bobSSO, _ := s.signOn("bob")
	bobSSO.me(t)
	aliceSSO, _ := s.signOn("alice")
	aliceSSO.me(t)
	admin := s.signIn("root@example.com")

	bob, alice := adminUserOf(t, admin, "bob@example.com"), adminUserOf(t, admin, "alice@example.com")
	if !slices.Equal(bob.SignIn, []string{"password", "Test IdP"}) || len(bob.Identities) != 1 || bob.Identities[0].Label != "Test IdP" ||
		!slices.Equal(alice.SignIn, []string{"Test IdP"}) || !slices.Equal(adminUserOf(t, admin, "root@example.com").SignIn, []string{"password"}) {
		t.Errorf("sign_in: bob %+v, alice %+v", bob, alice)
	}
	if page := string(admin.do("GET", "/admin", nil).body); !strings.Contains(page, "signs in with password, Test IdP") || !strings.Contains(page, "Unlink Test IdP") {
		t.Errorf("the admin page does not say how bob signs in, or offers no unlink")
	}
	var sessions struct {
		Sessions []sessionJSON `json:"sessions"`
	}
	if r := bobSSO.do("GET", "/api/account/sessions", nil); json.Unmarshal(r.body, &sessions) != nil || len(sessions.Sessions) != 1 || sessions.Sessions[0].SignIn != "Test IdP" {
		t.Errorf("bob's sessions: %s, want one signed in with Test IdP", r.body)
	}
	if page := string(bobSSO.do("GET", "/account", nil).body); !strings.Contains(page, "signed in with Test IdP") {
		t.Errorf("the account page does not say where the session came from")
	}

	unlink := func(u adminUserJSON) string {
		return "/api/admin/users/" + u.ID + "/identities/" + u.Identities[0].ID
	}
	if r := bobSSO.do("DELETE", unlink(bob), nil); r.status != http.StatusForbidden {
		t.Errorf("a user's unlink: %d, want 403", r.status)
	}
	if r := admin.do("DELETE", unlink(alice), nil); r.status != http.StatusConflict || r.errorCode() != "last_sign_in" {
		t.Errorf("unlinking alice's only way in: %d %s, want 409 last_sign_in", r.status, r.body)
	}
	if r := admin.do("DELETE", "/api/admin/users/"+alice.ID+"/identities/"+bob.Identities[0].ID, nil); r.status != http.StatusNotFound {
		t.Errorf("unlinking bob's identity through alice: %d, want 404", r.status)
	}
	noCSRF := *admin
	noCSRF.csrf = ""
	form := "/admin/users/" + bob.ID + "/identities/" + bob.Identities[0].ID + "/delete"
	if r := noCSRF.do("POST", form, url.Values{}); r.status != http.StatusForbidden {
		t.Errorf("the unlink form without its CSRF token: %d, want 403", r.status)
	}
	if r := noCSRF.do("POST", form, url.Values{"_csrf": {admin.csrf}}); r.status != http.StatusOK || !strings.Contains(string(r.body), "Identity unlinked.") {
		t.Fatalf("the unlink form: %d %s", r.status, r.body)
	}
	if ids, _ := s.store.Identities(ctx, bob.ID); len(ids) != 0 {
		t.Errorf("bob still has %+v", ids)
	}
	if bobSSO.me(t) != nil {
		t.Error("bob's session from Test IdP outlived the identity")
	}
	if got := adminUserOf(t, admin, "bob@example.com").SignIn; !slices.Equal(got, []string{"password"}) {
		t.Errorf("bob signs in with %v, want password", got)
	}
	entries, _, err := s.store.Audit(ctx, models.AuditFilter{TargetID: bob.ID, Action: models.AuditUserUnlink}, 10)
	if err != nil || len(entries) != 1 || entries[0].ActorEmail != "root@example.com" ||
		!strings.Contains(string(entries[0].Before), `"subject":"bob-sub"`) || !strings.Contains(string(entries[0].After), `"sessions_ended":1`) {
		t.Errorf("user.unlink entries = %+v, %v", entries, err)
	}
}
