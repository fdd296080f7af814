package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"herd/models"
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
	if !empty {
		return c.Redirect(http.StatusSeeOther, "/login")
	}
	switch tok := c.QueryParam("token"); {
	case tok == "":
		return s.renderSetup(c, http.StatusOK, "", "", "") // how to get the link
	case !s.setup.valid(tok):
		return s.renderSetup(c, http.StatusForbidden, "", "", errSetupToken.Message)
	}
	return s.renderSetup(c, http.StatusOK, c.QueryParam("token"), "", "")
}

var errSetupToken = &apiError{http.StatusForbidden, "setup_token", "this set-up link is not valid: open the one herd printed when it started"}

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
	} else if !empty {
		return c.Redirect(http.StatusSeeOther, "/login")
	}
	email, pw, tok := c.FormValue("email"), c.FormValue("password"), c.FormValue("token")
	leave, ae := s.limitAttempt(c, "setup")
	if ae != nil {
		return s.renderSetup(c, ae.Status, tok, email, ae.Message)
	}
	defer leave()
	if !s.setup.valid(tok) {
		return s.renderSetup(c, errSetupToken.Status, "", "", errSetupToken.Message)
	}
	if ae := checkNewAccount(email, pw, c.FormValue("password_confirm")); ae != nil {
		return s.renderSetup(c, ae.Status, tok, email, ae.Message)
	}
	u, err := s.storeUser(c.Request().Context(), email, pw, models.RoleAdmin, true)
	if errors.Is(err, models.ErrConflict) {
		return c.Redirect(http.StatusSeeOther, "/login")
	}
	if err != nil {
		return err
	}
	s.setup.use()
	if _, err := s.signIn(c, u); err != nil {
		return err
	}
	s.log.Info("admin created at set-up", "user", u.ID)
	return c.Redirect(http.StatusSeeOther, "/")
}

// limitAttempt counts a set-up or sign-up (form) against the address's
// limit, and refuses it past the limit or while another password check
// or hash of the address runs (checks.go). leave frees the address once
// the attempt has hashed its password.
func (s *Server) limitAttempt(c echo.Context, form string) (leave func(), ae *apiError) {
	ip := c.RealIP()
	leave, ok := s.limits.checking.enter(addressSlot(ip))
	if !ok {
		return nil, rateLimited(c, busyRetry, "another password check from your address is under way")
	}
	if key := form + ":" + ip; !s.limits.attempts.Allow(key) {
		leave()
		return nil, rateLimited(c, s.limits.attempts.RetryAfter(key), "too many attempts from your address")
	}
	return leave, nil
}

// checkNewAccount checks the form that creates an account: a valid email
// and a good password, typed the same twice.
func checkNewAccount(email, pw, confirm string) *apiError {
	if ae := firstErr(checkEmail(email), checkPassword(pw)); ae != nil {
		return ae
	}
	if pw != confirm {
		return errUnprocessable("the passwords do not match")
	}
	return nil
}

func firstErr(errs ...*apiError) *apiError {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func (s *Server) loginPage(c echo.Context) error {
	if empty, err := s.needsSetup(c); err != nil {
		return err
	} else if empty {
		return c.Redirect(http.StatusSeeOther, "/setup")
	}
	if currentUser(c) != nil {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
	}
	p := s.page(c, "Sign in")
	if c.QueryParam("signed_up") != "" {
		p.Flash = signedUpNotice
	}
	return s.render(c, http.StatusOK, views.Login(views.LoginPage{Page: p, AllowSignup: s.allowSignup, Next: safeNext(c.QueryParam("next"))}))
}

// signedUpNotice is what every sign-up reads, new address or not.
const signedUpNotice = "If this address had no account, it has one now: sign in with the password you chose. If it had one already, nothing changed."

func (s *Server) loginSubmit(c echo.Context) error {
	email, next := c.FormValue("email"), safeNext(c.FormValue("next"))
	u, err := s.verifyLogin(c, email, c.FormValue("password"))
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			return err
		}
		p := s.page(c, "Sign in")
		p.Error = ae.Message
		return s.render(c, ae.Status, views.Login(views.LoginPage{Page: p, Email: email, AllowSignup: s.allowSignup, Next: next}))
	}
	if _, err := s.signIn(c, u); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, next)
}

func (s *Server) logoutSubmit(c echo.Context) error {
	if err := s.signOut(c); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/login")
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
	leave, ae := s.limitAttempt(c, "signup")
	if ae != nil {
		return fail(ae)
	}
	defer leave()
	if ae := checkNewAccount(email, pw, c.FormValue("password_confirm")); ae != nil {
		return fail(ae)
	}
	_, err := s.storeUser(c.Request().Context(), email, pw, models.RoleUser, false)
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
	u, err := s.verifyLogin(c, req.Email, req.Password)
	if err != nil {
		return err
	}
	tok, err := s.signIn(c, u)
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
	out := map[string]any{"user": newUserJSON(currentUser(c))}
	if sess := currentSession(c); sess != nil {
		out["csrf_token"] = sess.CSRFToken
	}
	return c.JSON(http.StatusOK, out)
}

// EnsureAdmin creates the admin from HERD_ADMIN_EMAIL/HERD_ADMIN_PASSWORD
// on an empty instance (headless set-up). Both empty does nothing; an
// instance that already has users is left alone.
func (s *Server) EnsureAdmin(ctx context.Context, email, password string) error {
	if email == "" && password == "" {
		return nil
	}
	if ae := firstErr(checkEmail(email), checkPassword(password)); ae != nil {
		return fmt.Errorf("HERD_ADMIN_EMAIL/HERD_ADMIN_PASSWORD: %s", ae.Message)
	}
	n, err := s.store.CountUsers(ctx)
	if err != nil || n > 0 {
		return err
	}
	u, err := s.storeUser(ctx, email, password, models.RoleAdmin, true)
	if errors.Is(err, models.ErrConflict) {
		return nil
	}
	if err != nil {
		return err
	}
	s.log.Info("admin created from the environment", "user", u.ID, "email", u.Email)
	return nil
}
