package auth

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"herd/models"
)

// Credentials name what signed a request in: a session (by the hash of
// its cookie) or an API token (by its hash). Sockets are closed by them.

// SessionCredential names the session with id.
func SessionCredential(id string) string { return "session:" + id }

// TokenCredential names the API token with hash.
func TokenCredential(hash string) string { return "token:" + hash }

// TokenHash is the hash of the API token that signed the request in, if
// one did.
func TokenHash(c echo.Context) (string, bool) {
	hash, ok := strings.CutPrefix(Credential(c), "token:")
	return hash, ok && Bearer(c)
}

// lookupTimeout bounds a credential's check long after its request.
const lookupTimeout = 5 * time.Second

// CredentialRole is the role of userID as credential (a session or a
// token) signs them in now, read from the database: a socket's check long
// after its request. ErrCredentialGone when it signs them in no more;
// another error when the database could not say.
func (s *Service) CredentialRole(userID, credential string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	var u *models.User
	var err error
	if id, ok := strings.CutPrefix(credential, "session:"); ok {
		_, u, err = s.store.SessionUser(ctx, id)
	} else if hash, ok := strings.CutPrefix(credential, "token:"); ok {
		u, err = s.store.TokenUser(ctx, hash)
	} else {
		return "", ErrCredentialGone
	}
	switch {
	case errors.Is(err, models.ErrNotFound):
		return "", ErrCredentialGone
	case err != nil:
		return "", err
	case u.ID != userID:
		return "", ErrCredentialGone
	}
	return u.Role, nil
}

// CredentialValid re-reads the request's credential: still there, and
// the user's rights unchanged.
func (s *Service) CredentialValid(c echo.Context) func() bool {
	u := User(c)
	return func() bool {
		ctx := context.WithoutCancel(c.Request().Context())
		if sess := Session(c); sess != nil {
			_, now, err := s.store.SessionUser(ctx, sess.ID)
			return err == nil && now.Role == u.Role
		}
		hash, ok := strings.CutPrefix(Credential(c), "token:")
		if !ok {
			return false
		}
		now, err := s.store.TokenUser(ctx, hash)
		return err == nil && now.Role == u.Role
	}
}
