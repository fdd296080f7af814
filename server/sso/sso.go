// Package sso signs users in with OpenID Connect (docs/DESIGN.md §10):
// each configured provider is discovered when first needed and again
// after a failure, so an identity provider that is down never keeps herd
// from starting; a sign-in is the authorization code flow with PKCE,
// state and nonce, its flow kept server-side and bound to the browser by
// a cookie (flow.go); the answer becomes an Identity, checked against the
// provider's allowed domains and groups (identity.go). Who the identity
// is in herd (a user, a role, a session) is server's and models' to say.
package sso

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"herd/models"
)

// FlowStore keeps the sign-ins under way: implemented by *models.Store.
type FlowStore interface {
	CreateLoginFlow(ctx context.Context, f *models.LoginFlow) error
	TakeLoginFlow(ctx context.Context, id string) (*models.LoginFlow, error)
}

var _ FlowStore = (*models.Store)(nil)

// Options builds a Service.
type Options struct {
	Providers []ProviderConfig
	Store     FlowStore
	// SecureCookies makes the flow cookie __Host- and Secure (an https
	// public_url).
	SecureCookies bool
	// HTTPClient reaches the providers; nil = http.DefaultClient.
	HTTPClient *http.Client
	Now        func() time.Time
	Logger     *slog.Logger
}

// FlowTTL is how long a sign-in may take at the provider.
const FlowTTL = 10 * time.Minute

// Discovery timing: a page waits at most pageWait for a provider it
// offers, a sign-in at most startWait; a failure is remembered for
// retryAfter, so a provider that is down costs each page nothing.
const (
	pageWait   = 2 * time.Second
	startWait  = 10 * time.Second
	retryAfter = 15 * time.Second
)

// Service is herd's single sign-on, built once.
type Service struct {
	list   []*provider
	byName map[string]*provider
	store  FlowStore
	secure bool
	client *http.Client
	now    func() time.Time
	log    *slog.Logger
}

// New builds the service; it reaches no provider yet.
func New(o Options) *Service {
	s := &Service{byName: map[string]*provider{}, store: o.Store, secure: o.SecureCookies, client: o.HTTPClient, now: o.Now, log: o.Logger}
	if s.client == nil {
		s.client = http.DefaultClient
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for _, c := range o.Providers {
		p := &provider{cfg: c}
		s.list = append(s.list, p)
		s.byName[c.Name] = p
	}
	return s
}

// Button is a provider as the sign-in page offers it.
type Button struct {
	Name, Label string
	// Down says in plain words why it cannot be used now ("" = it can).
	Down string
}

// Buttons lists the providers in configuration order, each discovered
// (in parallel, for at most pageWait) so the page can say which is down.
func (s *Service) Buttons(ctx context.Context) []Button {
	out := make([]Button, len(s.list))
	var wg sync.WaitGroup
	for i, p := range s.list {
		out[i] = Button{Name: p.cfg.Name, Label: p.cfg.label()}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, pageWait)
			defer cancel()
			if _, err := s.discover(ctx, p); err != nil {
				out[i].Down = err.Error()
			}
		})
	}
	wg.Wait()
	return out
}

// Labels are the providers' display names, in configuration order,
// without contacting them.
func (s *Service) Labels() []string {
	out := make([]string, len(s.list))
	for i, p := range s.list {
		out[i] = p.cfg.label()
	}
	return out
}

// Label is the display name of the provider named name; name itself for
// one no longer configured (an identity or session outlives its entry).
func (s *Service) Label(name string) string {
	for _, p := range s.list {
		if p.cfg.Name == name {
			return p.cfg.label()
		}
	}
	return name
}

// Enabled reports whether any provider is configured.
func (s *Service) Enabled() bool { return len(s.list) > 0 }

// provider is one configured provider and what discovery found of it.
type provider struct {
	cfg ProviderConfig

	mu      sync.Mutex
	found   *oidc.Provider
	lastErr error
	tried   time.Time
}

// discovered is a provider's metadata and its extra endpoints.
type discovered struct {
	op         *oidc.Provider
	endSession string
}

// discover fetches p's OpenID configuration once it works; a failure is
// kept for retryAfter and answered at once within it.
func (s *Service) discover(ctx context.Context, p *provider) (*oidc.Provider, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.found != nil {
		return p.found, nil
	}
	if p.lastErr != nil && s.now().Sub(p.tried) < retryAfter {
		return nil, p.lastErr
	}
	found, err := oidc.NewProvider(oidc.ClientContext(ctx, s.client), p.cfg.Issuer)
	p.tried = s.now()
	if err != nil {
		s.log.Warn("sso: discovery failed", "provider", p.cfg.Name, "issuer", p.cfg.Issuer, "err", err)
		p.lastErr = &UnreachableError{Provider: p.cfg.label(), Err: err}
		return nil, p.lastErr
	}
	p.found, p.lastErr = found, nil
	s.log.Info("sso: provider discovered", "provider", p.cfg.Name, "issuer", p.cfg.Issuer)
	return found, nil
}

// ready is the named provider, discovered (for at most startWait).
func (s *Service) ready(ctx context.Context, name string) (*provider, *oidc.Provider, error) {
	p, ok := s.byName[name]
	if !ok {
		return nil, nil, ErrUnknownProvider
	}
	ctx, cancel := context.WithTimeout(ctx, startWait)
	defer cancel()
	op, err := s.discover(ctx, p)
	return p, op, err
}

func (p *provider) oauth(op *oidc.Provider, redirectURL string) *oauth2.Config {
	return &oauth2.Config{
		ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret,
		Endpoint: op.Endpoint(), RedirectURL: redirectURL, Scopes: p.cfg.scopes(),
	}
}

// EndSessionURL is the provider's display name and where it ends its
// own session after herd ended its one, back at postLogout; "" when the
// provider has no end_session_endpoint (or name is no provider any
// more).
func (s *Service) EndSessionURL(ctx context.Context, name, idToken, postLogout string) (label, endSession string) {
	p, op, err := s.ready(ctx, name)
	if err != nil {
		return "", ""
	}
	var meta struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := op.Claims(&meta); err != nil || meta.EndSession == "" {
		return "", ""
	}
	q := url.Values{"client_id": {p.cfg.ClientID}, "id_token_hint": {idToken}, "post_logout_redirect_uri": {postLogout}}
	sep := "?"
	if strings.Contains(meta.EndSession, "?") {
		sep = "&"
	}
	return p.cfg.label(), meta.EndSession + sep + q.Encode()
}
