package agent

import (
	"slices"
	"strings"
	"time"

	"herd/models"
)

// Replaced says what a thread shows of its runs (docs/DESIGN.md §3).
// Nothing is deleted: the runs form a tree, each following its parent
// (models.Run.ParentRun). A Regenerate (Retry of a completed run) and an
// Edit start a sibling of the run they replace: its versions. The thread
// shows one path from the first run down, at each step the version
// picked or started last (models.Run.PickedAt); the lead's prompt follows
// the same path. A failed or stopped run that a Retry answered again is
// no version: it stays as history above its retry. The runs not shown
// are hidden, but for the user's message of a Regenerate's first run,
// which its versions share.
type Replaced struct {
	shown    map[string]bool     // on the path, or history above it
	history  map[string]bool     // shown, but its answer is not in the prompt
	keep     map[string]bool     // not shown, but its user message is
	cut      map[string]bool     // shown, but its stopped answer goes on in a Continue
	versions map[string][]string // after a run (by its id; "" first): the versions it is followed by
	parent   map[string]string
	latest   string
}

// ReplacedIn reads a thread's runs, oldest first (models.Store.Runs).
func ReplacedIn(runs []models.Run) Replaced {
	rp := Replaced{shown: map[string]bool{}, history: map[string]bool{}, keep: map[string]bool{}, cut: map[string]bool{}, versions: map[string][]string{}}
	byID := make(map[string]*models.Run, len(runs))
	parent := make(map[string]string, len(runs))
	owner := make(map[string]string, len(runs)) // whose user message a run answers
	retried := map[string]bool{}                // failed or stopped runs answered again
	children := map[string][]string{}
	prev := ""
	for i := range runs {
		r := &runs[i]
		byID[r.ID] = r
		target := r.RetryOf
		if target == "" {
			target = r.EditOf
		}
		switch {
		case r.ParentRun != "":
			parent[r.ID] = r.ParentRun
		case target != "":
			parent[r.ID] = parent[target]
		default:
			// Before versions every run followed the one before it.
			parent[r.ID] = prev
		}
		owner[r.ID] = r.ID
		if r.RetryOf != "" {
			owner[r.ID] = owner[r.RetryOf]
			if t := byID[r.RetryOf]; t != nil && (r.Continues || t.Status != models.RunCompleted && t.Status != models.RunRunning) {
				retried[t.ID] = true
				if r.Continues {
					rp.cut[t.ID] = true
				}
			}
		}
		children[parent[r.ID]] = append(children[parent[r.ID]], r.ID)
		prev = r.ID
	}
	rp.parent = parent
	picked := func(id string) time.Time {
		r := byID[id]
		if r.PickedAt != nil && r.PickedAt.After(r.StartedAt) {
			return *r.PickedAt
		}
		return r.StartedAt
	}
	for at := ""; ; {
		var versions []string
		for _, id := range children[at] {
			if !retried[id] {
				versions = append(versions, id)
			}
		}
		if len(versions) == 0 {
			break
		}
		sel := versions[0]
		for _, id := range versions[1:] {
			if !picked(id).Before(picked(sel)) {
				sel = id
			}
		}
		rp.shown[sel] = true
		rp.versions[at] = versions
		// Failed attempts at the same message stay above the answer.
		for _, id := range children[at] {
			if retried[id] && owner[id] == owner[sel] {
				// A continued run's turns are the continuation's history.
				rp.shown[id], rp.history[id] = true, !rp.cut[id]
			}
		}
		if !rp.shown[owner[sel]] {
			rp.keep[owner[sel]] = true
		}
		rp.latest = sel
		at = sel
	}
	return rp
}

// Latest is the last run the thread shows, the one a Retry or Regenerate
// may answer again and a new message follows; "" before the first.
func (rp Replaced) Latest() string { return rp.latest }

// Parent is the run that run runID follows ("" for a first run): a
// Regenerate or an Edit of it follows the same one.
func (rp Replaced) Parent(runID string) string { return rp.parent[runID] }

// Shown reports whether the thread shows run runID, as a version on its
// path or as a failed attempt above one: an Edit may replace it.
func (rp Replaced) Shown(runID string) bool { return rp.shown[runID] }

// Versions lists the versions of run runID's answer, oldest first, when
// it has more than one (Regenerate, Edit) and the thread shows it.
func (rp Replaced) Versions(runID string) []string {
	if v := rp.versions[rp.parent[runID]]; len(v) > 1 && rp.shown[runID] && !rp.history[runID] {
		return v
	}
	return nil
}

// NextVersions is what the versions of the answer after run parent will
// be once run id, a Regenerate or Edit of a shown run or a Retry of
// run replaced, starts: a Retry takes its failed run's place, the others
// add one; nil while there is one.
func (rp Replaced) NextVersions(parent, replaced, id string, retry bool) []string {
	v := slices.Clone(rp.versions[parent])
	if i := slices.Index(v, replaced); retry && i >= 0 {
		v[i] = id
	} else {
		v = append(v, id)
	}
	if len(v) < 2 {
		return nil
	}
	return v
}

// Whole reports whether run runID is hidden with its message.
func (rp Replaced) Whole(runID string) bool { return !rp.shown[runID] && !rp.keep[runID] }

// FromPrompt reports whether m is left out of the lead's prompt.
func (rp Replaced) FromPrompt(m *models.Message) bool {
	if m.Type == TypeHuman {
		return rp.Whole(m.RunID)
	}
	return !rp.shown[m.RunID] || rp.history[m.RunID] || rp.cutAnswer(m)
}

// FromThread reports whether the thread hides m.
func (rp Replaced) FromThread(m *models.Message) bool {
	return rp.cutAnswer(m) || rp.FromPrompt(m) && (m.Type == TypeHuman || rp.AnswerHidden(m.RunID))
}

// cutAnswer reports whether m is the stopped answer a Continue goes on
// with: its text starts the continuing run's answer.
func (rp Replaced) cutAnswer(m *models.Message) bool {
	return rp.cut[m.RunID] && m.Type == TypeAI && !hasToolCalls(m)
}

// Continued reports whether a Continue went on with run runID's stopped
// answer: the thread shows no end of its own.
func (rp Replaced) Continued(runID string) bool { return rp.cut[runID] }

// hasToolCalls reports whether a stored AI message called tools.
func hasToolCalls(m *models.Message) bool {
	s := strings.TrimSpace(string(m.ToolCalls))
	return s != "" && s != "null" && s != "[]"
}

// AnswerHidden reports whether the thread hides run runID's answer and
// its end: it is not on the shown path, nor a failed attempt above it.
func (rp Replaced) AnswerHidden(runID string) bool { return !rp.shown[runID] }

// Prompt is msgs without what the lead's prompt leaves out.
func (rp Replaced) Prompt(msgs []models.Message) []models.Message {
	out := msgs[:0:0]
	for i := range msgs {
		if !rp.FromPrompt(&msgs[i]) {
			out = append(out, msgs[i])
		}
	}
	return out
}
