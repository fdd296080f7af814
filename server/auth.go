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
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/crypto/bcrypt"

	"herd/models"
)

const (
	sessionCookie = "herd_session"
	// preCSRFCookie carries the random id of a signed-out browser, to
	// which the tokens of its forms (set-up, sign-in, sign-up) are bound.
	preCSRFCookie = "herd_csrf"
	csrfField     = "_csrf"
	csrfHeader    = "X-CSRF-Token"
	// DefaultBcryptCost is the cost of stored password hashes.
	DefaultBcryptCost = 12
	// hostPrefix marks cookies the browser keeps only for this exact
	// origin, over HTTPS, on path /: no sibling subdomain can set or
	// overwrite them (used when public_url is https).
	hostPrefix = "__Host-"
)

// Context keys of the authenticated request.
const (
	ctxUser    = "herd.user"
	ctxSession = "herd.session"
	ctxBearer  = "herd.bearer"
	// ctxCredential names what signed the request in (a session or a
	// token; see sockets.go), so what revokes it can close its sockets.
	ctxCredential = "herd.credential"
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
			hash := hashToken(strings.TrimSpace(tok))
			u, err := s.store.TokenUser(req.Context(), hash)
			if err != nil {
				if errors.Is(err, models.ErrNotFound) {
					return &apiError{http.StatusUnauthorized, "unauthorized", "invalid API token"}
				}
				return err
			}
			c.Set(ctxUser, u)
			c.Set(ctxBearer, true)
			c.Set(ctxCredential, tokenCredential(hash))
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
func (s *Server) sessionFromCookie(c echo.Context) error {
	req := c.Request()
	id := s.cookieSessionID(req)
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
	c.Set(ctxCredential, sessionCredential(sess.ID))
	return nil
}

// cookieSessionID is the stored id (the hash) of the session the request's
// cookie names, or "" without one.
func (s *Server) cookieSessionID(r *http.Request) string {
	ck, err := r.Cookie(s.cookieName(sessionCookie))
	if err != nil || ck.Value == "" {
		return ""
	}
	return hashToken(ck.Value)
}

// userAgent is the request's User-Agent, cut to what a list shows.
func userAgent(r *http.Request) string {
	ua := r.UserAgent()
	if len(ua) > 256 {
		ua = strings.ToValidUTF8(ua[:256], "")
	}
	return ua
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

// errSessionRequired answers a bearer on the routes that manage the
// account's credentials.
var errSessionRequired = &apiError{http.StatusForbidden, "session_required",
	"an API token cannot manage the account's tokens, sessions or password: sign in (a token may only revoke itself, DELETE /api/tokens/current)"}

// requireSession keeps API tokens off the routes that manage the
// account's credentials (docs/API.md "Tokens and users"): a token that
// could mint tokens would outlive its own revocation, one that could list
// or end sessions or change the password would take the account over.
// Scripts need none of them; a signed-in browser does.
func requireSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Get(ctxBearer) != nil {
			return errSessionRequired
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
// own). Signed-out forms carry a token bound to the browser's own random
// cookie (csrf.go), so a token fetched in another browser is no use.
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
		if !s.csrfMatches(c, sent) {
			return errCSRF
		}
		return next(c)
	}
}

// csrfMatches checks sent against the session's token, or for a signed-out
// form against the browser its token was bound to.
func (s *Server) csrfMatches(c echo.Context, sent string) bool {
	if sent == "" {
		return false
	}
	if sess := currentSession(c); sess != nil {
		return subtle.ConstantTimeCompare([]byte(sent), []byte(sess.CSRFToken)) == 1
	}
	if s.fromOtherSite(c.Request()) {
		return false
	}
	ck, err := c.Request().Cookie(s.cookieName(preCSRFCookie))
	return err == nil && s.signer.boundTo(ck.Value, sent, s.now())
}

// fromOtherSite reports whether the browser says a page of another origin
// sent r. A signed-out form's token is only as good as its cookie, which
// an attacker who can set cookies for herd's site (plain http, a sibling
// subdomain) can plant with a token of their own; the page that then
// posts is theirs, and the browser says so. Clients that send neither
// header (curl, scripts) rely on the token alone.
func (s *Server) fromOtherSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return true
	}
	return r.Header.Get("Origin") != "" && !s.sameOrigin(r)
}

