package server

import (
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"herd/models"
	"herd/server/auth"
	"herd/views"
)

// tokenPrefix marks herd tokens so a leaked one is recognisable.
const tokenPrefix = "herd_"

type tokenJSON struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

func newTokenJSON(t *models.APIToken) tokenJSON {
	return tokenJSON{ID: t.ID, Name: t.Name, Prefix: t.Prefix, CreatedAt: t.CreatedAt.UTC(), LastUsedAt: t.LastUsedAt}
}

// createToken stores a new token's hash and returns the token, once.
func (s *Server) createToken(c echo.Context, name string) (*models.APIToken, string, error) {
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > 100 {
		return nil, "", errUnprocessable("give the token a name of 1 to 100 characters")
	}
	tok := tokenPrefix + auth.RandomToken()
	t := &models.APIToken{UserID: auth.User(c).ID, Name: name, Hash: auth.HashToken(tok), Prefix: tok[:len(tokenPrefix)+6]}
	if err := s.store.CreateAPIToken(c.Request().Context(), t); err != nil {
		return nil, "", err
	}
	return t, tok, nil
}

func (s *Server) apiTokens(c echo.Context) error {
	return listJSON(c, "tokens", s.store.APITokens, newTokenJSON)
}

func (s *Server) apiTokenCreate(c echo.Context) error {
	var req struct {
		Name string `json:"name"`
	}
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	t, tok, err := s.createToken(c, req.Name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]string{"id": t.ID, "name": t.Name, "token": tok})
}

func (s *Server) apiTokenDelete(c echo.Context) error {
	id, err := pathID(c, "id", "token")
	if err != nil {
		return err
	}
	if err := s.revokeToken(c.Request().Context(), auth.User(c).ID, id); err != nil {
		if errors.Is(err, models.ErrNotFound) {
			return errNotFound("token")
		}
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// errNotAToken answers DELETE /api/tokens/current signed in otherwise.
var errNotAToken = errBadRequest("this request is not signed in with an API token: revoke a token by its id (DELETE /api/tokens/{id})")

// apiTokenRevokeSelf revokes the token that signed the request in and
// closes its sockets. Whoever holds a token may end it — its owner's
// script, or whoever found it leaked — and gains nothing by it: it is the
// one thing a token may do to the account's credentials.
func (s *Server) apiTokenRevokeSelf(c echo.Context) error {
	hash, ok := auth.TokenHash(c)
	if !ok {
		return errNotAToken
	}
	ctx := c.Request().Context()
	ts, err := s.store.APITokens(ctx, auth.User(c).ID)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if t.Hash == hash {
			if err := s.revokeToken(ctx, t.UserID, t.ID); err != nil && !errors.Is(err, models.ErrNotFound) {
				return err
			}
			break
		}
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) settingsPage(c echo.Context) error {
	return s.renderSettings(c, http.StatusOK, settingsForm{})
}

// settingsForm is what a submitted form adds to the settings page.
type settingsForm struct {
	flash, errMsg     string
	newToken, newName string // a token just created, shown once
}

func (s *Server) renderSettings(c echo.Context, status int, f settingsForm) error {
	ts, err := s.store.APITokens(c.Request().Context(), auth.User(c).ID)
	if err != nil {
		return err
	}
	items := make([]views.TokenView, len(ts))
	for i, t := range ts {
		items[i] = views.TokenView{ID: t.ID, Name: t.Name, Prefix: t.Prefix, CreatedAt: t.CreatedAt, LastUsedAt: t.LastUsedAt}
	}
	p := s.page(c, "Settings")
	p.Flash, p.Error = f.flash, f.errMsg
	prefs := preferencesOf(auth.User(c))
	return s.render(c, status, views.Settings(views.SettingsPage{
		Page: p, Tokens: items, NewToken: f.newToken, NewName: f.newName,
		Theme: prefs.Theme, DefaultModel: s.defaultModel(auth.User(c)), Models: s.modelOptions(),
	}))
}

func (s *Server) tokenCreateSubmit(c echo.Context) error {
	t, tok, err := s.createToken(c, c.FormValue("name"))
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return s.renderSettings(c, ae.Status, settingsForm{errMsg: ae.Message})
	case err != nil:
		return err
	}
	return s.renderSettings(c, http.StatusOK, settingsForm{newToken: tok, newName: t.Name})
}

func (s *Server) tokenDeleteSubmit(c echo.Context) error {
	id, err := pathID(c, "id", "token")
	if err != nil {
		return err
	}
	if err := s.revokeToken(c.Request().Context(), auth.User(c).ID, id); err != nil && !errors.Is(err, models.ErrNotFound) {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/settings")
}
