package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// ErrLastAdmin is returned when a change would leave no enabled admin.
var ErrLastAdmin = errors.New("the last admin cannot be removed, disabled or demoted")

// CountUsers returns how many users exist.
func (s *Store) CountUsers(ctx context.Context) (int64, error) {
	var n int64
	if err := s.w.WithContext(ctx).Model(&User{}).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("store: count users: %w", err)
	}
	return n, nil
}

// CreateUser creates a user; the email is stored lower-cased and must be
// unique (ErrConflict). With onlyIfEmpty, it creates the user only on an
// empty instance (first-run set-up), in the same transaction as the check.
func (s *Store) CreateUser(ctx context.Context, email, passwordHash, role string, onlyIfEmpty bool) (*User, error) {
	u := &User{ID: uuid.NewString(), Email: strings.ToLower(strings.TrimSpace(email)), PasswordHash: passwordHash, Role: role}
	err := s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if onlyIfEmpty {
			var n int64
			if err := tx.Model(&User{}).Count(&n).Error; err != nil {
				return err
			}
			if n > 0 {
				return ErrConflict
			}
		}
		return tx.Create(u).Error
	})
	if errors.Is(err, gorm.ErrDuplicatedKey) || errors.Is(err, ErrConflict) {
		return nil, fmt.Errorf("store: create user: %w", ErrConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("store: create user: %w", err)
	}
	return u, nil
}

// UserByEmail returns the user with email.
func (s *Store) UserByEmail(ctx context.Context, email string) (*User, error) {
	return take[User](s.r.WithContext(ctx).Where("email = ?", strings.ToLower(strings.TrimSpace(email))), "user")
}

// User returns user id.
func (s *Store) User(ctx context.Context, id string) (*User, error) {
	return take[User](s.r.WithContext(ctx).Where("id = ?", id), "user")
}

// Users lists every user by email.
func (s *Store) Users(ctx context.Context) ([]User, error) {
	return list[User](s.r.WithContext(ctx).Order("email"), "users")
}

// UserUpdate is a partial change of a user; nil fields stay.
type UserUpdate struct {
	Role         *string
	Disabled     *bool
	PasswordHash *string
	Theme        *string
	DefaultModel *string
	EnterKey     *string
}

// UpdateUser applies up to user id, refusing to leave no enabled admin.
// Disabling a user or changing their role ends their sessions, in the same
// transaction, so no request is served with the old rights after it. A
// new password does not: the caller decides which sessions stay
// (DeleteUserSessions).
func (s *Store) UpdateUser(ctx context.Context, id string, up UserUpdate) (*User, error) {
	var u User
	err := s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("id = ?", id).Take(&u).Error; err != nil {
			return err
		}
		was := u
		wasActiveAdmin := u.Role == RoleAdmin && !u.Disabled
		if up.Role != nil {
			u.Role = *up.Role
		}
		if up.Disabled != nil {
			u.Disabled = *up.Disabled
		}
		if up.PasswordHash != nil {
			u.PasswordHash = *up.PasswordHash
		}
		if up.Theme != nil {
			u.Theme = *up.Theme
		}
		if up.DefaultModel != nil {
			u.DefaultModel = *up.DefaultModel
		}
		if up.EnterKey != nil {
			u.EnterKey = *up.EnterKey
		}
		if wasActiveAdmin && (u.Role != RoleAdmin || u.Disabled) {
			if err := lastAdminCheck(tx, id); err != nil {
				return err
			}
		}
		if err := tx.Save(&u).Error; err != nil {
			return err
		}
		if u.Disabled || up.Role != nil && *up.Role != was.Role {
			return tx.Where("user_id = ?", id).Delete(&Session{}).Error
		}
		return nil
	})
	if err != nil {
		return nil, userErr("update user", err)
	}
	return &u, nil
}

// DeleteUser deletes user id with their sessions, tokens and threads;
// their calls stay in the usage ledger.
func (s *Store) DeleteUser(ctx context.Context, id string) error {
	err := s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var u User
		if err := tx.Where("id = ?", id).Take(&u).Error; err != nil {
			return err
		}
		if u.Role == RoleAdmin && !u.Disabled {
			if err := lastAdminCheck(tx, id); err != nil {
				return err
			}
		}
		var threadIDs []string
		if err := tx.Model(&Thread{}).Where("user_id = ?", id).Pluck("id", &threadIDs).Error; err != nil {
			return err
		}
		// The ledger stays, under the deleted user's id: the admin's
		// accounting keeps what was billed (docs/DESIGN.md §6).
		for _, m := range []any{&Message{}, &RunEvent{}, &Run{}, &Checkpoint{}} {
			if len(threadIDs) > 0 {
				if err := tx.Where("thread_id IN ?", threadIDs).Delete(m).Error; err != nil {
					return err
				}
			}
		}
		for _, m := range []any{&Thread{}, &Session{}, &APIToken{}, &Identity{}} {
			if err := tx.Where("user_id = ?", id).Delete(m).Error; err != nil {
				return err
			}
		}
		return tx.Delete(&u).Error
	})
	if err != nil {
		return userErr("delete user", err)
	}
	return nil
}

func lastAdminCheck(tx *gorm.DB, exceptID string) error {
	var n int64
	if err := tx.Model(&User{}).Where("role = ? AND disabled = ? AND id <> ?", RoleAdmin, false, exceptID).Count(&n).Error; err != nil {
		return err
	}
	if n == 0 {
		return ErrLastAdmin
	}
	return nil
}

func userErr(what string, err error) error {
	switch {
	case errors.Is(err, ErrLastAdmin):
		return fmt.Errorf("store: %s: %w", what, err)
	case errors.Is(err, gorm.ErrRecordNotFound):
		return fmt.Errorf("store: %s: %w", what, ErrNotFound)
	}
	return fmt.Errorf("store: %s: %w", what, err)
}

