package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"herd/server/auth"
	"herd/server/limits"
)

// heldChecks is a password check (auth.Options.Compare) that waits until
// released (at the latest when the test ends), and reports each check as
// it starts: a test can look at the limits while a check is in flight.
func heldChecks(t *testing.T) (compare func(hash, password []byte) error, started <-chan struct{}, release func()) {
	st := make(chan struct{}, 64)
	gate := make(chan struct{})
	compare = func(hash, password []byte) error {
		st <- struct{}{}
		<-gate
		return bcrypt.CompareHashAndPassword(hash, password)
	}
	release = sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release)
	return compare, st, release
}

// inBackground sends a request on its own goroutine; the answer comes
// on the channel.
func inBackground(send func() response) <-chan response {
	out := make(chan response, 1)
	go func() { out <- send() }()
	return out
}

// answeredAtOnce waits a moment for an answer that must not wait for the
// check in flight.
func answeredAtOnce(t *testing.T, what string, r <-chan response) response {
	t.Helper()
	select {
	case got := <-r:
		return got
	case <-time.After(5 * time.Second):
		t.Fatalf("%s waited for the check in flight", what)
		return response{}
	}
}

// expectBusy checks a 429 that names the check under way and a
// Retry-After of a second.
func expectBusy(t *testing.T, what string, r response) {
	t.Helper()
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "1" || !strings.Contains(string(r.body), "under way") {
		t.Errorf("%s: %d, Retry-After %q, %s; want 429 at once, retry in a second", what, r.status, r.header.Get("Retry-After"), r.body)
	}
}

// TestPasswordChecksReserveFirst: a sign-in's failure is counted against
// its address and account before its password is hashed; while it is
// hashed no other check runs for that address or that account (each is
// answered 429 at once, with nothing hashed); a check of another address
// and account runs beside it; and a right password gives its failure
// back.
func TestPasswordChecksReserveFirst(t *testing.T) {
	a := newApp(t)
	compare, started, release := heldChecks(t)
	a.reauth(func(o *auth.Options) { o.LoginPerMinute, o.Compare = 2, compare })
	a.srv.e.IPExtractor, _ = limits.IPExtractor([]string{"127.0.0.1/32"})
	a.newUserNoLogin("ann@example.com")
	a.newUserNoLogin("bob@example.com")

	first := inBackground(func() response { return loginAs(a.anonymous(), "ann@example.com", "guess-password", "203.0.113.1") })
	<-started
	sameAddress := inBackground(func() response { return loginAs(a.anonymous(), "bob@example.com", "guess-password", "203.0.113.1") })
	expectBusy(t, "another account from the same address", answeredAtOnce(t, "another account from the same address", sameAddress))
	sameAccount := inBackground(func() response { return loginAs(a.anonymous(), "ann@example.com", "password123", "198.51.100.7") })
	expectBusy(t, "the same account from another address", answeredAtOnce(t, "the same account from another address", sameAccount))
	select {
	case <-started:
		t.Error("a refused attempt hashed its password")
	default:
	}
	other := inBackground(func() response { return loginAs(a.anonymous(), "bob@example.com", "password123", "198.51.100.8") })
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("a check of another address and account did not run beside the first")
	}
	release()
	if r := <-first; r.status != http.StatusUnauthorized {
		t.Errorf("the held wrong password: %d, want 401", r.status)
	}
	if r := <-other; r.status != http.StatusOK {
		t.Errorf("the other account's right password: %d, want 200", r.status)
	}

	// The address has one failure left: a right password spends it and
	// gives it back, so one more wrong one is still checked, and the next
	// is refused.
	for i, c := range []struct {
		password string
		want     int
	}{{"password123", http.StatusOK}, {"guess-password", http.StatusUnauthorized}, {"guess-password", http.StatusTooManyRequests}} {
		if r := loginAs(a.anonymous(), "bob@example.com", c.password, "203.0.113.1"); r.status != c.want {
			t.Errorf("attempt %d after the burst (%s): %d, want %d", i, c.password, r.status, c.want)
		}
	}
}

// TestPasswordChangeReservesFirst: a password change's check of the
// current password spends a failure of the address (the sign-in's) before
// it hashes, runs alone for the address and the account, and is refused
// once the address has none left.
func TestPasswordChangeReservesFirst(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	compare, started, release := heldChecks(t)
	a.reauth(func(o *auth.Options) { o.LoginPerMinute, o.Compare = 2, compare })

	change := func(current string) response {
		return u.do("POST", "/api/account/password", map[string]string{"current_password": current, "new_password": strongPassword})
	}
	first := inBackground(func() response { return change("wrong-password") })
	<-started
	expectBusy(t, "a second change at once", answeredAtOnce(t, "a second change", inBackground(func() response { return change("password123") })))
	expectBusy(t, "a sign-in to the account at once", answeredAtOnce(t, "a sign-in", inBackground(func() response { return loginAs(a.anonymous(), "ann@example.com", "password123", "") })))
	release()
	if r := <-first; r.status != http.StatusForbidden || r.errorCode() != "wrong_password" {
		t.Errorf("the held wrong password: %d %s", r.status, r.body)
	}
	if r := change("wrong-password"); r.status != http.StatusForbidden {
		t.Errorf("second wrong password: %d, want 403", r.status)
	}
	r := change("password123")
	if r.status != http.StatusTooManyRequests || !strings.Contains(string(r.body), "too many wrong passwords from your address") {
		t.Errorf("the right password once the address has no failure left: %d %s, want 429", r.status, r.body)
	}
}

// TestSignupOneHashPerAddress: a sign-up hashes its password alone for
// its address; another at once is answered 429 without taking one of the
// address's attempts.
func TestSignupOneHashPerAddress(t *testing.T) {
	a := newApp(t)
	compare, started, release := heldChecks(t)
	a.reauth(func(o *auth.Options) { o.LoginPerMinute, o.Compare = 1, compare })
	a.srv.allowSignup = true
	a.newUserNoLogin("ann@example.com")
	// A sign-in's check holds the address's slot.
	first := inBackground(func() response { return loginAs(a.anonymous(), "ann@example.com", "guess-password", "") })
	<-started
	anon := a.anonymous()
	anon.do("GET", "/signup", nil)
	form := signupForm(t, anon, "new@example.com")
	expectBusy(t, "a sign-up while another hashes", anon.do("POST", "/signup", form))
	release()
	<-first
	if r := anon.do("POST", "/signup", form); r.status != http.StatusSeeOther {
		t.Errorf("the sign-up after: %d, want 303 (the refused one took no attempt)", r.status)
	}
}

// signupForm is a filled-in sign-up form for email, with u's form token.
func signupForm(t *testing.T, u *user, email string) url.Values {
	t.Helper()
	return url.Values{"email": {email}, "password": {strongPassword}, "password_confirm": {strongPassword}, "_csrf": {preCSRFOf(t, u)}}
}

// passwordChecks is herd_password_checks_total{kind}.
func passwordChecks(t *testing.T, a *testApp, kind string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	a.metrics.Handler("").ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9180/metrics", nil))
	series := `herd_password_checks_total{kind="` + kind + `"}`
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(rec.Body.String())
	if m == nil {
		t.Fatalf("no series %s in\n%s", series, rec.Body)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