func isForm(r *http.Request) bool {
	ct := r.Header.Get(echo.HeaderContentType)
	return strings.HasPrefix(ct, echo.MIMEApplicationForm) || strings.HasPrefix(ct, echo.MIMEMultipartForm)
}

// preCSRF returns a signed-out form token bound to this browser's
// cookie, setting a new cookie when it has none (csrf.go).
func (s *Server) preCSRF(c echo.Context) string {
	ck, err := c.Request().Cookie(s.cookieName(preCSRFCookie))
	id := ""
	if err == nil && validBrowserID(ck.Value) {
		id = ck.Value
	} else {
		id = newBrowserID()
		c.SetCookie(s.cookie(preCSRFCookie, id, time.Time{}))
	}
	return s.signer.bind(id, s.now())
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

// cookieName is name with the __Host- prefix when cookies are secure.
func (s *Server) cookieName(name string) string {
	if s.secureCookies {
		return hostPrefix + name
	}
	return name
}

func (s *Server) cookie(name, value string, expires time.Time) *http.Cookie {
	return &http.Cookie{
		Name: s.cookieName(name), Value: value, Path: "/", Expires: expires,
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
	req := c.Request()
	if id := s.cookieSessionID(req); id != "" {
		_ = s.store.DeleteSession(req.Context(), id)
	}
	tok := randomToken()
	now := s.now().UTC()
	sess := &models.Session{
		ID: hashToken(tok), UserID: u.ID, CSRFToken: randomToken(),
		CreatedAt: now, ExpiresAt: now.Add(s.sessionTTL),
		LastSeenAt: &now, IP: c.RealIP(), UserAgent: userAgent(req),
	}
	if err := s.store.CreateSession(req.Context(), sess); err != nil {
		return "", err
	}
	c.SetCookie(s.cookie(sessionCookie, tok, sess.ExpiresAt))
	s.clearCookie(c, preCSRFCookie)
	c.Set(ctxUser, u)
	c.Set(ctxSession, sess)
	c.Set(ctxCredential, sessionCredential(sess.ID))
	return sess.CSRFToken, nil
}

// signOut ends this request's session and closes its sockets.
func (s *Server) signOut(c echo.Context) error {
	if id := s.cookieSessionID(c.Request()); id != "" {
		if err := s.endSession(c.Request().Context(), id); err != nil {
			return err
		}
	}
	s.clearCookie(c, sessionCookie)
	return nil
}

// verifyLogin checks credentials under the limits (ratelimit.go,
// checks.go): an address that has failed too often is refused before any
// check, and so is an account inside its back-off window, unless this
// browser has signed in to it before (device.go); a check reserves a
// failure of either before it hashes, given back when the password was
// right, and runs alone for its address and its account. It takes the
// same time whether or not the email exists.
func (s *Server) verifyLogin(c echo.Context, email, password string) (*models.User, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	done, ae := s.limits.reserve(c, passwordCheck{
		addr: c.RealIP(), account: email, strike: email,
		skipWait: s.knownDevice(c, email), what: "failed sign-ins",
	})
	if ae != nil {
		return nil, ae
	}
	u, err := s.checkCredentials(c.Request().Context(), email, password)
	done(err == nil)
	if err != nil {
		return nil, err
	}
	if u.Disabled {
		return nil, &apiError{http.StatusForbidden, "disabled", "this account is disabled"}
	}
	s.rememberDevice(c, email)
	return u, nil
}

var errBadCredentials = &apiError{http.StatusUnauthorized, "invalid_credentials", "wrong email or password"}

// checkCredentials returns the user with email if password is theirs.
func (s *Server) checkCredentials(ctx context.Context, email, password string) (*models.User, error) {
	if len(password) > maxPasswordBytes {
		return nil, errBadCredentials // no stored password is longer
	}
	u, err := s.store.UserByEmail(ctx, email)
	if err != nil {
		if !errors.Is(err, models.ErrNotFound) {
			return nil, err
		}
		// Spend the same time as a real check, so response times do not
		// tell which emails have accounts.
		s.passwordMatches(checkSignIn, s.dummyHash(), password)
		return nil, errBadCredentials
	}
	if !s.passwordMatches(checkSignIn, []byte(u.PasswordHash), password) {
		return nil, errBadCredentials
	}
	return u, nil
}
