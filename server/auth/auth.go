// Package auth owns who a request is: sessions and their cookies, API
// tokens, the CSRF checks and the signed-out forms' signer, passwords
// (rules, hashing, checks under the sign-in limits), known devices, the
// Host allow-list and the one-time set-up link. It answers with sentinel
// errors, never HTTP statuses: server maps them (server/errors.go).
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/crypto/bcrypt"

	"herd/models"
)

// Store is what auth reads and writes: implemented by *models.Store.
type Store interface {
	UserByEmail(ctx context.Context, email string) (*models.User, error)
	CreateUser(ctx context.Context, email, hash, role string, onlyIfEmpty bool) (*models.User, error)
	CountUsers(ctx context.Context) (int64, error)
	TokenUser(ctx context.Context, hash string) (*models.User, error)
	SessionUser(ctx context.Context, id string) (*models.Session, *models.User, error)
	CreateSession(ctx context.Context, sess *models.Session) error
	TouchSession(ctx context.Context, sess *models.Session, ip, userAgent string) error
	DeleteSession(ctx context.Context, id string) error
	Setting(ctx context.Context, key string) (string, error)
	SetSetting(ctx context.Context, key, value string) error
}

var _ Store = (*models.Store)(nil)

// DefaultBcryptCost is the cost of stored password hashes.
const DefaultBcryptCost = 12

// Options builds a Service.
type Options struct {
	Store Store
	// PublicURL is the origin behind a TLS proxy ("" = the request's
	// host); an https one makes every cookie __Host- and Secure.
	PublicURL string
	// AllowedHosts are Host names served beside loopback and PublicURL's.
	AllowedHosts []string
	SessionTTL   time.Duration // 0 = 30 days
	// LoginPerMinute is each address's failed sign-ins, and set-ups and
	// sign-ups, a minute; 0 = 10.
	LoginPerMinute int
	BcryptCost     int // 0 = DefaultBcryptCost; tests lower it
	Now            func() time.Time
	Logger         *slog.Logger
	// Compare is bcrypt's check; nil = bcrypt.CompareHashAndPassword.
	// Tests hold it to look at a check in flight.
	Compare func(hash, password []byte) error
	// Checked is told of each password check as it starts, by kind
	// (CheckSignIn, CheckPasswordChange); nil: nobody counts.
	Checked func(kind string)
}

// Service is herd's authentication, built once with its options.
type Service struct {
	store         Store
	publicURL     string
	secureCookies bool
	sessionTTL    time.Duration
	bcryptCost    int
	now           func() time.Time
	log           *slog.Logger
	compare       func(hash, password []byte) error
	checked       func(kind string)
	dummyHash     func() []byte
	hosts         hostGuard
	setup         *setupGate
	signer        *formSigner
	limits        *authLimits
}

// New builds the service, loading (or making, on first start) the form
// signer's key.
func New(ctx context.Context, o Options) (*Service, error) {
	o = o.withDefaults()
	signer, err := loadFormSigner(ctx, o.Store)
	if err != nil {
		return nil, err
	}
	s := &Service{
		store:         o.Store,
		publicURL:     strings.TrimRight(o.PublicURL, "/"),
		secureCookies: strings.HasPrefix(o.PublicURL, "https://"),
		sessionTTL:    o.SessionTTL,
		bcryptCost:    o.BcryptCost,
		now:           o.Now,
		log:           o.Logger,
		compare:       o.Compare,
		checked:       o.Checked,
		hosts:         newHostGuard(o.PublicURL, o.AllowedHosts),
		setup:         newSetupGate(),
		signer:        signer,
		limits:        newAuthLimits(o.LoginPerMinute, o.Now),
	}
	s.dummyHash = sync.OnceValue(func() []byte {
		h, _ := bcrypt.GenerateFromPassword([]byte("herd-dummy-password"), s.bcryptCost)
		return h
	})
	return s, nil
}

func (o Options) withDefaults() Options {
	if o.SessionTTL <= 0 {
		o.SessionTTL = 30 * 24 * time.Hour
	}
	if o.LoginPerMinute <= 0 {
		o.LoginPerMinute = 10
	}
	if o.BcryptCost == 0 {
		o.BcryptCost = DefaultBcryptCost
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Compare == nil {
		o.Compare = bcrypt.CompareHashAndPassword
	}
	if o.Checked == nil {
		o.Checked = func(string) {}
	}
	return o
}

// Context keys of the authenticated request.
const (
	ctxUser    = "herd.user"
	ctxSession = "herd.session"
	ctxBearer  = "herd.bearer"
	// ctxCredential names what signed the request in (SessionCredential,
	// TokenCredential), so what revokes it can close its sockets.
	ctxCredential = "herd.credential"
)

// User is the request's signed-in user, or nil.
func User(c echo.Context) *models.User {
	u, _ := c.Get(ctxUser).(*models.User)
	return u
}

// SetUser replaces the request's user with u, the same user as stored
// after a change (its preferences), for the rest of the request.
func SetUser(c echo.Context, u *models.User) { c.Set(ctxUser, u) }

// Session is the request's session, or nil (signed out, or a bearer).
func Session(c echo.Context) *models.Session {
	s, _ := c.Get(ctxSession).(*models.Session)
	return s
}

// Bearer reports whether an API token signed the request in.
func Bearer(c echo.Context) bool { return c.Get(ctxBearer) != nil }

// Credential names what signed the request in ("" signed out).
func Credential(c echo.Context) string {
	cred, _ := c.Get(ctxCredential).(string)
	return cred
}

// RandomToken is 32 random bytes, base64url: session cookies, API
// tokens, CSRF tokens.
func RandomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// HashToken is what the store keeps of a session cookie or an API token.
func HashToken(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}
