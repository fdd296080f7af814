package models

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// SignOn is who an OpenID Connect provider says signed in, already
// admitted by its rules (a verified email, allowed domain and groups).
type SignOn struct {
	Provider, Issuer, Subject, Email string
	// Admin is the provider's word on the admin role; nil leaves the role
	// as it is (a new user is a user).
	Admin *bool
}

// SignOnResult is what SignInIdentity did, for the caller to log.
type SignOnResult struct {
	User    *User
	Created bool // a new user
	Linked  bool // the identity joined an existing user (same email)
	// RoleFrom is the role before the provider's claim changed it ("" =
	// unchanged).
	RoleFrom string
	// EmailFrom is the user's email before the provider's changed it
	// ("" = unchanged).
	EmailFrom string
	// KeptLastAdmin: the claim would have removed the last admin; the
	// role stayed (ErrLastAdmin's rule).
	KeptLastAdmin bool
	// EndedSessions are the ids of the sessions a role change ended, for
	// the caller to close their sockets.
	EndedSessions []string
}

// SignInIdentity finds or makes the user of so, in one transaction: the
// user its issuer and subject are linked to; else the user with its
// email, to whom it is linked (the provider verified the email); else a
// new user without a password. Then the provider's admin claim, if any,
// sets the role, granted or removed, never removing the last enabled
// admin. A role changed ends the user's other sessions, as UpdateUser.
func (s *Store) SignInIdentity(ctx context.Context, so SignOn) (*SignOnResult, error) {
	res := &SignOnResult{}
	err := s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		u, err := s.identityUser(tx, so, res)
		if err != nil {
			return err
		}
		res.User = u
		return s.claimRole(tx, u, so.Admin, res)
	})
	if err != nil {
		return nil, userErr("sign in identity", err)
	}
	return res, nil
}

// identityUser is the user so is linked to, linked or made now.
func (s *Store) identityUser(tx *gorm.DB, so SignOn, res *SignOnResult) (*User, error) {
	now := s.now().UTC()
	email := strings.ToLower(strings.TrimSpace(so.Email))
	var id Identity
	err := tx.Where("issuer = ? AND subject = ?", so.Issuer, so.Subject).Take(&id).Error
	if err == nil {
		var u User
		if err := tx.Where("id = ?", id.UserID).Take(&u).Error; err != nil {
			return nil, err
		}
		if err := followEmail(tx, &u, email, res); err != nil {
			return nil, err
		}
		return &u, tx.Model(&id).Updates(map[string]any{"email": email, "last_login_at": now}).Error
	}
	if !errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, err
	}
	var u User
	switch err := tx.Where("email = ?", email).Take(&u).Error; {
	case err == nil:
		res.Linked = true
	case errors.Is(err, gorm.ErrRecordNotFound):
		u = User{ID: uuid.NewString(), Email: email, Role: RoleUser}
		if err := tx.Create(&u).Error; err != nil {
			return nil, err
		}
		res.Created = true
	default:
		return nil, err
	}
	id = Identity{ID: uuid.NewString(), UserID: u.ID, Issuer: so.Issuer, Subject: so.Subject, Provider: so.Provider, Email: email, CreatedAt: now, LastLoginAt: now}
	return &u, tx.Create(&id).Error
}

// EmailTakenError refuses a sign-in whose identity's email changed at
// the provider to one another herd user has: an admin must settle which
// account it is.
type EmailTakenError struct{ Email string }

func (e *EmailTakenError) Error() string {
	return "your email address at the identity provider, " + e.Email + ", belongs to another herd account, so you are not signed in: ask your admin"
}

// followEmail gives u the email its linked identity now has at the
// provider (admitted, so verified or trusted): the provider owns it. An
// email another user has is refused.
func followEmail(tx *gorm.DB, u *User, email string, res *SignOnResult) error {
	if email == "" || email == u.Email {
		return nil
	}
	var n int64
	if err := tx.Model(&User{}).Where("email = ? AND id <> ?", email, u.ID).Count(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return &EmailTakenError{Email: email}
	}
	from := u.Email // Update sets u's field too
	if err := tx.Model(u).Update("email", email).Error; errors.Is(err, gorm.ErrDuplicatedKey) {
		return &EmailTakenError{Email: email} // taken meanwhile (the unique index)
	} else if err != nil {
		return err
	}
	res.EmailFrom, u.Email = from, email
	return nil
}

// claimRole gives u the role the provider's admin claim says, if any.
func (s *Store) claimRole(tx *gorm.DB, u *User, admin *bool, res *SignOnResult) error {
	if admin == nil {
		return nil
	}
	want := RoleUser
	if *admin {
		want = RoleAdmin
	}
	if u.Role == want {
		return nil
	}
	if u.Role == RoleAdmin && !u.Disabled {
		if err := lastAdminCheck(tx, u.ID); errors.Is(err, ErrLastAdmin) {
			res.KeptLastAdmin = true
			return nil
		} else if err != nil {
			return err
		}
	}
	res.RoleFrom = u.Role
	u.Role = want
	if err := tx.Model(u).Update("role", want).Error; err != nil {
		return err
	}
	if err := tx.Model(&Session{}).Where("user_id = ?", u.ID).Pluck("id", &res.EndedSessions).Error; err != nil {
		return err
	}
	return tx.Where("user_id = ?", u.ID).Delete(&Session{}).Error
}

