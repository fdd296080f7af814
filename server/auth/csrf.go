package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"herd/models"
)

// settingCSRFKey stores the instance's signing key, so forms shown before
// a restart still post after it.
const settingCSRFKey = "csrf_key"

// preCSRFTTL is how long a signed-out form's token is accepted: a page
// left open for a day still posts.
const preCSRFTTL = 24 * time.Hour

// formSigner signs the tokens of the signed-out forms (sign-in, sign-up,
// set-up) with a per-instance key, each bound to the browser it was
// shown in: the token is a MAC of that browser's random cookie
// (preCSRFCookie) and the time it was issued. A token fetched in another
// browser, the attacker's own, is no use with the victim's cookie, and a
// cookie alone is not a token; only a browser whose cookie an attacker
// can set (plain http, a sibling domain without __Host-) stays exposed.
type formSigner struct{ key []byte }

// loadFormSigner reads the key from the settings table, creating it on
// first start.
func loadFormSigner(ctx context.Context, store Store) (*formSigner, error) {
	v, err := store.Setting(ctx, settingCSRFKey)
	if err == nil {
		key, err := base64.RawStdEncoding.DecodeString(v)
		if err == nil && len(key) >= 32 {
			return &formSigner{key: key}, nil
		}
	} else if !errors.Is(err, models.ErrNotFound) {
		return nil, fmt.Errorf("auth: csrf key: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("auth: csrf key: %w", err)
	}
	if err := store.SetSetting(ctx, settingCSRFKey, base64.RawStdEncoding.EncodeToString(key)); err != nil {
		return nil, err
	}
	return &formSigner{key: key}, nil
}

// Purposes of the signed tokens: a token made for one is no use as the
// other.
const (
	purposeCSRF   = "herd pre-sign-in csrf"
	purposeDevice = "herd known device"
)

// sign returns body.issued.mac for purpose.
func (f *formSigner) sign(purpose, body string, now time.Time) string {
	body += "." + strconv.FormatInt(now.Unix(), 10)
	return body + "." + f.mac(purpose, body)
}

func (f *formSigner) mac(purpose, body string) string {
	m := hmac.New(sha256.New, f.key)
	m.Write([]byte(purpose + "\x00" + body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// open returns the body of tok, if this server signed it for purpose at
// most maxAge ago (a minute ahead is allowed for a clock step).
func (f *formSigner) open(purpose, tok string, now time.Time, maxAge time.Duration) (string, bool) {
	i := strings.LastIndexByte(tok, '.')
	if i < 0 || !hmac.Equal([]byte(tok[i+1:]), []byte(f.mac(purpose, tok[:i]))) {
		return "", false
	}
	j := strings.LastIndexByte(tok[:i], '.')
	sec, err := strconv.ParseInt(tok[j+1:i], 10, 64)
	if j < 0 || err != nil {
		return "", false
	}
	age := now.Sub(time.Unix(sec, 0))
	return tok[:j], age >= -time.Minute && age <= maxAge
}

// browserIDLen is the length of a browser's pre-sign-in cookie: 32
// random bytes, base64url.
const browserIDLen = 43

// newBrowserID is a browser's pre-sign-in cookie value.
func newBrowserID() string { return RandomToken() }

// validBrowserID reports whether id has the form newBrowserID makes;
// anything else (an older herd's cookie, which held the token itself) is
// replaced on the next signed-out page.
func validBrowserID(id string) bool {
	if len(id) != browserIDLen {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(id)
	return err == nil
}

// bind returns the form token of the browser whose cookie is browserID:
// issued.mac, the browser's id never in it.
func (f *formSigner) bind(browserID string, now time.Time) string {
	issued := strconv.FormatInt(now.Unix(), 10)
	return issued + "." + f.mac(purposeCSRF, browserID+"."+issued)
}

// boundTo reports whether tok was bound here to browserID at most
// preCSRFTTL ago (a minute ahead is allowed for a clock step).
func (f *formSigner) boundTo(browserID, tok string, now time.Time) bool {
	issued, mac, ok := strings.Cut(tok, ".")
	if !ok || !validBrowserID(browserID) || !hmac.Equal([]byte(mac), []byte(f.mac(purposeCSRF, browserID+"."+issued))) {
		return false
	}
	sec, err := strconv.ParseInt(issued, 10, 64)
	if err != nil {
		return false
	}
	age := now.Sub(time.Unix(sec, 0))
	return age >= -time.Minute && age <= preCSRFTTL
}

func isSafeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// CSRF protects every state change made with the session cookie: the
// request must carry the session's token in X-CSRF-Token or the _csrf form
// field. Bearer requests need none (a browser never adds the header on its
// own). Signed-out forms carry a token bound to the browser's own random
// cookie (formSigner), so a token fetched in another browser is no use.
func (s *Service) CSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if isSafeMethod(req.Method) || Bearer(c) {
			return next(c)
		}
		// The API sign-in takes a JSON body only: a cross-site page cannot
		// send one without a CORS preflight, which herd never grants.
		if req.URL.Path == "/api/auth/login" {
			return next(c)
		}
		// Signed-out API calls change nothing: RequireUser refuses them.
		if User(c) == nil && strings.HasPrefix(req.URL.Path, "/api/") {
			return next(c)
		}
		sent := req.Header.Get(csrfHeader)
		if sent == "" && isForm(req) {
			sent = c.FormValue(csrfField)
		}
		if !s.csrfMatches(c, sent) {
			return ErrCSRF
		}
		return next(c)
	}
}

// csrfMatches checks sent against the session's token, or for a signed-out
// form against the browser its token was bound to.
func (s *Service) csrfMatches(c echo.Context, sent string) bool {
	if sent == "" {
		return false
	}
	if sess := Session(c); sess != nil {
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
func (s *Service) fromOtherSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return true
	}
	return r.Header.Get("Origin") != "" && !s.SameOrigin(r)
}

// SameOrigin accepts a request whose Origin is this server: the configured
// public URL, or else the request's own Host.
func (s *Service) SameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	if s.publicURL != "" {
		return strings.EqualFold(u.Scheme+"://"+u.Host, s.publicURL)
	}
	return strings.EqualFold(u.Host, r.Host)
}

func isForm(r *http.Request) bool {
	ct := r.Header.Get(echo.HeaderContentType)
	return strings.HasPrefix(ct, echo.MIMEApplicationForm) || strings.HasPrefix(ct, echo.MIMEMultipartForm)
}

// preCSRF returns a signed-out form token bound to this browser's
// cookie, setting a new cookie when it has none.
func (s *Service) preCSRF(c echo.Context) string {
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

// PageCSRF is the token a page's forms carry: the session's, or a
// signed-out one bound to this browser; "" for a bearer (no forms).
func (s *Service) PageCSRF(c echo.Context) string {
	if sess := Session(c); sess != nil {
		return sess.CSRFToken
	}
	if User(c) != nil {
		return ""
	}
	return s.preCSRF(c)
}
