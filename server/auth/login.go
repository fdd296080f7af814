package auth

import (
	"context"
	"errors"
	"strings"

	"github.com/labstack/echo/v4"

	"herd/models"
)

// VerifyLogin checks credentials under the limits (checks.go): an
// address that has failed too often is refused before any check, and so
// is an account inside its back-off window, unless this browser has
// signed in to it before (device.go); a check reserves a failure of
// either before it hashes, given back when the password was right, and
// runs alone for its address and its account. It takes the same time
// whether or not the email exists.
func (s *Service) VerifyLogin(c echo.Context, email, password string) (*models.User, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	done, err := s.limits.reserve(passwordCheck{
		addr: c.RealIP(), account: email, strike: email,
		skipWait: s.knownDevice(c, email), what: "failed sign-ins",
	})
	if err != nil {
		return nil, err
	}
	u, err := s.checkCredentials(c.Request().Context(), email, password)
	done(err == nil)
	if err != nil {
		return nil, err
	}
	if u.Disabled {
		return nil, ErrDisabled
	}
	s.rememberDevice(c, email)
	return u, nil
}

// checkCredentials returns the user with email if password is theirs.
func (s *Service) checkCredentials(ctx context.Context, email, password string) (*models.User, error) {
	if len(password) > MaxPasswordBytes {
		return nil, ErrBadCredentials // no stored password is longer
	}
	u, err := s.store.UserByEmail(ctx, email)
	if err != nil {
		if !errors.Is(err, models.ErrNotFound) {
			return nil, err
		}
		// Spend the same time as a real check, so response times do not
		// tell which emails have accounts.
		s.passwordMatches(CheckSignIn, s.dummyHash(), password)
		return nil, ErrBadCredentials
	}
	if !s.passwordMatches(CheckSignIn, []byte(u.PasswordHash), password) {
		return nil, ErrBadCredentials
	}
	return u, nil
}

// NewPasswordHash checks u's current password under the sign-in limits
// (checks.go), so a borrowed session cannot guess it faster than the
// sign-in page: the check reserves a failure of the address before it
// hashes and runs alone for the address and the account, with the new
// password's hash, which it returns. ErrWrongPassword when current is
// not u's, a *PasswordError when next breaks the rules.
func (s *Service) NewPasswordHash(c echo.Context, u *models.User, current, next string) (string, error) {
	// Its own back-off key: failed sign-ins by others must not keep the
	// signed-in owner from changing the password.
	done, err := s.limits.reserve(passwordCheck{
		addr: c.RealIP(), account: strings.ToLower(u.Email), strike: "password-change:" + u.ID,
		what: "wrong passwords",
	})
	if err != nil {
		return "", err
	}
	right := len(current) <= MaxPasswordBytes && s.passwordMatches(CheckPasswordChange, []byte(u.PasswordHash), current)
	defer done(right) // the new password's hash runs in the slot too
	if !right {
		return "", ErrWrongPassword
	}
	if err := CheckPassword(next); err != nil {
		return "", err
	}
	return s.HashPassword(next)
}

// LimitAttempt counts a set-up or sign-up (form) against the address's
// limit, and refuses it past the limit or while another password check
// or hash of the address runs (checks.go). leave frees the address once
// the attempt has hashed its password.
func (s *Service) LimitAttempt(c echo.Context, form string) (leave func(), err error) {
	ip := c.RealIP()
	leave, ok := s.limits.checking.enter(addressSlot(ip))
	if !ok {
		return nil, rateLimited(busyRetry, "another password check from your address is under way")
	}
	if key := form + ":" + ip; !s.limits.attempts.Allow(key) {
		leave()
		return nil, rateLimited(s.limits.attempts.RetryAfter(key), "too many attempts from your address")
	}
	return leave, nil
}

// LimitSignOn holds a single sign-on callback to the sign-in limits of
// its address: refused when the address has failed too often, it counts
// as a failure until done(true) gives it back, as a password check does
// (checks.go), so a flood of forged callbacks is stopped like one of
// wrong passwords.
func (s *Service) LimitSignOn(c echo.Context) (done func(ok bool), err error) {
	key := passwordCheck{addr: c.RealIP(), what: "failed sign-ins"}.failureKey()
	if !s.limits.failures.Allow(key) {
		return nil, rateLimited(s.limits.failures.RetryAfter(key), "too many failed sign-ins from your address")
	}
	return func(ok bool) {
		if ok {
			s.limits.failures.Refund(key)
		}
	}, nil
}

// LimitSignOnStart counts a single sign-on start against its address:
// each keeps a flow for ten minutes (server/sso), so one address may
// start six times the sign-in limit a minute, enough for an office
// behind one address, and no flood fills the store.
func (s *Service) LimitSignOnStart(c echo.Context) error {
	key := "sso-start:" + clientNet(c.RealIP())
	if !s.limits.starts.Allow(key) {
		return rateLimited(s.limits.starts.RetryAfter(key), "too many sign-ins started from your address")
	}
	return nil
}
