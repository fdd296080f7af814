package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"herd/models"
	"herd/server/auth"
	"herd/server/sso"
	"herd/views"
)

// userJSON is a user on the wire.
type userJSON struct {
	ID        string `json:"id"`
	Email     string `json:"email"`
	Role      string `json:"role"`
	Disabled  bool   `json:"disabled"`
	CreatedAt string `json:"created_at"`
}

func newUserJSON(u *models.User) userJSON {
	return userJSON{ID: u.ID, Email: u.Email, Role: u.Role, Disabled: u.Disabled, CreatedAt: u.CreatedAt.UTC().Format("2006-01-02T15:04:05Z")}
}

func (s *Server) needsSetup(c echo.Context) (bool, error) {
	n, err := s.store.CountUsers(c.Request().Context())
	return n == 0, err
}

// safeNext keeps a post-sign-in redirect on this site.
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	if u, err := url.Parse(next); err != nil || u.Host != "" || u.Scheme != "" {
		return "/"
	}
	return next
}

func (s *Server) setupPage(c echo.Context) error {
	empty, err := s.needsSetup(c)
	if err != nil {
		return err
	}
	// With passwords off an admin made here could never sign in: the
	// first users come from the providers.
	if !empty || s.localPasswords == sso.PasswordsOff {
		return c.Redirect(http.StatusSeeOther, "/login")
	}
	switch tok := c.QueryParam("token"); {
	case tok == "":
		return s.renderSetup(c, http.StatusOK, "", "", "") // how to get the link
	case !s.auth.SetupValid(tok):
		return s.renderSetup(c, http.StatusForbidden, "", "", auth.ErrSetupToken.Error())
	}
	return s.renderSetup(c, http.StatusOK, c.QueryParam("token"), "", "")
}

func (s *Server) renderSetup(c echo.Context, status int, token, email, errMsg string) error {
	p := s.page(c, "Set up herd")
	p.Error = errMsg
	return s.render(c, status, views.Setup(views.SetupPage{Page: p, Email: email, Token: token}))
}

// setupSubmit creates the first admin. Whether users exist is checked
// first, before any password is hashed, so a set-up instance spends
// nothing on the form; then the address's limit, then the token.
func (s *Server) setupSubmit(c echo.Context) error {
	if empty, err := s.needsSetup(c); err != nil {
		return err
	} else if !empty || s.localPasswords == sso.PasswordsOff {
		return c.Redirect(http.StatusSeeOther, "/login")
	}
	email, pw, tok := c.FormValue("email"), c.FormValue("password"), c.FormValue("token")
	leave, err := s.auth.LimitAttempt(c, "setup")
	if ae := knownError(err, c); ae != nil {
		return s.renderSetup(c, ae.Status, tok, email, ae.Message)
	}
	defer leave()
	if !s.auth.SetupValid(tok) {
		return s.renderSetup(c, http.StatusForbidden, "", "", auth.ErrSetupToken.Error())
	}
	if ae := knownError(checkNewAccount(email, pw, c.FormValue("password_confirm")), c); ae != nil {
		return s.renderSetup(c, ae.Status, tok, email, ae.Message)
	}
	u, err := s.auth.StoreUser(c.Request().Context(), email, pw, models.RoleAdmin, true)
	if errors.Is(err, models.ErrConflict) {
		return c.Redirect(http.StatusSeeOther, "/login")
	}
	if err != nil {
		return err
	}
	s.auth.UseSetup()
	// The first admin is on record as made by themselves, from where the
	// set-up link was used.
	s.Audit(c.Request().Context(), Actor{ID: u.ID, Email: u.Email, IP: c.RealIP()}, models.AuditUserCreate, u.ID, nil, newUserJSON(u))
	if _, err := s.auth.SignIn(c, u); err != nil {
		return err
	}
	s.log.Info("admin created at set-up", "user", u.ID)
	return c.Redirect(http.StatusSeeOther, "/")
}

// checkNewAccount checks the form that creates an account: a valid email
// and a good password, typed the same twice.
func checkNewAccount(email, pw, confirm string) error {
	if err := cmp.Or(auth.CheckEmail(email), auth.CheckPassword(pw)); err != nil {
		return err
	}
	if pw != confirm {
		return errUnprocessable("the passwords do not match")
	}
	return nil
}

