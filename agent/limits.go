package agent

import (
	"fmt"
)

// Limits are the runtime's limits an admin changes while it runs (the
// admin console, docs/DESIGN.md §12). A run takes MaxTurns at its start;
// the others hold for what starts after a change: a run's claim, a
// subagent's slot.
type Limits struct {
	// MaxTurns is lead.max_turns.
	MaxTurns int `json:"lead_max_turns"`
	// MaxActiveRunsPerUser is lead.max_active_runs_per_user.
	MaxActiveRunsPerUser int `json:"max_active_runs_per_user"`
	// MaxRunning and MaxRunningPerUser are subagents.max_running and
	// subagents.max_running_per_user.
	MaxRunning        int `json:"subagents_max_running"`
	MaxRunningPerUser int `json:"subagents_max_running_per_user"`
}

// Check refuses a limit below 1, naming it.
func (l Limits) Check() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"lead_max_turns", l.MaxTurns}, {"max_active_runs_per_user", l.MaxActiveRunsPerUser},
		{"subagents_max_running", l.MaxRunning}, {"subagents_max_running_per_user", l.MaxRunningPerUser}} {
		if f.v < 1 {
			return fmt.Errorf("%s must be at least 1, got %d", f.name, f.v)
		}
	}
	return nil
}

// SetLimits applies l from now on: runs in progress keep their turns,
// subagents running keep their slots (more running than a lowered
// max_running end as they would; none starts until they are under it).
func (rt *Runtime) SetLimits(l Limits) error {
	if err := l.Check(); err != nil {
		return err
	}
	rt.limits.Store(&l)
	rt.exec.slots.resize(l.MaxRunning, l.MaxRunningPerUser)
	return nil
}

// Limits are the limits in force.
func (rt *Runtime) Limits() Limits { return *rt.limits.Load() }

// resize changes the slots to max, perUser at most each user's: a slot
// added is granted at once to whoever waits for one; one taken away is
// taken back as the subagents holding it end.
func (a *admission) resize(max, perUser int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.free += max - a.max
	a.max, a.perUser = max, min(perUser, max)
	a.dispatchLocked()
}
