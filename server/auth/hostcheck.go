package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
)

// hostGuard is the set of Host names herd answers to. A DNS-rebinding
// page reaches herd from the victim's browser under the attacker's own
// domain name, so refusing every Host herd does not know keeps such a
// page from reading or changing anything, the set-up form included.
type hostGuard map[string]bool

// loopbackHosts are always served: a browser on the same machine.
var loopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

func newHostGuard(publicURL string, allowed []string) hostGuard {
	g := hostGuard{}
	for _, h := range loopbackHosts {
		g[h] = true
	}
	if u, err := url.Parse(publicURL); err == nil && u.Hostname() != "" {
		g[NormalHost(u.Hostname())] = true
	}
	for _, h := range allowed {
		g[NormalHost(h)] = true
	}
	return g
}

// NormalHost is a Host header's name without port, brackets, case or a
// final dot.
func NormalHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

func (g hostGuard) allows(host string) bool { return host != "" && g[NormalHost(host)] }

// CheckHost refuses a Host herd does not serve with a *HostError,
// before any other handler runs: as JSON under /api/, else as plain text
// here (pages render with the request's Host). The health probes are
// exempt: an orchestrator probes by address, and their answers tell
// nothing.
func (s *Service) CheckHost(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if s.hosts.allows(req.Host) || req.URL.Path == "/healthz" || req.URL.Path == "/readyz" {
			return next(c)
		}
		err := &HostError{Host: req.Host}
		c.Response().Header().Set("Cache-Control", "no-store")
		if strings.HasPrefix(req.URL.Path, "/api/") {
			return err
		}
		return c.String(http.StatusMisdirectedRequest, err.Error()+"\n")
	}
}

// setupGate holds the one-time token of the set-up page. It lives in
// memory only: herd prints it at start (SetupURL) while no user exists,
// so only someone who can read herd's output can create the first admin,
// not any page the owner's browser happens to open.
type setupGate struct {
	mu    sync.Mutex
	token string // "" once used
}

func newSetupGate() *setupGate { return &setupGate{token: RandomToken()} }

// valid compares tok with the token in constant time (both hashed first,
// so their lengths tell nothing either).
func (g *setupGate) valid(tok string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.token == "" || tok == "" {
		return false
	}
	want, got := sha256.Sum256([]byte(g.token)), sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(want[:], got[:]) == 1
}

// use spends the token: the set-up page works once.
func (g *setupGate) use() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.token = ""
}

// SetupURL is the link that creates the first admin, with its one-time
// token, on base (such as http://127.0.0.1:8080); "" once any user
// exists. main prints it at start.
func (s *Service) SetupURL(ctx context.Context, base string) (string, error) {
	n, err := s.store.CountUsers(ctx)
	if err != nil || n > 0 {
		return "", err
	}
	s.setup.mu.Lock()
	defer s.setup.mu.Unlock()
	if s.setup.token == "" {
		return "", nil
	}
	return strings.TrimRight(base, "/") + "/setup?token=" + url.QueryEscape(s.setup.token), nil
}

// SetupValid reports whether tok is the set-up link's token, unused.
func (s *Service) SetupValid(tok string) bool { return s.setup.valid(tok) }

// UseSetup spends the set-up token: the first admin exists.
func (s *Service) UseSetup() { s.setup.use() }