func (s *Server) loginPage(c echo.Context) error {
	// With passwords off the first user comes from a provider, so there
	// is nothing to set up.
	if empty, err := s.needsSetup(c); err != nil {
		return err
	} else if empty && s.localPasswords != sso.PasswordsOff {
		return c.Redirect(http.StatusSeeOther, "/setup")
	}
	if auth.User(c) != nil {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
	}
	p := s.page(c, "Sign in")
	switch {
	case c.QueryParam("signed_up") != "":
		p.Flash = signedUpNotice
	case c.QueryParam("signed_out") != "":
		p.Flash = "You are signed out of herd and of your identity provider."
	}
	return s.render(c, http.StatusOK, s.loginView(c, p, "", safeNext(c.QueryParam("next"))))
}

// loginView is the sign-in page: the providers' buttons (each saying
// whether it can be reached), and the password form when
// auth.local_passwords lets anyone use it, or when an admin asks for it
// (?password=1) under "admins".
func (s *Server) loginView(c echo.Context, p views.Page, email, next string) templ.Component {
	v := views.LoginPage{Page: p, Email: email, AllowSignup: s.allowSignup, Next: next}
	for _, b := range s.sso.Buttons(c.Request().Context()) {
		v.Providers = append(v.Providers, views.ProviderButton{Name: b.Name, Label: b.Label, Down: b.Down})
	}
	switch s.localPasswords {
	case sso.PasswordsAll:
		v.Passwords = true
	case sso.PasswordsAdmins:
		v.Passwords = c.QueryParam("password") != "" || c.Request().Method == http.MethodPost && c.Path() == "/login"
		v.AdminLink = !v.Passwords
	}
	return views.Login(v)
}

// signedUpNotice is what every sign-up reads, new address or not.
const signedUpNotice = "If this address had no account, it has one now: sign in with the password you chose. If it had one already, nothing changed."

func (s *Server) loginSubmit(c echo.Context) error {
	email, next := c.FormValue("email"), safeNext(c.FormValue("next"))
	u, err := s.verifyPassword(c, email, c.FormValue("password"))
	if err != nil {
		ae := knownError(err, c)
		if ae == nil {
			return err
		}
		p := s.page(c, "Sign in")
		p.Error = ae.Message
		return s.render(c, ae.Status, s.loginView(c, p, email, next))
	}
	if _, err := s.auth.SignIn(c, u); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, next)
}

// verifyPassword checks a password sign-in, then whether
// auth.local_passwords lets the account use one; with passwords off no
// password is checked at all.
func (s *Server) verifyPassword(c echo.Context, email, password string) (*models.User, error) {
	if s.localPasswords == sso.PasswordsOff {
		return nil, errPasswordsOff
	}
	u, err := s.auth.VerifyLogin(c, email, password)
	if err != nil {
		return nil, err
	}
	if !s.passwordsAllowed(u) {
		return nil, errPasswordsOff
	}
	return u, nil
}

// logoutSubmit ends the session and, when it came from a provider with
// an end-session endpoint, offers to end the provider's session too.
func (s *Server) logoutSubmit(c echo.Context) error {
	label, to := s.ssoEndSession(c, auth.Session(c))
	if err := s.signOut(c); err != nil {
		return err
	}
	if to == "" {
		return c.Redirect(http.StatusSeeOther, "/login")
	}
	auth.SetUser(c, nil)
	return s.render(c, http.StatusOK, views.SignedOut(views.SignedOutPage{Page: s.page(c, "Signed out"), Provider: label, EndSession: to}))
}

func (s *Server) signupPage(c echo.Context) error {
	if !s.allowSignup {
		return errNotFound("page")
	}
	return s.render(c, http.StatusOK, views.Signup(views.SignupPage{Page: s.page(c, "Create an account")}))
}

