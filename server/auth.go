package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/time/rate"

	"herd/models"
)

const (
	sessionCookie = "herd_session"
	// preCSRFCookie carries the double-submit token of the forms shown to
	// signed-out visitors (set-up, sign-in, sign-up).
	preCSRFCookie = "herd_csrf"
	csrfField     = "_csrf"
	csrfHeader    = "X-CSRF-Token"
	// DefaultBcryptCost is the cost of stored password hashes.
	DefaultBcryptCost = 12
	minPassword       = 8
	maxPassword       = 256 // bcrypt reads 72 bytes; longer input is refused rather than silently cut
)

// Context keys of the authenticated request.
const (
	ctxUser    = "herd.user"
	ctxSession = "herd.session"
	ctxBearer  = "herd.bearer"
)

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashToken(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}

func (s *Server) hashPassword(pw string) (string, error) {
	b, err := bcrypt.GenerateFromPassword([]byte(pw), s.bcryptCost)
	return string(b), err
}

// storeUser stores a user with the hash of password (see
// models.Store.CreateUser for role and onlyIfEmpty).
func (s *Server) storeUser(ctx context.Context, email, password, role string, onlyIfEmpty bool) (*models.User, error) {
	hash, err := s.hashPassword(password)
	if err != nil {
		return nil, err
	}
	return s.store.CreateUser(ctx, email, hash, role, onlyIfEmpty)
}

// checkPassword reports whether pw has an acceptable length.
func checkPassword(pw string) *apiError {
	switch {
	case len(pw) < minPassword:
		return errUnprocessable("the password needs at least %d characters", minPassword)
	case len(pw) > maxPassword:
		return errUnprocessable("the password may have at most %d characters", maxPassword)
	}
	return nil
}

func checkEmail(email string) *apiError {
	e := strings.TrimSpace(email)
	at := strings.LastIndexByte(e, '@')
	if at < 1 || at == len(e)-1 || len(e) > 254 || strings.ContainsAny(e, " \t\r\n<>\"") {
		return errUnprocessable("enter a valid email address")
	}
	return nil
}

// authenticate resolves the user from a bearer token or the session cookie.
// It never rejects: routes decide what they require.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if h := req.Header.Get("Authorization"); h != "" {
			tok, ok := strings.CutPrefix(h, "Bearer ")
			if !ok || strings.TrimSpace(tok) == "" {
				return errUnauthorized
			}
			u, err := s.store.TokenUser(req.Context(), hashToken(strings.TrimSpace(tok)))
			if err != nil {
				if errors.Is(err, models.ErrNotFound) {
					return &apiError{http.StatusUnauthorized, "unauthorized", "invalid API token"}
				}
				return err
			}
			c.Set(ctxUser, u)
			c.Set(ctxBearer, true)
			return next(c)
		}
		if ck, err := req.Cookie(sessionCookie); err == nil && ck.Value != "" {
			sess, u, err := s.store.SessionUser(req.Context(), hashToken(ck.Value))
			switch {
			case err == nil:
				c.Set(ctxUser, u)
				c.Set(ctxSession, sess)
			case errors.Is(err, models.ErrNotFound):
				s.clearCookie(c, sessionCookie)
			default:
				return err
			}
		}
		return next(c)
	}
}

func currentUser(c echo.Context) *models.User {
	u, _ := c.Get(ctxUser).(*models.User)
	return u
}

func currentSession(c echo.Context) *models.Session {
	s, _ := c.Get(ctxSession).(*models.Session)
	return s
}

// requireUser answers 401 (API) or redirects to sign-in (pages).
func requireUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if currentUser(c) == nil {
			return errUnauthorized
		}
		return next(c)
	}
}

// requireAdmin answers 403 to signed-in users who are not admins.
func requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		u := currentUser(c)
		if u == nil {
			return errUnauthorized
		}
		if !u.IsAdmin() {
			return errForbidden
		}
		return next(c)
	}
}

func isSafeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// csrf protects every state change made with the session cookie: the
// request must carry the session's token in X-CSRF-Token or the _csrf form
// field. Bearer requests need none (a browser never adds the header on its
// own). Signed-out forms use a double-submit cookie.
func (s *Server) csrf(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if isSafeMethod(req.Method) || c.Get(ctxBearer) != nil {
			return next(c)
		}
		// The API sign-in takes a JSON body only: a cross-site page cannot
		// send one without a CORS preflight, which herd never grants.
		if req.URL.Path == "/api/auth/login" {
			return next(c)
		}
		// Signed-out API calls change nothing: requireUser answers 401.
		if currentUser(c) == nil && strings.HasPrefix(req.URL.Path, "/api/") {
			return next(c)
		}
		sent := req.Header.Get(csrfHeader)
		if sent == "" && isForm(req) {
			sent = c.FormValue(csrfField)
		}
		want := ""
		if sess := currentSession(c); sess != nil {
			want = sess.CSRFToken
		} else if ck, err := req.Cookie(preCSRFCookie); err == nil {
			want = ck.Value
		}
		if want == "" || sent == "" || subtle.ConstantTimeCompare([]byte(sent), []byte(want)) != 1 {
			return errCSRF
		}
		return next(c)
	}
}

