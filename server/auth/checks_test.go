package auth

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/crypto/bcrypt"

	"herd/models"
)

// testService is a Service on a fresh store, changed by change.
func testService(t *testing.T, change func(*Options)) (*Service, *models.Store) {
	t.Helper()
	store, err := models.Open(filepath.Join(t.TempDir(), "herd.db"), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	o := Options{Store: store, BcryptCost: 4, LoginPerMinute: 1000}
	if change != nil {
		change(&o)
	}
	s, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return s, store
}

// newUser stores a user whose password is password123.
func newUser(t *testing.T, s *Service, email string) *models.User {
	t.Helper()
	u, err := s.StoreUser(context.Background(), email, "password123", models.RoleUser, false)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// from is a request's context from the client address ip.
func from(ip string) echo.Context {
	req := httptest.NewRequest("POST", "/", nil)
	req.RemoteAddr = ip + ":40000"
	return echo.New().NewContext(req, httptest.NewRecorder())
}

// heldChecks is a password check (Options.Compare) that waits until
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

// inBackground runs a check on its own goroutine; its error comes on
// the channel.
func inBackground(check func() error) <-chan error {
	out := make(chan error, 1)
	go func() { out <- check() }()
	return out
}

// answeredAtOnce waits a moment for an answer that must not wait for the
// check in flight.
func answeredAtOnce(t *testing.T, what string, r <-chan error) error {
	t.Helper()
	select {
	case err := <-r:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s waited for the check in flight", what)
		return nil
	}
}

// expectBusy checks a refusal that names the check under way and asks
// for a second's wait.
func expectBusy(t *testing.T, what string, err error) {
	t.Helper()
	var rl *RateLimitError
	if !errors.As(err, &rl) || rl.Seconds() != 1 || !strings.Contains(err.Error(), "under way") {
		t.Errorf("%s: %v; want refused at once, retry in a second", what, err)
	}
}

func login(s *Service, email, password, ip string) error {
	_, err := s.VerifyLogin(from(ip), email, password)
	return err
}

// TestPasswordChecksReserveFirst: a sign-in's failure is counted against
// its address and account before its password is hashed; while it is
// hashed no other check runs for that address or that account (each is
// refused at once, with nothing hashed); a check of another address and
// account runs beside it; and a right password gives its failure back.
func TestPasswordChecksReserveFirst(t *testing.T) {
	compare, started, release := heldChecks(t)
	s, _ := testService(t, func(o *Options) { o.LoginPerMinute, o.Compare = 2, compare })
	newUser(t, s, "ann@example.com")
	newUser(t, s, "bob@example.com")

	first := inBackground(func() error { return login(s, "ann@example.com", "guess-password", "203.0.113.1") })
	<-started
	if tokens := s.limits.failures.Tokens("login:203.0.113.1"); int(tokens) != 1 {
		t.Errorf("the address has %v of 2 failures left while its first check runs, want 1: the failure is taken before the hash", tokens)
	}
	if n := s.limits.accounts.strikes("ann@example.com"); n != 1 {
		t.Errorf("the account has %d strikes while its first check runs, want 1", n)
	}
	sameAddress := inBackground(func() error { return login(s, "bob@example.com", "guess-password", "203.0.113.1") })
	expectBusy(t, "another account from the same address", answeredAtOnce(t, "another account from the same address", sameAddress))
	sameAccount := inBackground(func() error { return login(s, "ann@example.com", "password123", "198.51.100.7") })
	expectBusy(t, "the same account from another address", answeredAtOnce(t, "the same account from another address", sameAccount))
	select {
	case <-started:
		t.Error("a refused attempt hashed its password")
	default:
	}
	other := inBackground(func() error { return login(s, "bob@example.com", "password123", "198.51.100.8") })
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("a check of another address and account did not run beside the first")
	}
	release()
	if err := <-first; !errors.Is(err, ErrBadCredentials) {
		t.Errorf("the held wrong password: %v, want ErrBadCredentials", err)
	}
	if err := <-other; err != nil {
		t.Errorf("the other account's right password: %v", err)
	}
	if n := s.limits.checking.len(); n != 0 {
		t.Errorf("%d check slots still held after every answer", n)
	}

	// The address has one failure left: a right password spends it and
	// gives it back, so one more wrong one is still checked, and the next
	// is refused.
	for i, c := range []struct {
		password string
		want     error
	}{{"password123", nil}, {"guess-password", ErrBadCredentials}, {"guess-password", ErrRateLimited}} {
		if err := login(s, "bob@example.com", c.password, "203.0.113.1"); !errors.Is(err, c.want) {
			t.Errorf("attempt %d after the burst (%s): %v, want %v", i, c.password, err, c.want)
		}
	}
}

// TestPasswordChangeReservesFirst: a password change's check of the
// current password spends a failure of the address (the sign-in's) before
// it hashes, runs alone for the address and the account, and is refused
// once the address has none left.
func TestPasswordChangeReservesFirst(t *testing.T) {
	compare, started, release := heldChecks(t)
	s, _ := testService(t, func(o *Options) { o.LoginPerMinute, o.Compare = 2, compare })
	u := newUser(t, s, "ann@example.com")
	change := func(current string) error {
		_, err := s.NewPasswordHash(from("127.0.0.1"), u, current, "tall ocean lantern")
		return err
	}
	first := inBackground(func() error { return change("wrong-password") })
	<-started
	if tokens := s.limits.failures.Tokens("login:127.0.0.1"); int(tokens) != 1 {
		t.Errorf("the address has %v of 2 failures left while the check runs, want 1", tokens)
	}
	expectBusy(t, "a second change at once", answeredAtOnce(t, "a second change", inBackground(func() error { return change("password123") })))
	expectBusy(t, "a sign-in to the account at once", answeredAtOnce(t, "a sign-in", inBackground(func() error { return login(s, "ann@example.com", "password123", "127.0.0.1") })))
	release()
	if err := <-first; !errors.Is(err, ErrWrongPassword) {
		t.Errorf("the held wrong password: %v, want ErrWrongPassword", err)
	}
	if err := change("wrong-password"); !errors.Is(err, ErrWrongPassword) {
		t.Errorf("second wrong password: %v, want ErrWrongPassword", err)
	}
	err := change("password123")
	if !errors.Is(err, ErrRateLimited) || !strings.Contains(err.Error(), "too many wrong passwords from your address") {
		t.Errorf("the right password once the address has no failure left: %v, want refused", err)
	}
}

// TestAttemptOneHashPerAddress: a set-up or sign-up hashes its password
// alone for its address; another at once is refused without taking one
// of the address's attempts.
func TestAttemptOneHashPerAddress(t *testing.T) {
	s, _ := testService(t, func(o *Options) { o.LoginPerMinute = 1 })
	leave, ok := s.limits.checking.enter(addressSlot("127.0.0.1"))
	if !ok {
		t.Fatal("the address's slot is taken")
	}
	_, err := s.LimitAttempt(from("127.0.0.1"), "signup")
	expectBusy(t, "a sign-up while another hashes", err)
	leave()
	done, err := s.LimitAttempt(from("127.0.0.1"), "signup")
	if err != nil {
		t.Fatalf("the sign-up after: %v (the refused one took no attempt)", err)
	}
	done()
}

// TestCheckGateHoldsCoresAndNetworks: however many addresses a burst
// comes from, at most max checks run at once (the rest answered at
// once), and the addresses of one IPv6 /64 count as one.
func TestCheckGateHoldsCoresAndNetworks(t *testing.T) {
	g := newCheckGate(2)
	leaveA, okA := g.enter(addressSlot("198.51.100.1"))
	_, okB := g.enter(addressSlot("198.51.100.2"))
	if _, okC := g.enter(addressSlot("198.51.100.3")); !okA || !okB || okC {
		t.Fatalf("entered: %v %v %v; want a third address refused while two checks run", okA, okB, okC)
	}
	leaveA()
	if leave, ok := g.enter(addressSlot("198.51.100.3")); !ok {
		t.Error("a check after one ended was refused")
	} else {
		leave()
	}
	cases := []struct{ a, b string }{
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"},
		{"198.51.100.7", "198.51.100.7"},
	}
	for _, c := range cases {
		if clientNet(c.a) != clientNet(c.b) {
			t.Errorf("%s and %s count apart: %s, %s", c.a, c.b, clientNet(c.a), clientNet(c.b))
		}
	}
	for _, c := range [][2]string{{"2001:db8:1:2::1", "2001:db8:1:3::1"}, {"198.51.100.7", "198.51.100.8"}, {"::ffff:198.51.100.7", "::ffff:198.51.100.8"}} {
		if clientNet(c[0]) == clientNet(c[1]) {
			t.Errorf("%s and %s count as one: %s", c[0], c[1], clientNet(c[0]))
		}
	}
}
