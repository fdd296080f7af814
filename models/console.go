package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Kinds of ConsoleEntry.
const (
	EntryModel = "model"
	EntryMCP   = "mcp"
	EntryAgent = "agent"
)

// ConsoleEntry is a setting an admin added in the console rather than
// in the config file: a model, an MCP server or a subagent type, by kind
// and name. Spec is its settings as JSON without its secrets; Sealed its
// secrets (an API key, headers, env) as its owner sealed them, which
// models never opens: a backup or a copy carries them sealed.
type ConsoleEntry struct {
	Kind      string `gorm:"primaryKey"`
	Name      string `gorm:"primaryKey"`
	Spec      JSON   `gorm:"not null"`
	Sealed    string `gorm:"not null;default:''"`
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ConsoleEntries lists the entries of kind, oldest first: the order the
// console added them in.
func (s *Store) ConsoleEntries(ctx context.Context, kind string) ([]ConsoleEntry, error) {
	return list[ConsoleEntry](s.r.WithContext(ctx).Where("kind = ?", kind).Order("created_at, name"), kind+" entries")
}

// CreateConsoleEntry stores e, a new entry (ErrConflict when its kind
// has one of its name).
func (s *Store) CreateConsoleEntry(ctx context.Context, e *ConsoleEntry) error {
	now := s.now().UTC()
	e.CreatedAt, e.UpdatedAt = now, now
	err := s.w.WithContext(ctx).Create(e).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return fmt.Errorf("store: create %s %s: %w", e.Kind, e.Name, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("store: create %s %s: %w", e.Kind, e.Name, err)
	}
	return nil
}

// UpdateConsoleEntry replaces the spec and secrets of an existing entry
// (ErrNotFound).
func (s *Store) UpdateConsoleEntry(ctx context.Context, e *ConsoleEntry) error {
	e.UpdatedAt = s.now().UTC()
	res := s.w.WithContext(ctx).Model(&ConsoleEntry{}).Where("kind = ? AND name = ?", e.Kind, e.Name).
		Updates(map[string]any{"spec": e.Spec, "sealed": e.Sealed, "updated_at": e.UpdatedAt})
	return oneRow(res, "update "+e.Kind+" "+e.Name)
}

// DeleteConsoleEntry deletes an entry (ErrNotFound).
func (s *Store) DeleteConsoleEntry(ctx context.Context, kind, name string) error {
	res := s.w.WithContext(ctx).Where("kind = ? AND name = ?", kind, name).Delete(&ConsoleEntry{})
	return oneRow(res, "delete "+kind+" "+name)
}

// oneRow is res's error, or ErrNotFound when it changed no row.
func oneRow(res *gorm.DB, what string) error {
	switch {
	case res.Error != nil:
		return fmt.Errorf("store: %s: %w", what, res.Error)
	case res.RowsAffected == 0:
		return fmt.Errorf("store: %s: %w", what, ErrNotFound)
	}
	return nil
}
