package auth

import (
	"net/netip"
	"sync"
	"time"
)

// Password checks under the limits. A bcrypt check
// costs a core about a quarter of a second, so the limits hold before it
// runs, not after it: a check takes its address's failure and its
// account's strike first and gives them back only when the password was
// right, and one check at a time runs per address and per account. A
// burst is then answered at once, not hashed in parallel, and can never
// have more passwords checked than the limit allows.

// Kinds of password check, as Options.Checked is told them.
const (
	CheckSignIn         = "sign_in"
	CheckPasswordChange = "password_change"
)

// checkGate lets one password check (or new password's hash) run at a
// time per key, and at most max at once in all: addresses are cheap to
// an attacker (an IPv6 network hands out 2^64), cores are not, so however
// many addresses a flood comes from it holds at most max cores, and is
// answered 429 past that rather than queued. A key is held only while its
// check runs, so the gate holds at most two keys per request in flight:
// its memory is bounded by the connection cap, whoever picks the keys.
type checkGate struct {
	mu      sync.Mutex
	busy    map[string]bool
	running int
	max     int
}

func newCheckGate(max int) *checkGate { return &checkGate{busy: map[string]bool{}, max: max} }

// enter holds every key, or none when one of them is held already or
// max checks run.
func (g *checkGate) enter(keys ...string) (leave func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running >= g.max {
		return nil, false
	}
	for _, k := range keys {
		if g.busy[k] {
			return nil, false
		}
	}
	for _, k := range keys {
		g.busy[k] = true
	}
	g.running++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, k := range keys {
			delete(g.busy, k)
		}
		g.running--
	}, true
}

func (g *checkGate) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.busy)
}

// Gate keys: the client's network, and an account by its email.
func addressSlot(ip string) string    { return "address:" + clientNet(ip) }
func accountSlot(email string) string { return "account:" + email }

// clientNet is the address the password limits count a client by: an
// IPv4 address, or the /64 an IPv6 address is in, which one subscriber
// holds whole (so counting its 2^64 addresses apart would count nothing).
func clientNet(ip string) string {
	addr, err := netip.ParseAddr(ip)
	if err != nil || addr.Unmap().Is4() {
		return ip
	}
	if p, err := addr.Prefix(64); err == nil {
		return p.String()
	}
	return ip
}

// busyRetry is what a check refused for another one under way is told to
// wait: about what one check takes.
const busyRetry = time.Second

// passwordCheck is one check of a password a client chose: a sign-in, or
// the current password of a password change.
type passwordCheck struct {
	addr    string // the client's real address
	account string // the account's email, lowercased: its check slot
	strike  string // the back-off key a wrong password counts against
	// skipWait lets the check run inside the account's back-off window:
	// a browser that signed in to the account before (device.go).
	skipWait bool
	what     string // what the limits count, for their messages: "failed sign-ins"
}

func (pc passwordCheck) failureKey() string { return "login:" + clientNet(pc.addr) }

// reserve takes what pc costs before its password is hashed: the check
// slots of its address and account, one failure of the address and a
// strike against the account. done(right) gives the failure and the
// strike back when the password was right, and frees the slots. A check
// the limits refuse, or that finds another under way, is refused at
// once: waiting would let a burst hold a connection per attempt, and a
// person signs in once at a time (the forms disable their button while
// they post).
func (l *authLimits) reserve(pc passwordCheck) (done func(right bool), err error) {
	// A refused attempt never touches the slots, so a flood of refusals
	// cannot keep the owner's check from its account's slot.
	if err := l.refusal(pc); err != nil {
		return nil, err
	}
	leave, ok := l.checking.enter(addressSlot(pc.addr), accountSlot(pc.account))
	if !ok {
		return nil, rateLimited(busyRetry, "another password check from your address or for this account, or many on this server, is under way")
	}
	// Again, now that no other check can spend what the address and the
	// account have left.
	if err := l.refusal(pc); err != nil {
		leave()
		return nil, err
	}
	l.failures.Allow(pc.failureKey())
	l.accounts.fail(pc.strike)
	return func(right bool) {
		if right {
			l.failures.Refund(pc.failureKey())
			l.accounts.reset(pc.strike)
		}
		leave()
	}, nil
}

// refusal is the *RateLimitError of a check the limits do not allow
// now, or nil.
func (l *authLimits) refusal(pc passwordCheck) error {
	if key := pc.failureKey(); !l.failures.Ready(key) {
		return rateLimited(l.failures.RetryAfter(key), "too many "+pc.what+" from your address")
	}
	if wait := l.accounts.wait(pc.strike); wait > 0 && !pc.skipWait {
		return rateLimited(wait, "too many "+pc.what+" for this account")
	}
	return nil
}

// passwordMatches runs one bcrypt check of password against hash and
// counts it (Options.Checked) as it starts.
func (s *Service) passwordMatches(kind string, hash []byte, password string) bool {
	s.checked(kind)
	return s.compare(hash, []byte(password)) == nil
}
