package agent

import "herd/models"

// Replaced says what later runs of a thread replaced (docs/DESIGN.md §3):
// Retry and Regenerate (Run.RetryOf) replace a run's answer, its message
// stays; Edit (Run.EditOf) replaces the run of the edited message whole,
// and every run after it. Nothing is deleted: the lead's prompt leaves
// replaced messages out, and the thread hides them, except a failed or
// stopped answer a Retry replaced, which stays as history above the new
// one.
type Replaced struct {
	answer, whole map[string]bool
	status        map[string]string
	latest        string
}

// ReplacedIn reads a thread's runs, oldest first (models.Store.Runs).
func ReplacedIn(runs []models.Run) Replaced {
	rp := Replaced{answer: map[string]bool{}, whole: map[string]bool{}, status: map[string]string{}}
	for i, r := range runs {
		rp.status[r.ID] = r.Status
		rp.latest = r.ID
		if r.RetryOf != "" {
			rp.answer[r.RetryOf] = true
		}
		if r.EditOf == "" {
			continue
		}
		for j := i - 1; j >= 0; j-- {
			rp.whole[runs[j].ID] = true
			if runs[j].ID == r.EditOf {
				break
			}
		}
	}
	return rp
}

// Latest is the id of the thread's latest run, "" before its first.
func (rp Replaced) Latest() string { return rp.latest }

// Whole reports whether run runID was replaced whole (its message edited).
func (rp Replaced) Whole(runID string) bool { return rp.whole[runID] }

// FromPrompt reports whether m is left out of the lead's prompt.
func (rp Replaced) FromPrompt(m *models.Message) bool {
	return rp.whole[m.RunID] || (rp.answer[m.RunID] && m.Type != TypeHuman)
}

// FromThread reports whether the thread hides m.
func (rp Replaced) FromThread(m *models.Message) bool {
	return rp.FromPrompt(m) && (m.Type == TypeHuman || rp.AnswerHidden(m.RunID))
}

// AnswerHidden reports whether the thread hides run runID's answer and
// its end: it was replaced whole, or it completed and was regenerated.
func (rp Replaced) AnswerHidden(runID string) bool {
	return rp.whole[runID] || (rp.answer[runID] && rp.status[runID] == models.RunCompleted)
}

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
