package auth

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors; their texts are safe to show. server/errors.go gives
// each its status.
var (
	// ErrUnauthorized: the route needs a signed-in user.
	ErrUnauthorized = errors.New("sign in first")
	// ErrInvalidToken: the bearer token names no live token.
	ErrInvalidToken = errors.New("invalid API token")
	// ErrForbidden: the route is for admins.
	ErrForbidden = errors.New("admins only")
	// ErrSessionRequired answers a bearer on the routes that manage the
	// account's credentials (RequireSession).
	ErrSessionRequired = errors.New("an API token cannot manage the account's tokens, sessions or password: sign in (a token may only revoke itself, DELETE /api/tokens/current)")
	// ErrCSRF: a cookie-signed state change without its token.
	ErrCSRF = errors.New("missing or wrong CSRF token; reload the page")
	// ErrBadCredentials: a sign-in's email or password is wrong (which
	// one is not said).
	ErrBadCredentials = errors.New("wrong email or password")
	// ErrDisabled: the right password of a disabled account.
	ErrDisabled = errors.New("this account is disabled")
	// ErrWrongPassword: a password change's current password is wrong.
	ErrWrongPassword = errors.New("the current password is wrong")
	// ErrInvalidEmail: a new account's email is not an address.
	ErrInvalidEmail = errors.New("enter a valid email address")
	// ErrSetupToken: the set-up form's token is not the one herd printed.
	ErrSetupToken = errors.New("this set-up link is not valid: open the one herd printed when it started")
	// ErrCredentialGone: a credential signs its user in no more (signed
	// out, expired, revoked, the user disabled or deleted).
	ErrCredentialGone = errors.New("credential ended")
	// ErrWeakPassword is what every *PasswordError is.
	ErrWeakPassword = errors.New("weak password")
	// ErrRateLimited is what every *RateLimitError is.
	ErrRateLimited = errors.New("too many attempts; wait a minute and try again")
	// ErrUnknownHost is what every *HostError is.
	ErrUnknownHost = errors.New("unknown host")
)

// PasswordError is a new password the rules refuse, and why.
type PasswordError struct{ Reason string }

func (e *PasswordError) Error() string        { return e.Reason }
func (e *PasswordError) Is(target error) bool { return target == ErrWeakPassword }

func weakPassword(format string, a ...any) error {
	return &PasswordError{Reason: fmt.Sprintf(format, a...)}
}

// RateLimitError is an attempt the limits refuse: why, and how long to
// wait.
type RateLimitError struct {
	Why        string
	RetryAfter time.Duration
}

func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// Seconds is RetryAfter in whole seconds, at least one: the Retry-After
// header.
func (e *RateLimitError) Seconds() int {
	return max(int((e.RetryAfter+time.Second-1)/time.Second), 1)
}

// Error says why and how long to wait.
func (e *RateLimitError) Error() string {
	secs := e.Seconds()
	after := fmt.Sprintf("%d seconds", secs)
	switch {
	case secs == 1:
		after = "a second"
	case secs >= 90:
		after = fmt.Sprintf("%d minutes", (secs+59)/60)
	}
	return e.Why + "; try again in " + after
}

func rateLimited(wait time.Duration, why string) error {
	return &RateLimitError{Why: why, RetryAfter: wait}
}

// HostError is a request to a Host herd does not serve.
type HostError struct{ Host string }

func (e *HostError) Is(target error) bool { return target == ErrUnknownHost }

func (e *HostError) Error() string {
	return "herd does not answer to the host " + quoteHost(e.Host) + ": browse to it by a configured name, or add this one to server.allowed_hosts"
}

// quoteHost quotes a header value for a message, cut to a sane length.
func quoteHost(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}
