package server

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"herd/models"
	"herd/server/auth"
	"herd/server/hub"
	"herd/views"
)

func (s *Server) apiSettings(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]bool{"token_usage_enabled": s.settings.TokenUsage()})
}

type settingsRequest struct {
	TokenUsageEnabled *bool `json:"token_usage_enabled"`
}

func (s *Server) apiAdminSettings(c echo.Context) error {
	var req settingsRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if req.TokenUsageEnabled == nil {
		return errUnprocessable("send {\"token_usage_enabled\": true|false}")
	}
	if err := s.setTokenUsage(c, *req.TokenUsageEnabled); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]bool{"token_usage_enabled": *req.TokenUsageEnabled})
}

func (s *Server) apiModels(c echo.Context) error {
	type modelJSON struct {
		Name        string `json:"name"`
		DisplayName string `json:"display_name"`
		Provider    string `json:"provider"`
		Vision      bool   `json:"vision"`
	}
	ms := s.rt.Models()
	out := make([]modelJSON, len(ms))
	for i, m := range ms {
		out[i] = modelJSON{Name: m.Name, DisplayName: m.Label(), Provider: m.Provider, Vision: m.Vision}
	}
	return c.JSON(http.StatusOK, map[string]any{"models": out, "default": s.defaultModel(auth.User(c)), "token_usage_enabled": s.settings.TokenUsage()})
}

// Users.

type userRequest struct {
	Email    string  `json:"email"`
	Password string  `json:"password"`
	Role     *string `json:"role"`
	Disabled *bool   `json:"disabled"`
}

func validRole(r string) bool { return r == models.RoleUser || r == models.RoleAdmin }

// setTokenUsage switches the token gate (docs/DESIGN.md §9) and records
// the switch.
func (s *Server) setTokenUsage(c echo.Context, on bool) error {
	was, err := s.settings.SetTokenUsage(c.Request().Context(), on, s.pages)
	if err != nil {
		return err
	}
	s.audit(c, models.AuditSettingsTokenUsage, settingTokenUsage, map[string]bool{settingTokenUsage: was}, map[string]bool{settingTokenUsage: on})
	return nil
}

// createUser creates a user and records it.
func (s *Server) createUser(c echo.Context, email, password, role string) (*models.User, error) {
	if err := cmp.Or(auth.CheckEmail(email), auth.CheckPassword(password)); err != nil {
		return nil, err
	}
	if role == "" {
		role = models.RoleUser
	}
	if !validRole(role) {
		return nil, errUnprocessable("role must be user or admin")
	}
	u, err := s.auth.StoreUser(c.Request().Context(), email, password, role, false)
	if errors.Is(err, models.ErrConflict) {
		return nil, errConflict("a user with this email already exists")
	} else if err != nil {
		return nil, err
	}
	s.audit(c, models.AuditUserCreate, u.ID, nil, newUserJSON(u))
	return u, nil
}

// updateUser applies a role or disabled change (the last admin stays)
// and records it: user.role when the role changed, else user.update.
func (s *Server) updateUser(c echo.Context, id string, role *string, disabled *bool) (*models.User, error) {
	ctx := c.Request().Context()
	if role != nil && !validRole(*role) {
		return nil, errUnprocessable("role must be user or admin")
	}
	before, err := s.store.User(ctx, id)
	if errors.Is(err, models.ErrNotFound) {
		return nil, errNotFound("user")
	} else if err != nil {
		return nil, err
	}
	u, err := s.store.UpdateUser(ctx, id, models.UserUpdate{Role: role, Disabled: disabled})
	switch {
	case errors.Is(err, models.ErrLastAdmin):
		return nil, errConflict("the last admin cannot be removed, disabled or demoted")
	case errors.Is(err, models.ErrNotFound):
		return nil, errNotFound("user")
	case err != nil:
		return nil, err
	}
	// Recorded once committed, whatever the revocation below does.
	action := models.AuditUserUpdate
	if u.Role != before.Role {
		action = models.AuditUserRole
	}
	s.audit(c, action, id, newUserJSON(before), newUserJSON(u))
	// The store ended their sessions with the change; their sockets and
	// runs go now, so nothing carries on with the old rights.
	if u.Role != before.Role || u.Disabled && !before.Disabled {
		if err := s.revokeUser(ctx, id); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// deleteUser deletes a user with their threads and records it.
func (s *Server) deleteUser(c echo.Context, id string) error {
	ctx := c.Request().Context()
	before, err := s.store.User(ctx, id)
	if errors.Is(err, models.ErrNotFound) {
		return errNotFound("user")
	} else if err != nil {
		return err
	}
	// Refuse the last admin before stopping their runs; the store checks
	// again inside its transaction.
	if last, err := s.isLastAdmin(ctx, id); err != nil {
		return err
	} else if last {
		return errConflict("the last admin cannot be removed, disabled or demoted")
	}
	ts, err := s.store.Threads(ctx, id)
	if err != nil {
		return err
	}
	if err := s.stopRuns(ctx, ts); err != nil {
		return err
	}
	err = s.store.DeleteUser(ctx, id)
	switch {
	case errors.Is(err, models.ErrLastAdmin):
		return errConflict("the last admin cannot be removed, disabled or demoted")
	case errors.Is(err, models.ErrNotFound):
		return errNotFound("user")
	case err != nil:
		return err
	}
	// Their runs were stopped above and their threads are gone with them:
	// only their sockets are left to close.
	s.sockets.CloseUser(hub.CloseAccountChanged, id)
	s.audit(c, models.AuditUserDelete, id, newUserJSON(before), nil)
	for _, t := range ts {
		s.removeWorkspace(t.ID)
	}
	return nil
}

// isLastAdmin reports whether user id is the only enabled admin.
func (s *Server) isLastAdmin(ctx context.Context, id string) (bool, error) {
	us, err := s.store.Users(ctx)
	if err != nil {
		return false, err
	}
	admins, self := 0, false
	for _, u := range us {
		if u.IsAdmin() && !u.Disabled {
			admins++
			self = self || u.ID == id
		}
	}
	return self && admins == 1, nil
}

func (s *Server) apiAdminUserCreate(c echo.Context) error {
	var req userRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	role := ""
	if req.Role != nil {
		role = *req.Role
	}
	u, err := s.createUser(c, req.Email, req.Password, role)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, newUserJSON(u))
}

func (s *Server) apiAdminUserUpdate(c echo.Context) error {
	id, err := pathID(c, "id", "user")
	if err != nil {
		return err
	}
	var req userRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if req.Email != "" || req.Password != "" {
		return errUnprocessable("only role and disabled can be changed")
	}
	u, err := s.updateUser(c, id, req.Role, req.Disabled)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newUserJSON(u))
}

