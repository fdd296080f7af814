package models

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// The audit log's actions: a closed vocabulary, listed here and nowhere
// else (AuditActions; docs/API.md "Audit log"). An action names a kind of
// target and what was done to it.
const (
	AuditUserCreate = "user.create"
	// AuditUserUpdate is a change of a user other than their role: today
	// disabling or enabling them.
	AuditUserUpdate = "user.update"
	// AuditUserRole is a change of a user's role, alone or with others.
	AuditUserRole   = "user.role"
	AuditUserDelete = "user.delete"
	// AuditUserLink is an identity provider's account joined to an
	// existing user at their first single sign-on (same verified email).
	AuditUserLink = "user.link"
	// AuditUserUnlink is an admin removing an identity from a user.
	AuditUserUnlink = "user.unlink"

	AuditSettingsTokenUsage = "settings.token_usage"

	AuditModelCreate  = "model.create"
	AuditModelUpdate  = "model.update"
	AuditModelDelete  = "model.delete"
	AuditMCPCreate    = "mcp.create"
	AuditMCPUpdate    = "mcp.update"
	AuditMCPDelete    = "mcp.delete"
	AuditAgentCreate  = "agent.create"
	AuditAgentUpdate  = "agent.update"
	AuditAgentDelete  = "agent.delete"
	AuditLimitsUpdate = "limits.update"
	AuditBudgetUpdate = "budget.update"

	// AuditAuditPurge is the retention's own purge: no actor, the count
	// of entries removed as after.
	AuditAuditPurge = "audit.purge"
)

// AuditActions is every action an entry may record, in the order the
// admin page offers them.
var AuditActions = []string{
	AuditUserCreate, AuditUserUpdate, AuditUserRole, AuditUserDelete, AuditUserLink, AuditUserUnlink,
	AuditSettingsTokenUsage,
	AuditModelCreate, AuditModelUpdate, AuditModelDelete,
	AuditMCPCreate, AuditMCPUpdate, AuditMCPDelete,
	AuditAgentCreate, AuditAgentUpdate, AuditAgentDelete,
	AuditLimitsUpdate, AuditBudgetUpdate,
	AuditAuditPurge,
}

// ErrAuditAction is returned for an action outside AuditActions.
var ErrAuditAction = errors.New("not an audit action")

// AuditEntry is one admin action on record: who did what to which target,
// and the target before and after as JSON, secrets masked (MaskAudit).
// The actor's email is copied in, so the entry still names them once
// their account is gone.
type AuditEntry struct {
	// ID orders the log: newest first is the highest id.
	ID         int64     `gorm:"primaryKey;autoIncrement"`
	At         time.Time `gorm:"index;not null"`
	ActorID    string    `gorm:"index;not null;default:'';size:36"` // "" for herd itself (a retention purge)
	ActorEmail string    `gorm:"not null;default:''"`
	ActorIP    string    `gorm:"not null;default:''"`
	Action     string    `gorm:"index;not null"`
	// TargetKind is the action's first word (user, settings, model…);
	// TargetID the id or name of what changed.
	TargetKind string `gorm:"not null;default:''"`
	TargetID   string `gorm:"not null;default:''"`
	Before     JSON
	After      JSON
	// Instance is the herd instance that recorded the entry ("" on one
	// instance).
	Instance string `gorm:"not null;default:''"`
}

// AddAudit records e, numbering it (e.ID) and dating it now when e.At is
// zero. TargetKind defaults to the action's first word.
func (s *Store) AddAudit(ctx context.Context, e *AuditEntry) error {
	if !slices.Contains(AuditActions, e.Action) {
		return fmt.Errorf("store: add audit entry: %q: %w", e.Action, ErrAuditAction)
	}
	if e.At.IsZero() {
		e.At = s.now()
	}
	e.At = e.At.UTC()
	if e.TargetKind == "" {
		e.TargetKind, _, _ = strings.Cut(e.Action, ".")
	}
	e.ID = 0
	if err := s.w.WithContext(ctx).Create(e).Error; err != nil {
		return fmt.Errorf("store: add audit entry: %w", err)
	}
	return nil
}

// AuditFilter selects entries of the log; zero fields select all.
type AuditFilter struct {
	// Actor is a user id or an email (exact, any case).
	Actor string
	// Action is an action or a prefix of one: "user." or "user".
	Action string
	// TargetKind and TargetID select a target (exact).
	TargetKind, TargetID string
	// Since and Until bound At: Since <= At < Until.
	Since, Until time.Time
	// Before is a page's cursor: entries with a smaller id (0: from the
	// newest).
	Before int64
}

// where applies f to q.
func (f AuditFilter) where(q *gorm.DB) *gorm.DB {
	if f.Actor != "" {
		q = q.Where("actor_id = ? OR LOWER(actor_email) = ?", f.Actor, strings.ToLower(f.Actor))
	}
	if f.Action != "" {
		// An action is a word, a dot and a word; a prefix is matched
		// literally (no LIKE wildcards reach the query).
		prefix := strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(f.Action)
		q = q.Where(`action LIKE ? ESCAPE '\'`, prefix+"%")
	}
	if f.TargetKind != "" {
		q = q.Where("target_kind = ?", f.TargetKind)
	}
	if f.TargetID != "" {
		q = q.Where("target_id = ?", f.TargetID)
	}
	if !f.Since.IsZero() {
		q = q.Where("at >= ?", f.Since.UTC())
	}
	if !f.Until.IsZero() {
		q = q.Where("at < ?", f.Until.UTC())
	}
	if f.Before > 0 {
		q = q.Where("id < ?", f.Before)
	}
	return q
}

// Audit returns up to limit entries f selects, newest first, and whether
// more follow (the next page's Before is the last entry's ID). The cursor
// is a key, so entries added while an admin pages never shift a page.
func (s *Store) Audit(ctx context.Context, f AuditFilter, limit int) ([]AuditEntry, bool, error) {
	es, err := list[AuditEntry](f.where(s.r.WithContext(ctx)).Order("id DESC").Limit(limit+1), "audit entries")
	if err != nil {
		return nil, false, err
	}
	if len(es) > limit {
		return es[:limit], true, nil
	}
	return es, false, nil
}

// auditBatch is how many entries EachAudit reads at a time.
const auditBatch = 500

// EachAudit calls fn with every entry f selects, newest first, reading
// auditBatch at a time, so an export of any size holds one batch in
// memory. An error of fn stops it and is returned.
func (s *Store) EachAudit(ctx context.Context, f AuditFilter, fn func(*AuditEntry) error) error {
	for {
		es, more, err := s.Audit(ctx, f, auditBatch)
		if err != nil {
			return err
		}
		for i := range es {
			if err := fn(&es[i]); err != nil {
				return err
			}
		}
		if !more {
			return nil
		}
		f.Before = es[len(es)-1].ID
	}
}

// PurgeAudit deletes the entries recorded before t and returns how many.
// Instances purging at once delete each row once, and the others none.
func (s *Store) PurgeAudit(ctx context.Context, t time.Time) (int64, error) {
	res := s.w.WithContext(ctx).Where("at < ?", t.UTC()).Delete(&AuditEntry{})
	if res.Error != nil {
		return 0, fmt.Errorf("store: purge audit log: %w", res.Error)
	}
	return res.RowsAffected, nil
}
