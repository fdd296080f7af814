// Package oidctest starts a real OpenID Connect provider on loopback for
// herd's tests: zitadel/oidc's op package with the module's example
// storage and login page, given test users and clients. It speaks the
// whole protocol (discovery, PKCE, nonce, signed ID tokens, userinfo,
// end-session), so herd's sign-in is tested against a maintained
// implementation, never a stub of the protocol.
package oidctest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// User is a person who can sign in at the provider.
type User struct {
	ID, Username, Password, Email string
	EmailVerified                 bool
	Groups                        []string
}

// Client is a client registered at the provider. Any loopback herd's
// /auth/oidc/{name}/callback is one of its redirect URIs, and its
// /login pages are its post-logout ones.
type Client struct{ ID, Secret string }

// Provider is a running provider.
type Provider struct {
	// Issuer is its issuer URL (http://127.0.0.1:port).
	Issuer string
	srv    *httptest.Server
	down   atomic.Bool
	st     *groupStorage
	users  *userStore
	mu     sync.Mutex
	paths  []string
}

// Start runs a provider with users and clients until the test ends.
func Start(t testing.TB, users []User, clients ...Client) *Provider {
	t.Helper()
	p := &Provider{srv: httptest.NewUnstartedServer(nil)}
	p.Issuer = "http://" + p.srv.Listener.Addr().String()
	us := &userStore{users: map[string]*storage.User{}, groups: map[string][]string{}}
	p.users = us
	for _, u := range users {
		us.users[u.ID] = &storage.User{ID: u.ID, Username: u.Username, Password: u.Password, Email: u.Email, EmailVerified: u.EmailVerified, PreferredLanguage: language.English}
		us.groups[u.ID] = u.Groups
	}
	registered := map[string]*storage.Client{}
	for _, c := range clients {
		registered[c.ID] = storage.WebClient(c.ID, c.Secret, "http://127.0.0.1/unused")
	}
	st := &groupStorage{Storage: storage.NewStorageWithClients(us, registered), groups: us.groups, clients: registered}
	p.st = st
	router := exampleop.SetupServer(p.Issuer, st, nil, false)
	p.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.down.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		p.mu.Lock()
		p.paths = append(p.paths, r.URL.Path)
		p.mu.Unlock()
		router.ServeHTTP(w, r)
	})
	p.srv.Start()
	t.Cleanup(p.srv.Close)
	return p
}

// SetGroups changes the groups of user id, as an admin at the provider
// would: its next tokens carry them.
func (p *Provider) SetGroups(id string, groups ...string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.groups[id] = groups
}

// SetEmail changes the email of user id and whether the provider says
// it is verified, as the person or an admin at the provider would.
func (p *Provider) SetEmail(id, email string, verified bool) {
	p.users.mu.Lock()
	defer p.users.mu.Unlock()
	u := *p.users.users[id]
	u.Email, u.EmailVerified = email, verified
	p.users.users[id] = &u // a copy: the provider may be reading the old one
}

// SetDown makes the provider answer 503 to everything (down) or serve
// again.
func (p *Provider) SetDown(down bool) { p.down.Store(down) }

// Reached reports whether a request reached path (such as
// "/end_session") since the start.
func (p *Provider) Reached(path string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, got := range p.paths {
		if got == path {
			return true
		}
	}
	return false
}

// SignIn drives the provider's login page for an authorization URL as a
// browser would: it follows authURL to the login form, posts username
// and password, and returns where the provider then redirects the
// browser (the client's callback with code and state), without
// following it. client must keep cookies and not follow redirects on
// its own (CheckRedirect: http.ErrUseLastResponse).
func SignIn(ctx context.Context, client *http.Client, authURL, username, password string) (*url.URL, error) {
	loc, err := follow(ctx, client, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	id := loc.Query().Get("authRequestID")
	form := url.Values{"id": {id}, "username": {username}, "password": {password}}
	loc, err = follow(ctx, client, http.MethodPost, loc.Scheme+"://"+loc.Host+"/login/username", form)
	if err != nil {
		return nil, err
	}
	return follow(ctx, client, http.MethodGet, loc.String(), nil)
}

// follow makes one request and returns its redirect's target.
func follow(ctx context.Context, client *http.Client, method, target string, form url.Values) (*url.URL, error) {
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		return nil, &StepError{URL: target, Status: resp.StatusCode}
	}
	return loc, nil
}

// StepError is a step of SignIn that did not redirect.
type StepError struct {
	URL    string
	Status int
}

func (e *StepError) Error() string {
	return "oidctest: " + e.URL + " answered " + http.StatusText(e.Status) + ", not a redirect"
}

// userStore is the example storage's users, with their groups.
type userStore struct {
	mu     sync.Mutex // guards users (SetEmail)
	users  map[string]*storage.User
	groups map[string][]string
}

func (u *userStore) GetUserByID(id string) *storage.User {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.users[id]
}

func (u *userStore) GetUserByUsername(name string) *storage.User {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, x := range u.users {
		if x.Username == name {
			return x
		}
	}
	return nil
}

func (u *userStore) ExampleClientID() string { return storage.ServiceUserID }

// groupStorage is the example storage with a groups claim in the ID
// token and userinfo, and clients that accept any loopback herd.
type groupStorage struct {
	*storage.Storage
	clients map[string]*storage.Client
	mu      sync.Mutex
	groups  map[string][]string
}

func (s *groupStorage) groupsOf(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.groups[id]
}

func (s *groupStorage) SetUserinfoFromScopes(ctx context.Context, ui *oidc.UserInfo, userID, clientID string, scopes []string) error {
	if err := s.Storage.SetUserinfoFromScopes(ctx, ui, userID, clientID, scopes); err != nil {
		return err
	}
	ui.AppendClaims("groups", s.groupsOf(userID))
	return nil
}

func (s *groupStorage) SetUserinfoFromToken(ctx context.Context, ui *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, ui, tokenID, subject, origin); err != nil {
		return err
	}
	ui.AppendClaims("groups", s.groupsOf(subject))
	return nil
}

func (s *groupStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, ok := s.clients[id]
	if !ok {
		return s.Storage.GetClientByClientID(ctx, id)
	}
	return loopbackClient{c}, nil
}

// loopbackClient accepts any loopback herd's callback and sign-in page.
type loopbackClient struct{ *storage.Client }

func (loopbackClient) RedirectURIGlobs() []string {
	return []string{"http://127.0.0.1:*/auth/oidc/*/callback"}
}

func (loopbackClient) PostLogoutRedirectURIGlobs() []string {
	return []string{"http://127.0.0.1:*/login", "http://127.0.0.1:*/login?*"}
}
