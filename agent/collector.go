package agent

import (
	"slices"
	"sync"

	"herd/models"
)

// ledgerEntry turns one response into its ledger row. A response that
// reported no usage worth recording (none, or input, output and total all
// ≤ 0) is still a call: its row is marked Unreported with zero figures,
// never a fabricated count. A missing total is input + output; cache-read
// is kept only when > 0 (docs/DESIGN.md §6). herdModel is the herd model
// the call was made with; resp.Model is the provider's name for it. own
// names the thread and its owner, whom the row bills after either is
// deleted.
func ledgerEntry(own owner, runID, taskID, herdModel string, resp Response) *models.UsageEntry {
	e := &models.UsageEntry{CallID: resp.CallID, ThreadID: own.threadID, UserID: own.userID, RunID: runID, TaskID: taskID, ModelName: resp.Model, HerdModel: herdModel}
	u := resp.Usage
	if u == nil || (u.InputTokens <= 0 && u.OutputTokens <= 0 && u.TotalTokens <= 0) {
		e.Unreported = true
		return e
	}
	e.InputTokens, e.OutputTokens, e.TotalTokens = max(u.InputTokens, 0), max(u.OutputTokens, 0), u.TotalTokens
	if e.TotalTokens <= 0 {
		e.TotalTokens = e.InputTokens + e.OutputTokens
	}
	e.CacheReadTokens = max(u.CacheReadTokens, 0)
	return e
}

// owner is the thread a ledger row is written under and the user it
// bills (docs/DESIGN.md §6).
type owner struct{ threadID, userID string }

// collector counts the LLM calls of one subagent execution, each once by
// call id, and gives the cumulative snapshot the card shows. It is a
// projection: the ledger is written separately, once per call. Its zero
// value is empty.
type collector struct {
	mu    sync.Mutex
	seen  []string // the call ids recorded: a subagent makes at most max_turns calls
	total TokenUsage
}

// Record adds e unless its call id was recorded before or it reported no
// usage (the card then keeps "usage unavailable"); it reports whether it
// did.
func (c *collector) Record(e *models.UsageEntry) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e == nil || e.Unreported || slices.Contains(c.seen, e.CallID) {
		return false
	}
	c.seen = append(c.seen, e.CallID)
	c.total.InputTokens += e.InputTokens
	c.total.OutputTokens += e.OutputTokens
	c.total.TotalTokens += e.TotalTokens
	return true
}

// seed starts the count at u, what the execution's calls before a restart
// reported (its last step's snapshot); nil leaves it empty.
func (c *collector) seed(u *TokenUsage) {
	if u == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, "") // no call id: the calls before the restart
	c.total = *u
}

// Snapshot is the cumulative usage so far, or nil when no call reported any.
func (c *collector) Snapshot() *TokenUsage {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) == 0 {
		return nil
	}
	t := c.total
	return &t
}
