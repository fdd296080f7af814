package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"herd/models"
	"herd/server/auth"
	"herd/server/hub"
	"herd/views"
)

// Sessions follow the account (docs/DESIGN.md §10): whatever ends a
// session, a token or a user's rights also closes their sockets, and an
// admin's change to a user stops that user's runs.

// revokeUser ends what an admin's change (disable, demote) leaves
// behind: the user's runs are stopped and their sockets closed. The store
// has already deleted their sessions in the change's transaction, so no
// request is served with the old rights after it.
func (s *Server) revokeUser(ctx context.Context, userID string) error {
	s.sockets.CloseUser(hub.CloseAccountChanged, userID)
	ts, err := s.store.Threads(ctx, userID)
	if err != nil {
		return err
	}
	return s.stopRuns(ctx, ts)
}

// stopRuns cancels every active run of ts, then waits for each to write
// its end.
func (s *Server) stopRuns(ctx context.Context, ts []models.Thread) error {
	var stopping []string
	for _, t := range ts {
		if runID, ok := s.runs.ActiveRun(t.ID); ok {
			_ = s.runs.Cancel(t.ID, runID)
			stopping = append(stopping, t.ID)
		}
	}
	for _, id := range stopping {
		if err := s.stopRun(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// revokeToken deletes userID's API token id and closes the sockets it
// opened. A token that is not there is models.ErrNotFound.
func (s *Server) revokeToken(ctx context.Context, userID, id string) error {
	hash, err := s.store.DeleteAPIToken(ctx, userID, id)
	if err != nil {
		return err
	}
	s.sockets.Close(hub.CloseTokenRevoked, auth.TokenCredential(hash))
	return nil
}

// endSession signs out the session with id and closes its sockets.
func (s *Server) endSession(ctx context.Context, id string) error {
	if err := s.store.DeleteSession(ctx, id); err != nil {
		return err
	}
	s.sockets.Close(hub.CloseSignedOut, auth.SessionCredential(id))
	return nil
}

// endSessions deletes userID's sessions but keep and closes their sockets.
func (s *Server) endSessions(ctx context.Context, userID string, reason hub.CloseReason, keep ...string) error {
	ids, err := s.store.DeleteUserSessions(ctx, userID, keep...)
	if err != nil {
		return err
	}
	creds := make([]string, len(ids))
	for i, id := range ids {
		creds[i] = auth.SessionCredential(id)
	}
	s.sockets.Close(reason, creds...)
	return nil
}

// publicSessionID names a session on the wire. The stored id is the hash
// of the cookie; a second hash keeps even that out of pages.
func publicSessionID(id string) string {
	sum := sha256.Sum256([]byte("herd session\x00" + id))
	return hex.EncodeToString(sum[:12])
}

// sessionJSON is a session on the wire. It has views.SessionView's fields,
// so the account page converts it rather than copying field by field.
type sessionJSON struct {
	ID         string     `json:"id"`
	CreatedAt  time.Time  `json:"created_at"`
	LastSeenAt *time.Time `json:"last_seen_at"`
	UserAgent  string     `json:"user_agent"`
	IP         string     `json:"ip"`
	Current    bool       `json:"current"`
	// SignIn is how the session signed in: "password", or the display
	// name of its single sign-on provider.
	SignIn string `json:"sign_in"`
}

// sessionSignIn names how sess signed in (docs/OPERATIONS.md "Single
// sign-on").
func (s *Server) sessionSignIn(sess *models.Session) string {
	if sess.Provider == "" {
		return signInPassword
	}
	return s.sso.Label(sess.Provider)
}

func (s *Server) mySessions(c echo.Context) ([]sessionJSON, error) {
	ss, err := s.store.Sessions(c.Request().Context(), auth.User(c).ID)
	if err != nil {
		return nil, err
	}
	cur := auth.Session(c)
	out := make([]sessionJSON, len(ss))
	for i, x := range ss {
		out[i] = sessionJSON{ID: publicSessionID(x.ID), CreatedAt: x.CreatedAt.UTC(), LastSeenAt: x.LastSeenAt, UserAgent: x.UserAgent, IP: x.IP, Current: cur != nil && cur.ID == x.ID, SignIn: s.sessionSignIn(&x)}
	}
	return out, nil
}

// endMySession signs out the user's session with public id pub. Ending
// the current one signs this browser out too.
func (s *Server) endMySession(c echo.Context, pub string) (current bool, err error) {
	ctx := c.Request().Context()
	u := auth.User(c)
	ss, err := s.store.Sessions(ctx, u.ID)
	if err != nil {
		return false, err
	}
	for _, x := range ss {
		if publicSessionID(x.ID) != pub {
			continue
		}
		if err := s.endSession(ctx, x.ID); err != nil {
			return false, err
		}
		cur := auth.Session(c)
		return cur != nil && cur.ID == x.ID, nil
	}
	return false, errNotFound("session")
}

// signOutEverywhere ends every session of the user, this one included.
func (s *Server) signOutEverywhere(c echo.Context) error {
	if err := s.endSessions(c.Request().Context(), auth.User(c).ID, hub.CloseSignedOut); err != nil {
		return err
	}
	s.auth.ClearSession(c)
	return nil
}

// changePassword sets the user's password once auth has checked the
// current one under the sign-in limits and hashed the new one
// (auth.Service.NewPasswordHash); then every other session is signed
// out. API tokens stay: they are revoked one by one on the settings page.
func (s *Server) changePassword(c echo.Context, current, next string) error {
	u := auth.User(c)
	ctx := c.Request().Context()
	if u.PasswordHash == "" {
		return errNoPassword
	}
	hash, err := s.auth.NewPasswordHash(c, u, current, next)
	if err != nil {
		return err
	}
	if _, err := s.store.UpdateUser(ctx, u.ID, models.UserUpdate{PasswordHash: &hash}); err != nil {
		return err
	}
	var keep []string
	if sess := auth.Session(c); sess != nil {
		keep = append(keep, sess.ID)
	}
	return s.endSessions(ctx, u.ID, hub.CloseSessionEnded, keep...)
}

// JSON API.

func (s *Server) apiSessions(c echo.Context) error {
	out, err := s.mySessions(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"sessions": out})
}

func (s *Server) apiSessionDelete(c echo.Context) error {
	current, err := s.endMySession(c, c.Param("id"))
	if err != nil {
		return err
	}
	if current {
		s.auth.ClearSession(c)
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) apiSessionsDelete(c echo.Context) error {
	if err := s.signOutEverywhere(c); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

type passwordRequest struct {
	CurrentPassword string `json:"current_password"`
	NewPassword     string `json:"new_password"`
}

func (s *Server) apiPassword(c echo.Context) error {
	var req passwordRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if err := s.changePassword(c, req.CurrentPassword, req.NewPassword); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// Pages.

func (s *Server) accountPage(c echo.Context) error {
	return s.renderAccount(c, http.StatusOK, "", "")
}

func (s *Server) renderAccount(c echo.Context, status int, flash, errMsg string) error {
	ss, err := s.mySessions(c)
	if err != nil {
		return err
	}
	items := make([]views.SessionView, len(ss))
	for i, x := range ss {
		items[i] = views.SessionView(x)
	}
	p := s.page(c, "Account")
	p.Flash, p.Error = flash, errMsg
	page := views.AccountPage{Page: p, Sessions: items, NoPassword: auth.User(c).PasswordHash == ""}
	if page.Budget, page.Cost, err = s.accountBudget(c.Request().Context(), auth.User(c).ID); err != nil {
		return err
	}
	return s.render(c, status, views.Account(page))
}

func (s *Server) passwordSubmit(c echo.Context) error {
	next := c.FormValue("password")
	if next != c.FormValue("password_confirm") {
		return formResult(c, errUnprocessable("the new passwords do not match"), "", s.renderAccount)
	}
	err := s.changePassword(c, c.FormValue("current_password"), next)
	return formResult(c, err, "Password changed. Your other sessions are signed out.", s.renderAccount)
}

func (s *Server) sessionDeleteSubmit(c echo.Context) error {
	current, err := s.endMySession(c, c.Param("id"))
	if err == nil && current {
		s.auth.ClearSession(c)
		return c.Redirect(http.StatusSeeOther, "/login")
	}
	return formResult(c, err, "Session signed out.", s.renderAccount)
}

func (s *Server) sessionsDeleteSubmit(c echo.Context) error {
	if err := s.signOutEverywhere(c); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/login")
}