// Identities lists userID's linked identities, oldest first.
func (s *Store) Identities(ctx context.Context, userID string) ([]Identity, error) {
	return list[Identity](s.r.WithContext(ctx).Where("user_id = ?", userID).Order("created_at"), "identities")
}

// AllIdentities is every linked identity by user id, oldest first: the
// admin's users list shows how each signs in.
func (s *Store) AllIdentities(ctx context.Context) (map[string][]Identity, error) {
	ids, err := list[Identity](s.r.WithContext(ctx).Order("created_at"), "identities")
	if err != nil {
		return nil, err
	}
	out := map[string][]Identity{}
	for _, id := range ids {
		out[id.UserID] = append(out[id.UserID], id)
	}
	return out, nil
}

// ErrLastSignIn refuses to unlink a user's only way to sign in: their
// last identity, when they have no password.
var ErrLastSignIn = errors.New("this is the user's only way to sign in (no password and no other identity): give them a password or link another identity first, or delete the user")

// Unlinked is what UnlinkIdentity removed: the identity, and the ids of
// the sessions it had started, ended with it.
type Unlinked struct {
	Identity      Identity
	EndedSessions []string
}

// UnlinkIdentity removes identity identityID from user userID, and ends
// the user's sessions from its provider, in one transaction; refused
// with ErrLastSignIn if the user would be left with no way to sign in.
// The provider can link it again at the next sign-in with a verified
// email: unlinking undoes a link, it does not keep a person out.
func (s *Store) UnlinkIdentity(ctx context.Context, userID, identityID string) (*Unlinked, error) {
	out := &Unlinked{}
	err := s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		q := tx
		if s.pg {
			// Two unlinks of one user's last two identities at once (on two
			// instances) take turns, so they cannot both see the other; on
			// SQLite write transactions already do.
			q = tx.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		var u User
		if err := q.Where("id = ?", userID).Take(&u).Error; err != nil {
			return err
		}
		if err := tx.Where("id = ? AND user_id = ?", identityID, userID).Take(&out.Identity).Error; err != nil {
			return err
		}
		var others int64
		if err := tx.Model(&Identity{}).Where("user_id = ? AND id <> ?", userID, identityID).Count(&others).Error; err != nil {
			return err
		}
		if u.PasswordHash == "" && others == 0 {
			return ErrLastSignIn
		}
		if err := tx.Delete(&out.Identity).Error; err != nil {
			return err
		}
		return endProviderSessions(tx, userID, out.Identity.Provider, &out.EndedSessions)
	})
	if err != nil {
		return nil, userErr("unlink identity", err)
	}
	return out, nil
}

// endProviderSessions ends the sessions of userID that provider started,
// unless another identity of the user is of the same provider (then the
// sessions cannot be told apart, and stay).
func endProviderSessions(tx *gorm.DB, userID, provider string, ended *[]string) error {
	var same int64
	if err := tx.Model(&Identity{}).Where("user_id = ? AND provider = ?", userID, provider).Count(&same).Error; err != nil || same > 0 {
		return err
	}
	if err := tx.Model(&Session{}).Where("user_id = ? AND provider = ?", userID, provider).Pluck("id", ended).Error; err != nil {
		return err
	}
	return tx.Where("user_id = ? AND provider = ?", userID, provider).Delete(&Session{}).Error
}

// CreateLoginFlow keeps a sign-in under way, and drops the expired ones.
func (s *Store) CreateLoginFlow(ctx context.Context, f *LoginFlow) error {
	err := s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("expires_at <= ?", s.now().UTC()).Delete(&LoginFlow{}).Error; err != nil {
			return err
		}
		return tx.Create(f).Error
	})
	if err != nil {
		return fmt.Errorf("store: create login flow: %w", err)
	}
	return nil
}

// TakeLoginFlow returns the flow with id and deletes it, so it is used
// once: of two callbacks racing with one state (on one instance or two),
// one finds it and the other ErrNotFound.
func (s *Store) TakeLoginFlow(ctx context.Context, id string) (*LoginFlow, error) {
	var f LoginFlow
	err := s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("id = ?", id).Take(&f).Error; err != nil {
			return err
		}
		res := tx.Where("id = ?", id).Delete(&LoginFlow{})
		if res.Error == nil && res.RowsAffected == 0 {
			return gorm.ErrRecordNotFound
		}
		return res.Error
	})
	if err != nil {
		return nil, userErr("take login flow", err)
	}
	return &f, nil
}
