package agent

import (
	"fmt"
	"regexp"
	"strconv"
)

// Refusal reasons: the limit that refused a task call before it started
// (run.admitTask). A closed set, like the statuses: cards and views
// read the reason and the limit, never the refusal's wording.
const (
	RefusedPerResponse = "max_concurrent_per_response" // subagents.max_concurrent_per_response
	RefusedPerRun      = "max_total_per_run"           // subagents.max_total_per_run
)

// TaskCallAgain ends the result of a task call refused only for now (over
// the per-response limit): the lead should call task again for it in its
// next response. The demo lead does.
const TaskCallAgain = "call task again for this one after the others finish"

// RefusalReasons lists the values valid as subagent_refusal.reason.
func RefusalReasons() []string { return []string{RefusedPerResponse, RefusedPerRun} }

// Refusal is why a task call never started: the limit it hit (Reason)
// and that limit's value. It travels as the ToolMessage's
// subagent_refusal and on the card. Its fields are in the order a map's
// keys encode (taskKwargs).
type Refusal struct {
	Limit  int64  `json:"limit"`
	Reason string `json:"reason"`
}

func (r *Refusal) valid() bool {
	return r != nil && (r.Reason == RefusedPerResponse || r.Reason == RefusedPerRun) && r.Limit >= 0
}

// text is the refusal as the lead reads it in the ToolMessage.
func (r *Refusal) text() string {
	if r.Reason == RefusedPerResponse {
		return fmt.Sprintf("Not started: one response may start at most %d subagents (subagents.max_concurrent_per_response); %s.", r.Limit, TaskCallAgain)
	}
	return fmt.Sprintf("Not started: this run already started its limit of %d subagents (subagents.max_total_per_run).", r.Limit)
}

// refused is the outcome of a task call refusal r refused.
func refused(r *Refusal) Outcome { return Outcome{Status: StatusFailed, Error: r.text(), Refusal: r} }

func (r *Refusal) asMap() map[string]any {
	return map[string]any{"reason": r.Reason, "limit": r.Limit}
}

// readRefusal reads subagent_refusal tolerantly: a reason outside the set
// or a limit that is not a whole number ≥ 0 reads as no refusal.
func readRefusal(v any) *Refusal {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	reason, _ := m["reason"].(string)
	limit, ok := wholeNumber(m["limit"])
	if r := (&Refusal{Reason: reason, Limit: limit}); ok && r.valid() {
		return r
	}
	return nil
}

// legacyRefusalText matches the refusals older versions wrote without
// subagent_refusal: the only place their wording is read back.
var legacyRefusalText = regexp.MustCompile(`^Not started: (?:one response may start at most (\d+) subagents|this run already started its limit of (\d+) subagents)`)

// legacyRefusal recovers the refusal of a failed task's error written
// before refusals were metadata; nil for any other error.
func legacyRefusal(errText string) *Refusal {
	m := legacyRefusalText.FindStringSubmatch(errText)
	if m == nil {
		return nil
	}
	r := &Refusal{Reason: RefusedPerResponse}
	digits := m[1]
	if digits == "" {
		r.Reason, digits = RefusedPerRun, m[2]
	}
	r.Limit, _ = strconv.ParseInt(digits, 10, 64)
	return r
}
