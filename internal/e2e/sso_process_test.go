package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"herd/internal/oidctest"
)

// TestSingleSignOnRealBinary: herd configured from the environment with
// a provider that is down when it starts still starts, and its sign-in
// page says the provider cannot be reached; once the provider is back,
// herd tries again by itself and a person signs in there, with the
// client secret read from the environment ($NAME), landing as an admin
// by the provider's group claim.
func TestSingleSignOnRealBinary(t *testing.T) {
	t.Parallel() // its own data directories, schema and ports
	idp := oidctest.Start(t, []oidctest.User{
		{ID: "alice-sub", Username: "alice", Password: "verysecure", Email: "alice@example.com", EmailVerified: true, Groups: []string{"herd-admins"}},
	}, oidctest.Client{ID: "herd", Secret: "herd-secret-from-env"})
	idp.SetDown(true)
	p := startHerdWith(t, t.TempDir(),
		"HERD_AUTH_LOCAL_PASSWORDS=admins",
		"HERD_TEST_OIDC_SECRET=herd-secret-from-env",
		`HERD_AUTH_OIDC_PROVIDERS=[{name: test, display_name: Test IdP, issuer: "`+idp.Issuer+`", client_id: herd, client_secret: $HERD_TEST_OIDC_SECRET, admin_claim: {claim: groups, value: herd-admins}}]`,
	)
	jar, _ := cookiejar.New(nil)
	cl := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (int, string, http.Header) {
		t.Helper()
		resp, err := cl.Get(p.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	down := "Test IdP cannot be reached right now"
	if status, page, _ := get("/login"); status != http.StatusOK || !strings.Contains(page, down) {
		t.Fatalf("sign-in page with the provider down: %d, want 200 saying %q:\n%s", status, down, page)
	}

	idp.SetDown(false)
	// herd retries a failed discovery 15 s after it; the page is asked
	// until then (a sign-in page is what a person would reload).
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, page, _ := get("/login")
		if !strings.Contains(page, down) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the provider is back but the page still says it is down")
		}
		time.Sleep(time.Second)
	}
	status, _, hdr := get("/auth/oidc/test/start")
	if status != http.StatusSeeOther {
		t.Fatalf("start: %d", status)
	}
	cb, err := oidctest.SignIn(context.Background(), cl, hdr.Get("Location"), "alice", "verysecure")
	if err != nil {
		t.Fatal(err)
	}
	if status, _, hdr := get(cb.RequestURI()); status != http.StatusSeeOther || hdr.Get("Location") != "/" {
		t.Fatalf("callback: %d to %q", status, hdr.Get("Location"))
	}
	if status, page, _ := get("/api/auth/me"); status != http.StatusOK || !strings.Contains(page, `"email":"alice@example.com"`) || !strings.Contains(page, `"role":"admin"`) {
		t.Errorf("me: %d %s, want alice as admin", status, page)
	}
}

// TestAdminFromEnvWithPasswordsOffRefusesToStart: HERD_ADMIN_EMAIL and
// HERD_ADMIN_PASSWORD with auth.local_passwords: off would make an admin
// who can never sign in; herd exits 1 saying so, naming both settings and
// the provider to sign in with instead (docs/OPERATIONS.md "Single
// sign-on"). The provider is not contacted: nothing listens at its issuer.
func TestAdminFromEnvWithPasswordsOffRefusesToStart(t *testing.T) {
	t.Parallel()
	code, out := startToExit(t, 30*time.Second,
		"HERD_AUTH_LOCAL_PASSWORDS=off",
		`HERD_AUTH_OIDC_PROVIDERS=[{name: test, display_name: Test IdP, issuer: "http://127.0.0.1:9", client_id: herd, client_secret: s}]`,
		"HERD_ADMIN_EMAIL=ops@example.com", "HERD_ADMIN_PASSWORD=long enough pw",
	)
	for _, want := range []string{"HERD_ADMIN_EMAIL/HERD_ADMIN_PASSWORD", "auth.local_passwords: off", "sign in with Test IdP"} {
		if code != 1 || !strings.Contains(out, want) {
			t.Fatalf("exit %d; want 1 saying %q:\n%s", code, want, out)
		}
	}
}
