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

// Preferences are a user's own settings: the colour scheme of every page,
// the model a new thread starts with and what Enter does in a message
// field (docs/API.md "Preferences").
type preferencesJSON struct {
	Theme        string `json:"theme"`
	DefaultModel string `json:"default_model"`
	EnterKey     string `json:"enter_key"`
}

var (
	themes    = []string{models.ThemeSystem, models.ThemeLight, models.ThemeDark}
	enterKeys = []string{models.EnterAuto, models.EnterSend, models.EnterNewline}
)

// preferenceChange is a change of preferences; nil fields stay.
type preferenceChange struct {
	Theme        *string `json:"theme"`
	DefaultModel *string `json:"default_model"`
	EnterKey     *string `json:"enter_key"`
}

func preferencesOf(u *models.User) preferencesJSON {
	theme := u.Theme
	if theme == "" {
		theme = models.ThemeSystem
	}
	return preferencesJSON{Theme: theme, DefaultModel: u.DefaultModel, EnterKey: enterKeyOf(u)}
}

// enterKeyOf is u's choice of what Enter does, EnterAuto when unset.
func enterKeyOf(u *models.User) string {
	if u == nil || u.EnterKey == "" {
		return models.EnterAuto
	}
	return u.EnterKey
}

// setPreferences validates and saves a change of the current user's
// preferences (nil fields stay) and makes the request see it.
func (s *Server) setPreferences(c echo.Context, ch preferenceChange) error {
	if ch.Theme != nil && !slices.Contains(themes, *ch.Theme) {
		return errUnprocessable("theme must be one of %s, got %q", strings.Join(themes, ", "), *ch.Theme)
	}
	if ch.DefaultModel != nil && *ch.DefaultModel != "" && !s.hasModel(*ch.DefaultModel) {
		return errUnprocessable("unknown model %q; GET /api/models lists the available ones (or send \"\" for the server's default)", *ch.DefaultModel)
	}
	if ch.EnterKey != nil && !slices.Contains(enterKeys, *ch.EnterKey) {
		return errUnprocessable("enter_key must be one of %s, got %q", strings.Join(enterKeys, ", "), *ch.EnterKey)
	}
	u, err := s.store.UpdateUser(c.Request().Context(), auth.User(c).ID, models.UserUpdate{Theme: ch.Theme, DefaultModel: ch.DefaultModel, EnterKey: ch.EnterKey})
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
	var req preferenceChange
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if req == (preferenceChange{}) {
		return errUnprocessable(`send any of {"theme": "system"|"light"|"dark"}, {"default_model": "<name>"|""}, {"enter_key": "auto"|"send"|"newline"}`)
	}
	if err := s.setPreferences(c, req); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, preferencesOf(auth.User(c)))
}

func (s *Server) preferencesSubmit(c echo.Context) error {
	theme, model, enter := c.FormValue("theme"), c.FormValue("default_model"), c.FormValue("enter_key")
	ch := preferenceChange{Theme: &theme, DefaultModel: &model}
	// A form from before the Enter setting (a page open during an
	// upgrade) leaves it as it is.
	if enter != "" {
		ch.EnterKey = &enter
	}
	err := s.setPreferences(c, ch)
	return formResult(c, err, "Preferences saved.", func(c echo.Context, status int, flash, errMsg string) error {
		return s.renderSettings(c, status, settingsForm{flash: flash, errMsg: errMsg})
	})
}