// signupSubmit creates an account if the address has none, and answers
// the same either way: a redirect to sign-in that says the account exists
// now if the address could sign up. Both ways hash the password and try
// one insert, so the timing is the same too, and an existing account is
// left untouched. Signing the new user in at once would tell an
// existing address from a new one, so the user signs in next.
func (s *Server) signupSubmit(c echo.Context) error {
	if !s.allowSignup {
		return errNotFound("page")
	}
	email, pw := c.FormValue("email"), c.FormValue("password")
	fail := func(ae *apiError) error {
		p := s.page(c, "Create an account")
		p.Error = ae.Message
		return s.render(c, ae.Status, views.Signup(views.SignupPage{Page: p, Email: email}))
	}
	leave, err := s.auth.LimitAttempt(c, "signup")
	if ae := knownError(err, c); ae != nil {
		return fail(ae)
	}
	defer leave()
	if ae := knownError(checkNewAccount(email, pw, c.FormValue("password_confirm")), c); ae != nil {
		return fail(ae)
	}
	_, err = s.auth.StoreUser(c.Request().Context(), email, pw, models.RoleUser, false)
	if err != nil && !errors.Is(err, models.ErrConflict) {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/login?signed_up=1")
}

type loginRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

// apiLogin signs in with a JSON body only, so no cross-site form can post
// it, and answers the CSRF token for later cookie-authenticated calls.
func (s *Server) apiLogin(c echo.Context) error {
	var req loginRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	u, err := s.verifyPassword(c, req.Email, req.Password)
	if err != nil {
		return err
	}
	tok, err := s.auth.SignIn(c, u)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"user": newUserJSON(u), "csrf_token": tok})
}

func (s *Server) apiLogout(c echo.Context) error {
	if err := s.signOut(c); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) apiMe(c echo.Context) error {
	u := auth.User(c)
	out := map[string]any{"user": newUserJSON(u)}
	if sess := auth.Session(c); sess != nil {
		out["csrf_token"] = sess.CSRFToken
	}
	b, period, err := s.userBudget(c.Request().Context(), u.ID)
	if err != nil {
		return err
	}
	if bj := newBudgetJSON(b, period); bj != nil {
		out["budget"] = bj
	}
	return c.JSON(http.StatusOK, out)
}

// EnsureAdmin creates the admin from HERD_ADMIN_EMAIL/HERD_ADMIN_PASSWORD
// on an empty instance (headless set-up). Both empty does nothing; an
// instance that already has users is left alone. With
// auth.local_passwords: off it refuses to start: that admin could never
// sign in (docs/OPERATIONS.md "Single sign-on").
func (s *Server) EnsureAdmin(ctx context.Context, email, password string) error {
	if email == "" && password == "" {
		return nil
	}
	if s.localPasswords == sso.PasswordsOff {
		return fmt.Errorf("HERD_ADMIN_EMAIL/HERD_ADMIN_PASSWORD make an admin who signs in with a password, which auth.local_passwords: off refuses: "+
			"unset them and sign in with %s (its admin_claim gives the admin role), or set auth.local_passwords: admins",
			strings.Join(s.sso.Labels(), " or "))
	}
	if err := cmp.Or(auth.CheckEmail(email), auth.CheckPassword(password)); err != nil {
		return fmt.Errorf("HERD_ADMIN_EMAIL/HERD_ADMIN_PASSWORD: %s", err)
	}
	n, err := s.store.CountUsers(ctx)
	if err != nil || n > 0 {
		return err
	}
	u, err := s.auth.StoreUser(ctx, email, password, models.RoleAdmin, true)
	if errors.Is(err, models.ErrConflict) {
		return nil
	}
	if err != nil {
		return err
	}
	s.log.Info("admin created from the environment", "user", u.ID, "email", u.Email)
	s.Audit(ctx, Actor{}, models.AuditUserCreate, u.ID, nil, newUserJSON(u)) // by herd itself
	return nil
}

// signOut ends this request's session and closes its sockets.
func (s *Server) signOut(c echo.Context) error {
	if id := s.auth.SessionID(c.Request()); id != "" {
		if err := s.endSession(c.Request().Context(), id); err != nil {
			return err
		}
	}
	s.auth.ClearSession(c)
	return nil
}

// SetupURL is the link that creates the first admin, with its one-time
// token, on base (such as http://127.0.0.1:8080); "" once any user
// exists. main prints it at start.
func (s *Server) SetupURL(ctx context.Context, base string) (string, error) {
	return s.auth.SetupURL(ctx, base)
}

// BrowsableAddr turns a listen address into one a browser on this machine
// can open: a wildcard host (0.0.0.0, [::]) becomes the loopback address.
func BrowsableAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if ip.To4() != nil {
			host = "127.0.0.1"
		} else {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}
