package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"herd/internal/testclock"
	"herd/server/auth"
	"herd/server/limits"
)

func loginAs(u *user, email, password, xff string) response {
	u.a.t.Helper()
	return u.do("POST", "/api/auth/login", map[string]string{"email": email, "password": password}, "X-Forwarded-For", xff)
}

// TestForgedForwardedFor: from a peer that is not a trusted proxy, an
// X-Forwarded-For does not change the key the limit counts by.
func TestForgedForwardedFor(t *testing.T) {
	a := newApp(t, withServer(func(o *Options) { o.LoginPerMinute = 3 }))
	a.newUserNoLogin("ann@example.com")
	anon := a.anonymous()
	var statuses []int
	for i := range 6 {
		// A different email each time: only the address limit applies.
		r := loginAs(anon, fmt.Sprintf("x%d@example.com", i), "wrong-password", fmt.Sprintf("198.51.100.%d", i))
		statuses = append(statuses, r.status)
	}
	if fmt.Sprint(statuses) != "[401 401 401 429 429 429]" {
		t.Errorf("statuses %v: a forged X-Forwarded-For changed the key", statuses)
	}
	r := loginAs(anon, "x9@example.com", "wrong-password", "")
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), "from your address; try again in") {
		t.Errorf("limited address: %d, Retry-After %q: %s", r.status, r.header.Get("Retry-After"), r.body)
	}

	// Behind a trusted proxy the client is the last untrusted hop: what it
	// prepends is skipped, and other clients keep their own budget.
	b := newApp(t, withServer(func(o *Options) { o.LoginPerMinute = 3 }))
	b.srv.e.IPExtractor, _ = limits.IPExtractor([]string{"127.0.0.1/32"})
	anon = b.anonymous()
	statuses = nil
	for i := range 5 {
		r := loginAs(anon, fmt.Sprintf("x%d@example.com", i), "wrong-password", fmt.Sprintf("10.9.9.%d, 203.0.113.7", i))
		statuses = append(statuses, r.status)
	}
	if fmt.Sprint(statuses) != "[401 401 401 429 429]" {
		t.Errorf("behind the proxy: statuses %v", statuses)
	}
	if r := loginAs(anon, "y@example.com", "wrong-password", "203.0.113.8"); r.status != http.StatusUnauthorized {
		t.Errorf("another client behind the proxy: %d, want 401", r.status)
	}
}

// TestOwnerNotLockedOut: an attacker's 1000 failures stop the attacker's
// address and only slow the account down. The owner signs in at once
// from a browser that signed in before, and from a new one as soon as the
// back-off window ends, which the answer names; a guesser who keeps going
// for ten minutes gets few guesses checked.
func TestOwnerNotLockedOut(t *testing.T) {
	clock := testclock.New()
	a := newApp(t, withAuth(func(o *auth.Options) { o.LoginPerMinute, o.Now = 10, clock.Now }))
	a.srv.e.IPExtractor, _ = limits.IPExtractor([]string{"127.0.0.1/32"})
	a.newUserNoLogin("ann@example.com")
	laptop := a.anonymous()
	if r := loginAs(laptop, "ann@example.com", "password123", "198.51.100.20"); r.status != http.StatusOK {
		t.Fatalf("owner's first sign-in: %d", r.status)
	}
	attack := func(addr string) map[int]int {
		attacker := a.anonymous()
		counts := map[int]int{}
		for range 1000 {
			counts[loginAs(attacker, "ann@example.com", "guess-password", addr).status]++
		}
		return counts
	}
	if counts := attack("203.0.113.66"); counts[http.StatusUnauthorized] > 10 || counts[http.StatusTooManyRequests] < 990 || len(counts) != 2 {
		t.Fatalf("attacker's answers %v: want at most 10 checked, the rest 429", counts)
	}
	if r := loginAs(a.anonymous(), "ann@example.com", "password123", "198.51.100.21"); r.status != http.StatusTooManyRequests {
		t.Fatalf("a new browser inside the back-off window: %d, want 429", r.status)
	}
	if r := loginAs(laptop, "ann@example.com", "password123", "198.51.100.20"); r.status != http.StatusOK {
		t.Fatalf("the owner's known browser inside the window: %d, want 200", r.status)
	}

	attack("203.0.113.67")
	ownerSignsIn(t, a.anonymous(), clock)

	// The attacker keeps guessing once a second for ten minutes: the
	// account's back-off lets few guesses through, and a new browser of
	// the owner still gets in within a minute at the end.
	attacker := a.anonymous()
	checked := 0
	for range 600 {
		clock.Advance(time.Second)
		if loginAs(attacker, "ann@example.com", "guess-password", "203.0.113.68").status == http.StatusUnauthorized {
			checked++
		}
	}
	if checked > 20 {
		t.Errorf("%d guesses checked in ten minutes", checked)
	}
	ownerSignsIn(t, a.anonymous(), clock)
}

// ownerSignsIn signs ann in from her own address, waiting out the
// back-off windows she is told about, each at most a minute.
func ownerSignsIn(t *testing.T, owner *user, clock *testclock.Clock) {
	t.Helper()
	r := loginAs(owner, "ann@example.com", "password123", "198.51.100.20")
	for r.status == http.StatusTooManyRequests {
		wait, err := strconv.Atoi(r.header.Get("Retry-After"))
		if err != nil || wait < 1 || wait > 60 {
			t.Fatalf("owner told to wait %q: want 1..60 seconds", r.header.Get("Retry-After"))
		}
		clock.Advance(time.Duration(wait) * time.Second)
		r = loginAs(owner, "ann@example.com", "password123", "198.51.100.20")
	}
	if r.status != http.StatusOK {
		t.Fatalf("owner after the attack: %d %s", r.status, r.body)
	}
}

// TestOnlyFailuresCount: successful sign-ins never use up the limit.
func TestOnlyFailuresCount(t *testing.T) {
	a := newApp(t, withServer(func(o *Options) { o.LoginPerMinute = 2 }))
	a.newUserNoLogin("ann@example.com")
	anon := a.anonymous()
	for i := range 10 {
		if r := loginAs(anon, "ann@example.com", "password123", ""); r.status != http.StatusOK {
			t.Fatalf("sign-in %d: %d", i, r.status)
		}
	}
}

// TestFormsLimitedPerAddress: set-up and sign-up count every attempt per
// real address; a forged X-Forwarded-For does not reset the count.
func TestFormsLimitedPerAddress(t *testing.T) {
	a := newApp(t, withServer(func(o *Options) { o.LoginPerMinute = 3 }))
	a.srv.allowSignup = true
	for _, path := range []string{"/setup", "/signup"} {
		anon := a.anonymous()
		anon.do("GET", path, nil)
		var statuses []int
		for i := range 5 {
			form := url.Values{"email": {"x@example.com"}, "password": {"short"}, "password_confirm": {"short"}, "_csrf": {preCSRFOf(t, anon)}}
			statuses = append(statuses, anon.do("POST", path, form, "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i)).status)
		}
		if statuses[3] != http.StatusTooManyRequests || statuses[4] != http.StatusTooManyRequests || statuses[2] == http.StatusTooManyRequests {
			t.Errorf("%s: statuses %v, want the 4th and 5th limited", path, statuses)
		}
	}
}
