package server

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"herd/models"
	"herd/server/auth"
	"herd/server/hub"
	"herd/server/sso"
)

// Single sign-on with OpenID Connect (docs/DESIGN.md §10): the sign-in
// page's buttons link to ssoStart, the provider sends the browser back
// to ssoCallback, and the session that ends it is the same kind a
// password starts.
//
// The buttons are links, not forms: the page's CSP (form-action 'self')
// would block a form's redirect to the provider, and a start needs no
// CSRF token: it only binds a new flow to the browser that asked, so a
// forged one signs nobody into anything (the callback needs the flow).

// ssoStart sends the browser to the provider to sign in.
func (s *Server) ssoStart(c echo.Context) error {
	name := c.Param("name")
	if err := s.auth.LimitSignOnStart(c); err != nil {
		return s.ssoRefused(c, err)
	}
	to, err := s.sso.Begin(c.Response(), c.Request(), name, s.ssoRedirectURL(c, name), safeNext(c.QueryParam("next")))
	if err != nil {
		return s.ssoRefused(c, err)
	}
	return c.Redirect(http.StatusSeeOther, to)
}

// ssoCallback finishes the sign-in the provider answered, under the
// address's sign-in limits: the user its identity is linked to (made on
// the first sign-in), the role its admin claim says, then a session.
func (s *Server) ssoCallback(c echo.Context) error {
	name := c.Param("name")
	done, err := s.auth.LimitSignOn(c)
	if err != nil {
		return s.ssoRefused(c, err)
	}
	u, id, next, err := s.ssoUser(c, name)
	done(err == nil)
	if err != nil {
		return s.ssoRefused(c, err)
	}
	if _, err := s.auth.SignInWithProvider(c, u, id.Provider, id.IDToken); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, next)
}

// ssoUser is the enabled user the callback's identity signs in, and
// where they go next.
func (s *Server) ssoUser(c echo.Context, name string) (*models.User, *sso.Identity, string, error) {
	ctx := c.Request().Context()
	id, next, err := s.sso.Finish(c.Request(), name, s.ssoRedirectURL(c, name))
	if err != nil {
		if id != nil {
			s.log.Info("sso: sign-in refused", "provider", name, "email", id.Email, "reason", err.Error())
		} else {
			s.log.Info("sso: callback refused", "provider", name, "err", err)
		}
		return nil, nil, "", err
	}
	res, err := s.store.SignInIdentity(ctx, models.SignOn{Provider: id.Provider, Issuer: id.Issuer, Subject: id.Subject, Email: id.Email, Admin: id.Admin})
	var taken *models.EmailTakenError
	if errors.As(err, &taken) {
		s.log.Warn("sso: sign-in refused: the identity's new email belongs to another user", "provider", name, "issuer", id.Issuer, "subject", id.Subject, "email", id.Email)
	}
	if err != nil {
		return nil, nil, "", err
	}
	s.noteSignOn(c, id, res)
	if res.User.Disabled {
		return nil, nil, "", auth.ErrDisabled
	}
	return res.User, id, next, nil
}

// noteSignOn logs and audits what a sign-on changed, and closes the
// sockets of the sessions a role change ended. The actor is the person
// signing in, from their address; the entry names the provider whose
// answer made the change (the claim, not an admin, set a role).
func (s *Server) noteSignOn(c echo.Context, id *sso.Identity, res *models.SignOnResult) {
	u := res.User
	who := Actor{ID: u.ID, Email: u.Email, IP: c.RealIP()}
	ctx := c.Request().Context()
	link := map[string]string{"provider": id.Provider, "issuer": id.Issuer, "subject": id.Subject}
	switch {
	case res.Created:
		s.log.Info("sso: user created", "provider", id.Provider, "user", u.ID, "email", u.Email, "role", u.Role)
		s.Audit(ctx, who, models.AuditUserCreate, u.ID, nil, map[string]string{
			"id": u.ID, "email": u.Email, "role": u.Role, "provider": id.Provider, "issuer": id.Issuer, "subject": id.Subject})
	case res.Linked:
		s.log.Info("sso: identity linked to an existing user", "provider", id.Provider, "user", u.ID, "email", u.Email)
		s.Audit(ctx, who, models.AuditUserLink, u.ID, nil, link)
	}
	if res.EmailFrom != "" {
		s.log.Info("sso: email changed at the provider", "provider", id.Provider, "user", u.ID, "from", res.EmailFrom, "to", u.Email)
		s.Audit(ctx, who, models.AuditUserUpdate, u.ID, map[string]any{"email": res.EmailFrom},
			map[string]any{"email": u.Email, "by": "the email of " + id.Provider})
	}
	if res.RoleFrom != "" {
		s.log.Info("sso: role set by the admin claim", "provider", id.Provider, "user", u.ID, "from", res.RoleFrom, "to", u.Role)
		s.Audit(ctx, who, models.AuditUserRole, u.ID, map[string]any{"role": res.RoleFrom},
			map[string]any{"role": u.Role, "by": "the admin claim of " + id.Provider, "sessions_ended": len(res.EndedSessions)})
	}
	if res.KeptLastAdmin {
		s.log.Warn("sso: the admin claim would remove the last admin; the role stays", "provider", id.Provider, "user", u.ID)
	}
	if len(res.EndedSessions) > 0 {
		creds := make([]string, len(res.EndedSessions))
		for i, sid := range res.EndedSessions {
			creds[i] = auth.SessionCredential(sid)
		}
		s.sockets.Close(hub.CloseAccountChanged, creds...)
	}
}