func isForm(r *http.Request) bool {
	ct := r.Header.Get(echo.HeaderContentType)
	return strings.HasPrefix(ct, echo.MIMEApplicationForm) || strings.HasPrefix(ct, echo.MIMEMultipartForm)
}

// preCSRF returns the signed-out form token, setting its cookie if needed.
func (s *Server) preCSRF(c echo.Context) string {
	if ck, err := c.Request().Cookie(preCSRFCookie); err == nil && len(ck.Value) >= 32 {
		return ck.Value
	}
	tok := randomToken()
	c.SetCookie(s.cookie(preCSRFCookie, tok, time.Time{}))
	return tok
}

// pageCSRF is the token a page's forms carry.
func (s *Server) pageCSRF(c echo.Context) string {
	if sess := currentSession(c); sess != nil {
		return sess.CSRFToken
	}
	if currentUser(c) != nil {
		return "" // bearer: no forms
	}
	return s.preCSRF(c)
}

func (s *Server) cookie(name, value string, expires time.Time) *http.Cookie {
	return &http.Cookie{
		Name: name, Value: value, Path: "/", Expires: expires,
		HttpOnly: true, Secure: s.secureCookies, SameSite: http.SameSiteLaxMode,
	}
}

func (s *Server) clearCookie(c echo.Context, name string) {
	ck := s.cookie(name, "", time.Unix(0, 0))
	ck.MaxAge = -1
	c.SetCookie(ck)
}

// signIn starts a new session for u (rotating any previous one) and
// returns its CSRF token.
func (s *Server) signIn(c echo.Context, u *models.User) (string, error) {
	ctx := c.Request().Context()
	if ck, err := c.Request().Cookie(sessionCookie); err == nil && ck.Value != "" {
		_ = s.store.DeleteSession(ctx, hashToken(ck.Value))
	}
	tok := randomToken()
	now := s.now().UTC()
	sess := &models.Session{
		ID: hashToken(tok), UserID: u.ID, CSRFToken: randomToken(),
		CreatedAt: now, ExpiresAt: now.Add(s.sessionTTL),
	}
	if err := s.store.CreateSession(ctx, sess); err != nil {
		return "", err
	}
	c.SetCookie(s.cookie(sessionCookie, tok, sess.ExpiresAt))
	s.clearCookie(c, preCSRFCookie)
	c.Set(ctxUser, u)
	c.Set(ctxSession, sess)
	return sess.CSRFToken, nil
}

func (s *Server) signOut(c echo.Context) error {
	if ck, err := c.Request().Cookie(sessionCookie); err == nil && ck.Value != "" {
		if err := s.store.DeleteSession(c.Request().Context(), hashToken(ck.Value)); err != nil {
			return err
		}
	}
	s.clearCookie(c, sessionCookie)
	return nil
}

// verifyLogin checks credentials under the rate limit. It takes the same
// time whether or not the email exists.
func (s *Server) verifyLogin(c echo.Context, email, password string) (*models.User, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	if !s.limiter.allow("ip:"+c.RealIP()) || !s.limiter.allow("email:"+email) {
		return nil, errRateLimited
	}
	bad := &apiError{http.StatusUnauthorized, "invalid_credentials", "wrong email or password"}
	if len(password) > maxPassword {
		return nil, bad
	}
	u, err := s.store.UserByEmail(c.Request().Context(), email)
	if err != nil {
		if !errors.Is(err, models.ErrNotFound) {
			return nil, err
		}
		// Spend the same time as a real check, so response times do not
		// tell which emails have accounts.
		_ = bcrypt.CompareHashAndPassword(s.dummyHash(), []byte(password))
		return nil, bad
	}
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(password)) != nil {
		return nil, bad
	}
	if u.Disabled {
		return nil, &apiError{http.StatusForbidden, "disabled", "this account is disabled"}
	}
	return u, nil
}

// limiter is a per-key token bucket: N attempts a minute, burst N. Stale
// keys are dropped as new ones arrive, so memory stays bounded.
type limiter struct {
	mu       sync.Mutex
	perMin   int
	buckets  map[string]*bucket
	now      func() time.Time
	maxItems int
}

type bucket struct {
	l    *rate.Limiter
	seen time.Time
}

func newLimiter(perMinute int, now func() time.Time) *limiter {
	return &limiter{perMin: perMinute, buckets: map[string]*bucket{}, now: now, maxItems: 10000}
}

func (l *limiter) allow(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if len(l.buckets) >= l.maxItems {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > time.Minute {
				delete(l.buckets, k)
			}
		}
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{l: rate.NewLimiter(rate.Limit(float64(l.perMin)/60), l.perMin)}
		l.buckets[key] = b
	}
	b.seen = now
	return b.l.AllowN(now, 1)
}
