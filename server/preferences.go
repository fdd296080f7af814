package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"herd/agent"
	"herd/models"
	"herd/server/auth"
)

// Preferences are a user's own settings: the colour scheme of every page
// and the model a new thread starts with (docs/API.md "Preferences").
type preferencesJSON struct {
	Theme        string `json:"theme"`
	DefaultModel string `json:"default_model"`
}

var themes = []string{models.ThemeSystem, models.ThemeLight, models.ThemeDark}

func preferencesOf(u *models.User) preferencesJSON {
	theme := u.Theme
	if theme == "" {
		theme = models.ThemeSystem
	}
	return preferencesJSON{Theme: theme, DefaultModel: u.DefaultModel}
}

// setPreferences validates and saves a change of the current user's
// preferences (nil fields stay) and makes the request see it.
func (s *Server) setPreferences(c echo.Context, theme, model *string) error {
	if theme != nil && !slices.Contains(themes, *theme) {
		return errUnprocessable("theme must be one of %s, got %q", strings.Join(themes, ", "), *theme)
	}
	if model != nil && *model != "" && !s.hasModel(*model) {
		return errUnprocessable("unknown model %q; GET /api/models lists the available ones (or send \"\" for the server's default)", *model)
	}
	u, err := s.store.UpdateUser(c.Request().Context(), auth.User(c).ID, models.UserUpdate{Theme: theme, DefaultModel: model})
	if err != nil {
		return err
	}
	auth.SetUser(c, u)
	return nil
}

func (s *Server) hasModel(name string) bool {
	return slices.ContainsFunc(s.rt.Models(), func(m agent.ModelConfig) bool { return m.Name == name })
}

// defaultModel is the model a run of u starts with when none is named:
// u's choice while it is still configured, else the server's first.
func (s *Server) defaultModel(u *models.User) string {
	if u != nil && u.DefaultModel != "" && s.hasModel(u.DefaultModel) {
		return u.DefaultModel
	}
	return s.rt.Models()[0].Name
}

func (s *Server) apiPreferences(c echo.Context) error {
	return c.JSON(http.StatusOK, preferencesOf(auth.User(c)))
}

func (s *Server) apiPreferencesUpdate(c echo.Context) error {
	var req struct {
		Theme        *string `json:"theme"`
		DefaultModel *string `json:"default_model"`
	}
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if req.Theme == nil && req.DefaultModel == nil {
		return errUnprocessable(`send {"theme": "system"|"light"|"dark"} and/or {"default_model": "<name>"|""}`)
	}
	if err := s.setPreferences(c, req.Theme, req.DefaultModel); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, preferencesOf(auth.User(c)))
}

func (s *Server) preferencesSubmit(c echo.Context) error {
	theme, model := c.FormValue("theme"), c.FormValue("default_model")
	err := s.setPreferences(c, &theme, &model)
	return formResult(c, err, "Preferences saved.", func(c echo.Context, status int, flash, errMsg string) error {
		return s.renderSettings(c, status, settingsForm{flash: flash, errMsg: errMsg})
	})
}
