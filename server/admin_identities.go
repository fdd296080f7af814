package server

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"herd/models"
	"herd/server/auth"
	"herd/server/hub"
	"herd/views"
)

// How users sign in, for admins (docs/OPERATIONS.md "Single sign-on"):
// each user's password and linked identities on the users list, and the
// unlinking of an identity.

// signInPassword is how the users list names a password.
const signInPassword = "password"

// identityJSON is a linked identity on the wire.
type identityJSON struct {
	ID          string    `json:"id"`
	Provider    string    `json:"provider"`
	Label       string    `json:"provider_name"`
	Email       string    `json:"email"`
	CreatedAt   time.Time `json:"created_at"`
	LastLoginAt time.Time `json:"last_login_at"`
}

// adminUserJSON is a user on the admin's list: how they sign in besides.
type adminUserJSON struct {
	userJSON
	// SignIn names their ways in: "password" and the display name of each
	// provider linked.
	SignIn     []string       `json:"sign_in"`
	Identities []identityJSON `json:"identities"`
}

func (s *Server) newAdminUserJSON(u *models.User, ids []models.Identity) adminUserJSON {
	out := adminUserJSON{userJSON: newUserJSON(u), SignIn: []string{}, Identities: make([]identityJSON, len(ids))}
	if u.PasswordHash != "" {
		out.SignIn = append(out.SignIn, signInPassword)
	}
	for i, id := range ids {
		label := s.sso.Label(id.Provider)
		out.Identities[i] = identityJSON{ID: id.ID, Provider: id.Provider, Label: label, Email: id.Email, CreatedAt: id.CreatedAt.UTC(), LastLoginAt: id.LastLoginAt.UTC()}
		if !slices.Contains(out.SignIn, label) {
			out.SignIn = append(out.SignIn, label)
		}
	}
	return out
}

// adminUsers is every user with how they sign in.
func (s *Server) adminUsers(c echo.Context) ([]models.User, []adminUserJSON, error) {
	ctx := c.Request().Context()
	us, err := s.store.Users(ctx)
	if err != nil {
		return nil, nil, err
	}
	ids, err := s.store.AllIdentities(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := make([]adminUserJSON, len(us))
	for i := range us {
		out[i] = s.newAdminUserJSON(&us[i], ids[us[i].ID])
	}
	return us, out, nil
}

func (s *Server) apiAdminUsers(c echo.Context) error {
	_, out, err := s.adminUsers(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"users": out})
}

// unlinkIdentity removes an identity from a user, ends the sessions it
// started and records it (user.unlink); refused when it is the user's
// only way to sign in.
func (s *Server) unlinkIdentity(c echo.Context) error {
	userID, err := pathID(c, "id", "user")
	if err != nil {
		return err
	}
	identityID, err := pathID(c, "identity_id", "identity")
	if err != nil {
		return err
	}
	un, err := s.store.UnlinkIdentity(c.Request().Context(), userID, identityID)
	switch {
	case errors.Is(err, models.ErrLastSignIn):
		return &apiError{http.StatusConflict, "last_sign_in", models.ErrLastSignIn.Error()}
	case errors.Is(err, models.ErrNotFound):
		return errNotFound("identity")
	case err != nil:
		return err
	}
	id := un.Identity
	s.audit(c, models.AuditUserUnlink, userID, map[string]any{
		"identity": id.ID, "provider": id.Provider, "issuer": id.Issuer, "subject": id.Subject, "email": id.Email,
	}, map[string]any{"sessions_ended": len(un.EndedSessions)})
	if len(un.EndedSessions) > 0 {
		creds := make([]string, len(un.EndedSessions))
		for i, sid := range un.EndedSessions {
			creds[i] = auth.SessionCredential(sid)
		}
		s.sockets.Close(hub.CloseAccountChanged, creds...)
	}
	return nil
}

func (s *Server) apiAdminUnlink(c echo.Context) error {
	if err := s.unlinkIdentity(c); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) adminUnlinkSubmit(c echo.Context) error {
	return formResult(c, s.unlinkIdentity(c), "Identity unlinked.", s.renderAdmin)
}

// identityViews are a user's identities as the admin page shows them.
func identityViews(ids []identityJSON) []views.IdentityView {
	out := make([]views.IdentityView, len(ids))
	for i, id := range ids {
		out[i] = views.IdentityView{ID: id.ID, Label: id.Label, Email: id.Email, LastLoginAt: id.LastLoginAt}
	}
	return out
}