// ssoRefused answers a sign-in that did not end signed in with the
// sign-in page, saying why.
func (s *Server) ssoRefused(c echo.Context, err error) error {
	ae := knownError(err, c)
	if ae == nil {
		return err
	}
	p := s.page(c, "Sign in")
	p.Error = ae.Message
	return s.render(c, ae.Status, s.loginView(c, p, "", "/"))
}

// ssoRedirectURL is the callback the provider sends the browser back
// to: on server.public_url, else on the origin the request came to (the
// Host allow-list vouches for it). It is what the provider must have
// registered (docs/OPERATIONS.md "Single sign-on").
func (s *Server) ssoRedirectURL(c echo.Context, name string) string {
	return s.origin(c) + "/auth/oidc/" + url.PathEscape(name) + "/callback"
}

// origin is server.public_url, or the request's scheme and host.
func (s *Server) origin(c echo.Context) string {
	if s.publicURL != "" {
		return s.publicURL
	}
	return c.Scheme() + "://" + c.Request().Host
}

// ssoEndSession is the provider and its end-session URL that sign-out
// offers a browser whose session came from a provider with one; ""
// for any other.
func (s *Server) ssoEndSession(c echo.Context, sess *models.Session) (label, to string) {
	if sess == nil || sess.Provider == "" {
		return "", ""
	}
	return s.sso.EndSessionURL(c.Request().Context(), sess.Provider, sess.IDToken, s.origin(c)+"/login?signed_out=1")
}

// ssoError is single sign-on's refusal as a user reads it, nil for any
// other error.
func ssoError(err error) *apiError {
	var (
		notAllowed  *sso.NotAllowedError
		unreachable *sso.UnreachableError
		exchange    *sso.ExchangeError
		denied      *sso.DeniedError
		taken       *models.EmailTakenError
	)
	switch {
	case errors.Is(err, sso.ErrUnknownProvider):
		return errNotFound("sign-in provider")
	case errors.Is(err, sso.ErrFlow):
		return errBadRequest("%s", err.Error())
	case errors.As(err, &exchange):
		return errBadRequest("%s", err.Error())
	case errors.As(err, &denied):
		return &apiError{http.StatusForbidden, "sso_denied", err.Error()}
	case errors.As(err, &notAllowed), errors.Is(err, sso.ErrUnverifiedEmail), errors.Is(err, sso.ErrNoEmail):
		return &apiError{http.StatusForbidden, "sso_refused", err.Error()}
	case errors.As(err, &taken):
		return &apiError{http.StatusConflict, "sso_email_taken", taken.Error()}
	case errors.As(err, &unreachable):
		return &apiError{http.StatusServiceUnavailable, "sso_unreachable", err.Error()}
	case errors.Is(err, errPasswordsOff):
		return &apiError{http.StatusForbidden, "passwords_off", err.Error()}
	}
	return nil
}

// errNoPassword refuses a password change of an account made by single
// sign-on: it has no password to check.
var errNoPassword = &apiError{http.StatusConflict, "no_password", "this account signs in with single sign-on and has no password to change"}

// errPasswordsOff refuses a password sign-in auth.local_passwords does
// not allow.
var errPasswordsOff = errors.New("this account signs in with single sign-on: use your identity provider's button")

// passwordsAllowed reports whether u may sign in with a password.
func (s *Server) passwordsAllowed(u *models.User) bool {
	return sso.PasswordAllowed(s.localPasswords, u.IsAdmin())
}
