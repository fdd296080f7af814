package server

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"herd/agent/event"
	"herd/models"
	"herd/server/hub"
)

const settingTokenUsage = "token_usage_enabled"

// SettingStore persists settings; models.Store implements it.
type SettingStore interface {
	Setting(ctx context.Context, key string) (string, error)
	SetSetting(ctx context.Context, key, value string) error
}

// Broadcaster sends an ephemeral frame to open pages (a Settings frame:
// to every one); the Hub and the Cluster implement it.
type Broadcaster interface {
	Publish(threadID, runID string, f event.Frame)
}

// Settings owns the instance-wide settings an admin changes at run time:
// today the token gate, whether token figures may reach any chat view,
// admins' included (docs/DESIGN.md §9). It
// persists a change, applies it, and tells every open page (through the
// Broadcaster the change is given: the hub, or the cluster). The hub reads
// the gate through TokenUsage when it writes each frame, so a toggle
// applies to the next frame of every client.
type Settings struct {
	store SettingStore
	// tokensDefault is the config file's token_usage.enabled: the gate
	// while no admin has used the toggle.
	tokensDefault bool
	// mu serializes changes, so the stored value, the live one and the
	// order of the frames telling pages about them agree.
	mu     sync.Mutex
	tokens atomic.Bool
	// budgetSeed is the config file's budgets.default, budgets the budgets
	// in force (server/budgets.go).
	budgetSeed BudgetRule
	budgets    atomic.Pointer[Budgets]
}

// NewSettings loads the settings from store. tokenUsageDefault (the config
// file's token_usage.enabled) holds until the admin first uses the toggle
// (docs/DESIGN.md §12).
func NewSettings(ctx context.Context, store SettingStore, tokenUsageDefault bool) (*Settings, error) {
	s := &Settings{store: store, tokensDefault: tokenUsageDefault}
	on, err := s.storedTokenUsage(ctx)
	if err != nil {
		return nil, err
	}
	s.tokens.Store(on)
	return s, nil
}

// storedTokenUsage is the token gate as the store has it: the config
// file's value while it was never set (not found is no failure: it is
// what every database holds until an admin first uses the toggle).
func (s *Settings) storedTokenUsage(ctx context.Context) (bool, error) {
	v, err := s.store.Setting(ctx, settingTokenUsage)
	switch {
	case errors.Is(err, models.ErrNotFound):
		return s.tokensDefault, nil
	case err != nil:
		return false, err
	}
	return v == "true", nil
}

// TokenUsage reports whether token figures may reach chat views: pages,
// cards, frames, message metadata and the thread JSON, for everyone.
func (s *Settings) TokenUsage() bool { return s.tokens.Load() }

// redaction is the token gate's current verdict (hub.Redaction), read
// once per response.
func (s *Server) redaction() hub.Redaction { return hub.Redaction{Hide: !s.settings.TokenUsage()} }

// SetTokenUsage stores the token gate, applies it and tells every open
// page at once, through pages; it returns the gate it replaced, for the
// audit log, read under the same lock as the change. (The hub that pages
// reach is built with TokenUsage, so pages are given here rather than to
// NewSettings.)
func (s *Settings) SetTokenUsage(ctx context.Context, on bool, pages Broadcaster) (was bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.store.SetSetting(ctx, settingTokenUsage, strconv.FormatBool(on)); err != nil {
		return false, err
	}
	was = s.tokens.Swap(on)
	pages.Publish("", "", event.Settings{TokenUsage: on})
	return was, nil
}

// Reload reads the token gate and the budgets from the store and applies
// them: another instance changed one (the cluster, which tells the pages
// itself when the gate changed here). A gate never stored is the config
// file's, as at start; only a failed read is an error.
func (s *Settings) Reload(ctx context.Context) (on, changed bool, err error) {
	on, err = s.storedTokenUsage(ctx)
	if err != nil {
		return false, false, err
	}
	if err := s.reloadBudgets(ctx); err != nil {
		return false, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return on, s.tokens.Swap(on) != on, nil
}
