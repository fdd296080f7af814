package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"herd/agent"
	"herd/models"
)

// settingLimits stores the limits an admin set in the console: only
// those set, by name, as JSON.
const settingLimits = "console_limits"

// ConsoleLimits are the limits the console edits: the runtime's and
// auth.runs_per_minute.
type ConsoleLimits struct {
	agent.Limits
	RunsPerMinute int `json:"runs_per_minute"`
}

// limitFields names each limit and where its value is, for overlaying
// and checking them by name.
func (l *ConsoleLimits) limitFields() map[string]*int {
	return map[string]*int{
		"lead_max_turns": &l.MaxTurns, "max_active_runs_per_user": &l.MaxActiveRunsPerUser,
		"subagents_max_running": &l.MaxRunning, "subagents_max_running_per_user": &l.MaxRunningPerUser,
		"runs_per_minute": &l.RunsPerMinute,
	}
}

// LimitsState is what the console shows of the limits: those in force,
// herd.yaml's, and those the console set (which win).
type LimitsState struct {
	Limits ConsoleLimits  `json:"limits"`
	File   ConsoleLimits  `json:"file"`
	Stored map[string]int `json:"stored"`
}

// Limits are the limits in force: herd.yaml's, overlaid by the
// console's.
func (c *Console) Limits(ctx context.Context) (LimitsState, error) {
	stored, err := c.storedLimits(ctx)
	if err != nil {
		return LimitsState{}, err
	}
	st := LimitsState{Limits: c.o.FileLimits, File: c.o.FileLimits, Stored: stored}
	fields := st.Limits.limitFields()
	for name, v := range stored {
		if f, ok := fields[name]; ok {
			*f = v
		}
	}
	return st, nil
}

func (c *Console) storedLimits(ctx context.Context) (map[string]int, error) {
	stored := map[string]int{}
	v, err := c.o.Store.Setting(ctx, settingLimits)
	switch {
	case errors.Is(err, models.ErrNotFound):
		return stored, nil
	case err != nil:
		return nil, err
	}
	if err := json.Unmarshal([]byte(v), &stored); err != nil {
		return nil, fmt.Errorf("console: stored limits: %w", err)
	}
	return stored, nil
}

// SetLimits stores the limits of change (nil: back to herd.yaml's) and
// applies them with apply. A name that is no limit, or a value below 1,
// is refused by name and nothing changes.
// It returns the limits in force before too (for the audit log).
func (c *Console) SetLimits(ctx context.Context, change map[string]*int, apply func(ConsoleLimits) error) (st, was LimitsState, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if was, err = c.Limits(ctx); err != nil {
		return was, was, err
	}
	stored := maps.Clone(was.Stored)
	known := c.o.FileLimits.limitFields()
	for name, v := range change {
		switch _, ok := known[name]; {
		case !ok:
			return was, was, &EntryError{Field: name, Reason: name + " is not a limit the console sets"}
		case v == nil:
			delete(stored, name)
		case *v < 1:
			return was, was, &EntryError{Field: name, Reason: fmt.Sprintf("%s must be at least 1, got %d", name, *v)}
		default:
			stored[name] = *v
		}
	}
	b, _ := json.Marshal(stored)
	if err := c.o.Store.SetSetting(ctx, settingLimits, string(b)); err != nil {
		return was, was, err
	}
	if st, err = c.Limits(ctx); err != nil {
		return st, was, err
	}
	return st, was, apply(st.Limits)
}

// ReloadLimits applies the stored limits with apply: at start, and when
// another instance changed them.
func (c *Console) ReloadLimits(ctx context.Context, apply func(ConsoleLimits) error) error {
	st, err := c.Limits(ctx)
	if err != nil {
		return err
	}
	return apply(st.Limits)
}
