package agent

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"herd/models"
)

// Card is the state of one subagent card (docs/API.md "task"): a projection
// of the thread's messages and persisted events. It never writes anything.
type Card struct {
	TaskID       string      `json:"task_id"`
	ExecutionID  string      `json:"execution_id"`
	RunID        string      `json:"run_id"`
	Description  string      `json:"description"`
	Prompt       string      `json:"prompt"`
	SubagentType string      `json:"subagent_type"`
	Status       string      `json:"status"`
	ModelName    string      `json:"model_name"`
	Usage        *TokenUsage `json:"usage"`
	StopReason   string      `json:"stop_reason"`
	Result       string      `json:"result"`
	Error        string      `json:"error"`
	Version      int64       `json:"version"`
	LastSeq      int64       `json:"last_seq"`
	// Refusal is the limit that refused a failed task before it started
	// (the ToolMessage's subagent_refusal); nil for any other card.
	Refusal *Refusal `json:"refusal"`
	// Continues is the first call of the card's item when later calls
	// continued it after the per-response limit held it (an AI message's
	// task_continues): the card sits in that call's place and TaskID is
	// the latest call's. "" for a card of one call.
	Continues string `json:"continues,omitempty"`
	// Activity is what a running card is doing, in words, from its latest
	// step (ActivityText): "Reading notes/plan.md", "Thinking".
	Activity string `json:"activity"`
	// Waiting is true while the task's model call waits for a slot of its
	// model (max_concurrent_requests): the card says "Waiting for the
	// model".
	Waiting bool `json:"waiting"`
	// Steps is how many steps a live card has had (0 once terminal: a
	// finished card's count would need its step rows, which stay in the
	// database until the card is expanded).
	Steps int64 `json:"steps"`
	// QueuedAt, StartedAt and EndedAt are when the task was queued for a
	// slot (nil when it never waited), started and ended (its end event,
	// else its ToolMessage; nil while live, and for a card whose run ended
	// without either): the card's elapsed time and the run's timeline.
	QueuedAt  *time.Time `json:"queued_at"`
	StartedAt *time.Time `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	// Files are the files its subagent created or changed and left there,
	// in the order it first wrote them, each at its latest size (its
	// workspace.changed events); none: left out.
	Files []CardFile `json:"files,omitempty"`
}

// CardFile is a file a card's subagent wrote.
type CardFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// Terminal reports whether the card has reached a terminal status.
func (c *Card) Terminal() bool { return isTerminal(c.Status) }

// CardSource is what ProjectCards reads: every message of the thread, the
// queued/start/end and the tasks' workspace.changed events of the thread,
// the latest step and the latest wait of each task of the active run, and
// the active run's id ("" when none).
type CardSource struct {
	Messages    []models.Message
	Events      []models.RunEvent
	ActiveRunID string
}

// noResult is the error of a card whose run ended without a ToolMessage.
const noResult = "the run ended before this subagent reported a result"

// ProjectCards rebuilds every card of a thread, in the order of the task
// calls (docs/DESIGN.md §9). The ToolMessage's metadata is the source of truth for
// a finished card; events fill in live state (model, usage, activity) for
// the active run; a card whose run ended without a ToolMessage is failed,
// never left running.
func ProjectCards(src CardSource) []Card {
	results := map[string]*models.Message{}
	for i := range src.Messages {
		m := &src.Messages[i]
		if m.Type == TypeTool && m.Name == ToolTask {
			results[callKey(m.RunID, m.ToolCallID)] = m
		}
	}
	byTask := map[string][]*models.RunEvent{}
	for i := range src.Events {
		e := &src.Events[i]
		k := callKey(e.RunID, e.TaskID)
		byTask[k] = append(byTask[k], e)
	}

	var cards []Card
	slots := map[string]int{} // a call's key → its card's index
	for _, m := range src.Messages {
		if m.Type != TypeAI || len(m.ToolCalls) == 0 {
			continue
		}
		var calls []ToolCall
		if json.Unmarshal(m.ToolCalls, &calls) != nil {
			continue
		}
		continues := continuesOf(m)
		for _, call := range calls {
			if call.Name != ToolTask {
				continue
			}
			k := callKey(m.RunID, call.ID)
			var c *Card
			if i, ok := slots[callKey(m.RunID, continues[call.ID])]; ok {
				// The same item called again after the per-response limit
				// held it: one card, in its first call's place.
				c = &cards[i]
				c.continueWith(call.ID)
				slots[k] = i
			} else {
				slots[k] = len(cards)
				cards = append(cards, Card{TaskID: call.ID, RunID: m.RunID, Status: StatusQueued})
				c = &cards[len(cards)-1]
			}
			var args taskArgs
			if json.Unmarshal(call.Args, &args) == nil {
				c.Description = strings.TrimSpace(args.Description)
				c.Prompt = args.fullPrompt()
				c.SubagentType = strings.TrimSpace(args.SubagentType)
			}
			for _, e := range byTask[k] {
				c.apply(e)
			}
			if tm := results[k]; tm != nil {
				c.applyResult(tm)
				c.hold()
			}
		}
	}
	for i := range cards {
		c := &cards[i]
		if !c.Terminal() && c.RunID != src.ActiveRunID {
			c.failUnfinished()
		}
		if c.Terminal() {
			c.Steps = 0
		}
	}
	return cards
}

// Held reports whether the card's task waits for a later call: the
// per-response limit refused it and its run may still call it again
// (docs/DESIGN.md §5). Its status is queued.
func (c *Card) Held() bool {
	return c.Status == StatusQueued && c.Refusal != nil && c.Refusal.Reason == RefusedPerResponse
}

// Slot is the task call whose place the card takes: its item's first
// call.
func (c *Card) Slot() string {
	if c.Continues != "" {
		return c.Continues
	}
	return c.TaskID
}

// hold makes a card the per-response limit refused wait for a later
// call (static/merge.js hold): queued from its refusal on.
func (c *Card) hold() {
	if c.Status != StatusFailed || c.Refusal == nil || c.Refusal.Reason != RefusedPerResponse {
		return
	}
	c.Status = StatusQueued
	if c.QueuedAt == nil {
		c.QueuedAt = c.EndedAt
	}
	c.EndedAt = nil
}

// continueWith makes a held card the card of taskID, the call that
// continues it (static/merge.js continueCard): its task from now on,
// still waiting since the first refusal.
func (c *Card) continueWith(taskID string) {
	if c.Continues == "" {
		c.Continues = c.TaskID
	}
	c.TaskID, c.ExecutionID, c.Status, c.Refusal = taskID, "", StatusQueued, nil
	c.Error, c.Result, c.StopReason, c.Activity, c.Waiting = "", "", "", "", false
	c.Version, c.Steps, c.StartedAt, c.EndedAt = 0, 0, nil, nil
}

// failUnfinished ends a card whose run ended without its result: a held
// one was never started (refused when it was first held), any other
// failed (static/merge.js failUnfinished).
func (c *Card) failUnfinished() {
	c.Activity, c.Waiting = "", false
	if c.Held() {
		c.Status, c.EndedAt, c.QueuedAt = StatusFailed, c.QueuedAt, nil
		return
	}
	c.Status, c.Error = StatusFailed, noResult
}

// apply folds one persisted event into the card, as a live frame would.
func (c *Card) apply(e *models.RunEvent) {
	ev, err := PayloadOf(e)
	if err != nil {
		return
	}
	if wc, ok := ev.(WorkspaceChanged); ok {
		c.applyChanges(wc.Changes)
		return
	}
	te, ok := ev.(taskEvent)
	if !ok {
		return
	}
	ref := te.task()
	if ref.Version <= c.Version {
		return // stale or repeated: the card already has something newer
	}
	c.Version, c.LastSeq = ref.Version, max(c.LastSeq, e.Seq)
	if ref.ExecutionID != "" {
		c.ExecutionID = ref.ExecutionID
	}
	if mn := strings.TrimSpace(te.model()); mn != "" {
		c.ModelName = mn
	}
	if u := te.usage(); u != nil && (c.Usage == nil || u.TotalTokens >= c.Usage.TotalTokens) {
		c.Usage = u
	}
	c.stamp(ev, e.CreatedAt)
	if c.Terminal() {
		return
	}
	// Only a wait event says the task waits; every newer event means its
	// call got a slot (or it has not made one yet, or it ended).
	c.Waiting = false
	switch p := ev.(type) {
	case TaskQueued:
		c.Status = StatusQueued
	case TaskStarted:
		c.Status = StatusRunning
	case TaskWait:
		c.Status, c.Waiting = StatusRunning, p.Waiting
	case TaskStep:
		c.Status = StatusRunning
		c.Steps = max(c.Steps, p.MessageIndex)
		c.Activity = ActivityText(p.StepBody)
	case TaskEnd:
		c.Status, c.Activity = p.Status, ""
		c.Result, c.Error, c.StopReason = p.Result, p.Error, p.StopReason
	}
}

// applyChanges keeps the files of changes its task wrote, at their
// latest size, and lets go of those it deleted; a change is not a step,
// so the card's version and status stay (static/merge.js
// applyFileChanges).
func (c *Card) applyChanges(changes []FileChange) {
	for _, ch := range changes {
		if ch.TaskID != c.TaskID {
			continue
		}
		i := slices.IndexFunc(c.Files, func(f CardFile) bool { return f.Path == ch.Path })
		switch {
		case ch.Deleted && i >= 0:
			c.Files = slices.Delete(c.Files, i, i+1)
		case ch.Deleted:
		case i >= 0:
			c.Files[i].Size = ch.Size
		default:
			c.Files = append(c.Files, CardFile{Path: ch.Path, Size: ch.Size})
		}
	}
}

// stamp keeps when the task was queued, started and ended, from the
// commit time of the event that said so (the first of each).
func (c *Card) stamp(ev Event, at time.Time) {
	if at.IsZero() {
		return
	}
	at = at.UTC()
	var slot **time.Time
	switch ev.(type) {
	case TaskQueued:
		slot = &c.QueuedAt
	case TaskStarted:
		slot = &c.StartedAt
	case TaskEnd:
		slot = &c.EndedAt
	default:
		return
	}
	if *slot == nil {
		*slot = &at
	}
}

// applyResult makes the ToolMessage the card's final word. Legacy and
// malformed metadata read tolerantly; text without metadata falls back to
// the content's prefix.
func (c *Card) applyResult(m *models.Message) {
	c.Activity, c.Waiting = "", false
	if c.EndedAt == nil && !m.CreatedAt.IsZero() {
		at := m.CreatedAt.UTC()
		c.EndedAt = &at
	}
	var kw map[string]any
	if len(m.AdditionalKwargs) > 0 {
		kw, _ = DecodeContent(m.AdditionalKwargs)
	}
	md, ok := readMetadata(kw)
	if !ok {
		status, known := legacyStatus(m.Content)
		if !known {
			// A legacy result with no recognisable shape: it did return.
			c.Status, c.Result = StatusCompleted, m.Content
			return
		}
		md = taskMetadata{Status: status}
	}
	c.Status = md.Status
	c.StopReason = md.StopReason
	c.Refusal = md.Refusal
	if md.ModelName != "" {
		c.ModelName = md.ModelName
	}
	if md.Usage != nil {
		c.Usage = md.Usage
	}
	switch {
	case md.Status == StatusCompleted:
		c.Result, c.Error = TaskResultText(m.Content), ""
		if c.Result == "" {
			c.Result = md.ResultBrief
		}
	case md.Status == StatusPollingTimedOut:
		c.Error = strings.TrimSpace(m.Content)
	default:
		c.Result = ""
		c.Error, _ = textAfterPhrase(m.Content, md.Status)
		if c.Error == "" {
			c.Error = md.Error
		}
		if c.Refusal == nil && c.Status == StatusFailed {
			c.Refusal = legacyRefusal(c.Error)
		}
	}
}

// TaskResultText is the full result in a completed task's ToolMessage
// content (the metadata holds a bounded brief of it), or "" for any other
// outcome: what follows the head the contract writes
// (contracts/tool_message_contract.json), not a search for a marker.
func TaskResultText(content string) string {
	r, _ := textAfterPhrase(content, StatusCompleted)
	return r
}

// LeadWaiting reports whether the lead of run runID waits for a slot of
// its model (max_concurrent_requests): its latest run.wait among events
// says so. The page shows it beside the composer.
func LeadWaiting(events []models.RunEvent, runID string) bool {
	waiting := false
	for i := range events {
		e := &events[i]
		if e.RunID != runID || e.EventType != eventRunWait {
			continue
		}
		if ev, err := PayloadOf(e); err == nil {
			waiting = ev.(RunWait).Waiting
		}
	}
	return waiting
}