func (s *Server) apiAdminUserDelete(c echo.Context) error {
	id, err := pathID(c, "id", "user")
	if err != nil {
		return err
	}
	if err := s.deleteUser(c, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// Admin page.

func (s *Server) adminPage(c echo.Context) error {
	return s.renderAdmin(c, http.StatusOK, "", "")
}

func (s *Server) renderAdmin(c echo.Context, status int, flash, errMsg string) error {
	return s.renderAdminWith(c, status, flash, errMsg, views.ConsoleModelView{Provider: "openai", Stream: "auto"})
}

// renderAdminWith is renderAdmin with the add-model form holding
// newModel: a refused save keeps what was typed.
func (s *Server) renderAdminWith(c echo.Context, status int, flash, errMsg string, newModel views.ConsoleModelView) error {
	us, js, err := s.adminUsers(c)
	if err != nil {
		return err
	}
	me := auth.User(c)
	users := make([]views.UserView, len(us))
	for i, u := range us {
		users[i] = views.UserView{ID: u.ID, Email: u.Email, Role: u.Role, Disabled: u.Disabled, CreatedAt: u.CreatedAt, Self: u.ID == me.ID,
			SignIn: js[i].SignIn, Identities: identityViews(js[i].Identities)}
	}
	ms, err := s.consoleModelViews(c)
	if err != nil {
		return err
	}
	limits, err := s.limitViews(c)
	if err != nil {
		return err
	}
	agents, err := s.agentTypeViews(c)
	if err != nil {
		return err
	}
	p := s.page(c, "Admin")
	p.Flash, p.Error = flash, errMsg
	return s.render(c, status, views.Admin(views.AdminPage{Page: p, TokenUsageEnabled: s.settings.TokenUsage(), ConsoleModels: ms, NewModel: newModel, Limits: limits, Agents: agents, Users: users, MCP: s.mcpViews(c)}))
}

// formResult answers a page's form with the page again: with flash when
// err is nil, with the message of a known error (knownError); other
// errors go up.
func formResult(c echo.Context, err error, flash string, render func(c echo.Context, status int, flash, errMsg string) error) error {
	if err == nil {
		return render(c, http.StatusOK, flash, "")
	}
	if ae := knownError(err, c); ae != nil {
		return render(c, ae.Status, "", ae.Message)
	}
	return err
}

func (s *Server) adminSettingsSubmit(c echo.Context) error {
	on := c.FormValue(settingTokenUsage) == "true" || c.FormValue(settingTokenUsage) == "on"
	err := s.setTokenUsage(c, on)
	state := "off"
	if on {
		state = "on"
	}
	return formResult(c, err, "Token usage display is "+state+".", s.renderAdmin)
}

func (s *Server) adminUserCreateSubmit(c echo.Context) error {
	_, err := s.createUser(c, c.FormValue("email"), c.FormValue("password"), c.FormValue("role"))
	return formResult(c, err, "User created.", s.renderAdmin)
}

func (s *Server) adminUserUpdateSubmit(c echo.Context) error {
	id, err := pathID(c, "id", "user")
	if err != nil {
		return err
	}
	var role *string
	if r := c.FormValue("role"); r != "" {
		role = &r
	}
	var disabled *bool
	if d := strings.TrimSpace(c.FormValue("disabled")); d != "" {
		v := d == "true"
		disabled = &v
	}
	_, err = s.updateUser(c, id, role, disabled)
	return formResult(c, err, "User updated.", s.renderAdmin)
}

func (s *Server) adminUserDeleteSubmit(c echo.Context) error {
	id, err := pathID(c, "id", "user")
	if err != nil {
		return err
	}
	return formResult(c, s.deleteUser(c, id), "User deleted.", s.renderAdmin)
}
