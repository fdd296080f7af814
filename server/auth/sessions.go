package auth

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"herd/models"
)

const (
	sessionCookie = "herd_session"
	// preCSRFCookie carries the random id of a signed-out browser, to
	// which the tokens of its forms (set-up, sign-in, sign-up) are bound.
	preCSRFCookie = "herd_csrf"
	csrfField     = "_csrf"
	csrfHeader    = "X-CSRF-Token"
	// hostPrefix marks cookies the browser keeps only for this exact
	// origin, over HTTPS, on path /: no sibling subdomain can set or
	// overwrite them (used when public_url is https).
	hostPrefix = "__Host-"
)

// Authenticate resolves the user from a bearer token or the session
// cookie. It never rejects a request without credentials: routes decide
// what they require (RequireUser).
func (s *Service) Authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if h := req.Header.Get("Authorization"); h != "" {
			tok, ok := strings.CutPrefix(h, "Bearer ")
			if !ok || strings.TrimSpace(tok) == "" {
				return ErrUnauthorized
			}
			hash := HashToken(strings.TrimSpace(tok))
			u, err := s.store.TokenUser(req.Context(), hash)
			if err != nil {
				if errors.Is(err, models.ErrNotFound) {
					return ErrInvalidToken
				}
				return err
			}
			c.Set(ctxUser, u)
			c.Set(ctxBearer, true)
			c.Set(ctxCredential, TokenCredential(hash))
			return next(c)
		}
		if err := s.sessionFromCookie(c); err != nil {
			return err
		}
		return next(c)
	}
}

// sessionFromCookie signs the request in with its session cookie, if it
// names a live session, and notes where the session was last seen.
func (s *Service) sessionFromCookie(c echo.Context) error {
	req := c.Request()
	id := s.SessionID(req)
	if id == "" {
		return nil
	}
	sess, u, err := s.store.SessionUser(req.Context(), id)
	switch {
	case errors.Is(err, models.ErrNotFound):
		s.clearCookie(c, sessionCookie)
		return nil
	case err != nil:
		return err
	}
	if err := s.store.TouchSession(req.Context(), sess, c.RealIP(), userAgent(req)); err != nil {
		s.log.Warn("session: last seen", "err", err)
	}
	c.Set(ctxUser, u)
	c.Set(ctxSession, sess)
	c.Set(ctxCredential, SessionCredential(sess.ID))
	return nil
}

// SessionID is the stored id (the hash) of the session the request's
// cookie names, or "" without one.
func (s *Service) SessionID(r *http.Request) string {
	ck, err := r.Cookie(s.cookieName(sessionCookie))
	if err != nil || ck.Value == "" {
		return ""
	}
	return HashToken(ck.Value)
}

// userAgent is the request's User-Agent, cut to what a list shows.
func userAgent(r *http.Request) string {
	ua := r.UserAgent()
	if len(ua) > 256 {
		ua = strings.ToValidUTF8(ua[:256], "")
	}
	return ua
}

// RequireUser refuses a signed-out request with ErrUnauthorized.
func RequireUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if User(c) == nil {
			return ErrUnauthorized
		}
		return next(c)
	}
}

// RequireAdmin refuses signed-in users who are not admins with
// ErrForbidden.
func RequireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		u := User(c)
		if u == nil {
			return ErrUnauthorized
		}
		if !u.IsAdmin() {
			return ErrForbidden
		}
		return next(c)
	}
}

// RequireSession keeps API tokens off the routes that manage the
// account's credentials (docs/API.md "Tokens and users"): a token that
// could mint tokens would outlive its own revocation, one that could list
// or end sessions or change the password would take the account over.
// Scripts need none of them; a signed-in browser does.
func RequireSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if Bearer(c) {
			return ErrSessionRequired
		}
		return next(c)
	}
}

// cookieName is name with the __Host- prefix when cookies are secure.
func (s *Service) cookieName(name string) string {
	if s.secureCookies {
		return hostPrefix + name
	}
	return name
}

func (s *Service) cookie(name, value string, expires time.Time) *http.Cookie {
	return &http.Cookie{
		Name: s.cookieName(name), Value: value, Path: "/", Expires: expires,
		HttpOnly: true, Secure: s.secureCookies, SameSite: http.SameSiteLaxMode,
	}
}

func (s *Service) clearCookie(c echo.Context, name string) {
	ck := s.cookie(name, "", time.Unix(0, 0))
	ck.MaxAge = -1
	c.SetCookie(ck)
}

// ClearSession tells the browser to drop its session cookie: its session
// was ended.
func (s *Service) ClearSession(c echo.Context) { s.clearCookie(c, sessionCookie) }

// SignIn starts a new session for u (ending the request's previous one,
// if any) and returns its CSRF token.
func (s *Service) SignIn(c echo.Context, u *models.User) (string, error) {
	return s.signIn(c, u, "", "")
}

// SignInWithProvider starts a session for u as SignIn, signed in by the
// single sign-on provider named provider, keeping its ID token for the
// provider's end-session at sign-out.
func (s *Service) SignInWithProvider(c echo.Context, u *models.User, provider, idToken string) (string, error) {
	return s.signIn(c, u, provider, idToken)
}

func (s *Service) signIn(c echo.Context, u *models.User, provider, idToken string) (string, error) {
	req := c.Request()
	if id := s.SessionID(req); id != "" {
		_ = s.store.DeleteSession(req.Context(), id)
	}
	tok := RandomToken()
	now := s.now().UTC()
	sess := &models.Session{
		ID: HashToken(tok), UserID: u.ID, CSRFToken: RandomToken(),
		CreatedAt: now, ExpiresAt: now.Add(s.sessionTTL),
		LastSeenAt: &now, IP: c.RealIP(), UserAgent: userAgent(req),
		Provider: provider, IDToken: idToken,
	}
	if err := s.store.CreateSession(req.Context(), sess); err != nil {
		return "", err
	}
	c.SetCookie(s.cookie(sessionCookie, tok, sess.ExpiresAt))
	s.clearCookie(c, preCSRFCookie)
	c.Set(ctxUser, u)
	c.Set(ctxSession, sess)
	c.Set(ctxCredential, SessionCredential(sess.ID))
	return sess.CSRFToken, nil
}
