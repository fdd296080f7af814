package agent

import (
	"fmt"
	"strings"
)

// The gap of a resumed run in words (docs/DESIGN.md §9): the card's
// resumed step and the thread's notice of a run.resumed say how long the
// work was gone. static/format.js (lostTime, resumedNotice) writes the
// same words live; the examples both are tested against are in
// contracts/card_format_contract.json ("lost_times", "resumed").

// ContinueNote follows the text of an answer a restart cut off, in the
// call that continues it (run.converse): the model writes the rest, and
// the saved answer is the text so far followed by what it writes.
// CutNotice is the notice of a run whose answer stopped at the model's
// output limit.
const CutNotice = "The answer stopped at the model's output limit. Continue goes on from there."

const ContinueNote = "[herd] Your reply above was cut off by a server restart. Continue it from exactly where it stops: do not repeat any of it and do not mention the interruption."

// LostTime is a gap in words: "4.2 s" (tenths, rounded half up) under a
// minute, then "1 min 5 s", then "2 h 3 min".
func LostTime(ms int64) string {
	ms = max(ms, 0)
	if t := (ms + 50) / 100; t < 600 {
		return fmt.Sprintf("%d.%d s", t/10, t%10)
	}
	s := (ms + 500) / 1000
	if s < 3600 {
		return fmt.Sprintf("%d min %d s", s/60, s%60)
	}
	m := (s + 30) / 60
	return fmt.Sprintf("%d h %d min", m/60, m%60)
}

// ResumedStepText is the text of a card's resumed step: "Resumed after a
// restart (lost 4.2 s)", or "Resumed on another instance (lost 4.2 s)"
// after a failover.
func ResumedStepText(cause string, lostMS int64) string {
	where := "after a restart"
	if cause == ResumeFailover {
		where = "on another instance"
	}
	return "Resumed " + where + " (lost " + LostTime(lostMS) + ")"
}

// ResumedNotice is what the thread shows where a run resumed: "Resumed
// after a restart — 4.2 s lost", or "Continued on another instance — 4.2 s
// lost" after a failover.
func ResumedNotice(e RunResumed) string {
	what := "Resumed after a restart"
	if e.Cause == ResumeFailover {
		what = "Continued on another instance"
	}
	return what + " — " + LostTime(e.LostMS) + " lost"
}

// resumedActivity is a running card's status line after a resumed step:
// the step's own words, bounded like a command.
func resumedActivity(s StepBody) string {
	if text := strings.TrimSpace(s.Text); text != "" {
		return head(text)
	}
	return "Resumed"
}