// CreateSession stores a session by the hash of its token.
func (s *Store) CreateSession(ctx context.Context, sess *Session) error {
	if err := s.w.WithContext(ctx).Create(sess).Error; err != nil {
		return fmt.Errorf("store: create session: %w", err)
	}
	return nil
}

// SessionUser returns the unexpired session with hash id and its user, who
// must be enabled.
func (s *Store) SessionUser(ctx context.Context, id string) (*Session, *User, error) {
	sess, err := take[Session](s.r.WithContext(ctx).Where("id = ? AND expires_at > ?", id, s.now().UTC()), "session")
	if err != nil {
		return nil, nil, err
	}
	u, err := s.User(ctx, sess.UserID)
	if err != nil {
		return nil, nil, err
	}
	if u.Disabled {
		return nil, nil, fmt.Errorf("store: session: %w", ErrNotFound)
	}
	return sess, u, nil
}

// Sessions lists userID's unexpired sessions, newest first.
func (s *Store) Sessions(ctx context.Context, userID string) ([]Session, error) {
	return list[Session](s.r.WithContext(ctx).Where("user_id = ? AND expires_at > ?", userID, s.now().UTC()).Order("created_at DESC"), "sessions")
}

// TouchSession records that session id was used now, from ip with
// userAgent, at most once a minute so that reads stay reads. It is best
// effort: while another process holds SQLite's write lock it fails
// within asideBusyTimeout rather than hold up the request.
func (s *Store) TouchSession(ctx context.Context, sess *Session, ip, userAgent string) error {
	now := s.now().UTC()
	if sess.LastSeenAt != nil && now.Sub(*sess.LastSeenAt) < time.Minute && sess.IP == ip && sess.UserAgent == userAgent {
		return nil
	}
	err := s.touch(ctx, func(db *gorm.DB) error {
		return db.Model(&Session{}).Where("id = ?", sess.ID).Updates(map[string]any{"last_seen_at": now, "ip": ip, "user_agent": userAgent}).Error
	})
	if err != nil {
		return fmt.Errorf("store: touch session: %w", err)
	}
	sess.LastSeenAt, sess.IP, sess.UserAgent = &now, ip, userAgent
	return nil
}

// DeleteUserSessions removes every session of userID but those with the
// ids in keep, and returns the ids removed.
func (s *Store) DeleteUserSessions(ctx context.Context, userID string, keep ...string) ([]string, error) {
	var ids []string
	err := s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		q := tx.Model(&Session{}).Where("user_id = ?", userID)
		if len(keep) > 0 {
			q = q.Where("id NOT IN ?", keep)
		}
		if err := q.Pluck("id", &ids).Error; err != nil || len(ids) == 0 {
			return err
		}
		return tx.Where("id IN ?", ids).Delete(&Session{}).Error
	})
	if err != nil {
		return nil, fmt.Errorf("store: delete sessions: %w", err)
	}
	return ids, nil
}

// DeleteSession removes the session with hash id.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if err := s.w.WithContext(ctx).Where("id = ?", id).Delete(&Session{}).Error; err != nil {
		return fmt.Errorf("store: delete session: %w", err)
	}
	return nil
}

// DeleteExpiredSessions removes sessions past their expiry.
func (s *Store) DeleteExpiredSessions(ctx context.Context) error {
	if err := s.w.WithContext(ctx).Where("expires_at <= ?", s.now().UTC()).Delete(&Session{}).Error; err != nil {
		return fmt.Errorf("store: delete expired sessions: %w", err)
	}
	return nil
}

// CreateAPIToken stores a token by its hash.
func (s *Store) CreateAPIToken(ctx context.Context, t *APIToken) error {
	if t.ID == "" {
		t.ID = uuid.NewString()
	}
	if err := s.w.WithContext(ctx).Create(t).Error; err != nil {
		return fmt.Errorf("store: create api token: %w", err)
	}
	return nil
}

// APITokens lists userID's tokens, newest first.
func (s *Store) APITokens(ctx context.Context, userID string) ([]APIToken, error) {
	return list[APIToken](s.r.WithContext(ctx).Where("user_id = ?", userID).Order("created_at DESC"), "api tokens")
}

// DeleteAPIToken deletes userID's token id and returns its hash, which
// names what the token signed in.
func (s *Store) DeleteAPIToken(ctx context.Context, userID, id string) (string, error) {
	var t APIToken
	err := s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("id = ? AND user_id = ?", id, userID).Take(&t).Error; err != nil {
			return err
		}
		return tx.Delete(&t).Error
	})
	if err != nil {
		return "", userErr("delete api token", err)
	}
	return t.Hash, nil
}

// TokenUser returns the enabled user owning the token with hash, and marks
// the token used (at most once a minute, to keep reads cheap).
func (s *Store) TokenUser(ctx context.Context, hash string) (*User, error) {
	t, err := take[APIToken](s.r.WithContext(ctx).Where("hash = ?", hash), "api token")
	if err != nil {
		return nil, err
	}
	u, err := s.User(ctx, t.UserID)
	if err != nil {
		return nil, err
	}
	if u.Disabled {
		return nil, fmt.Errorf("store: api token: %w", ErrNotFound)
	}
	now := s.now().UTC()
	if t.LastUsedAt == nil || now.Sub(*t.LastUsedAt) > time.Minute {
		_ = s.touch(ctx, func(db *gorm.DB) error {
			return db.Model(&APIToken{}).Where("id = ?", t.ID).Update("last_used_at", now).Error
		})
	}
	return u, nil
}
