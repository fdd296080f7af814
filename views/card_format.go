package views

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Card formatting. static/format.js formats live updates with the same rules;
// contracts/card_format_contract.json holds the examples both are tested
// against, and TestBrowserCardContract also compares format.js with
// TokenLabel itself.

// TokenLabel formats a token count: "1,234 tokens" below ten thousand,
// "12.3K tokens" below a million, "1.2M tokens" above. Tenths are rounded
// half up in integers, and the unit is chosen after rounding (999,950 is
// "1.0M", not "1000.0K"), so Go and format.js agree to the digit. Without
// usage it says "collecting…" while the card is live and "usage
// unavailable" once it is terminal — never 0.
func TokenLabel(total *int64, terminal bool) string {
	switch {
	case total == nil && terminal:
		return "usage unavailable"
	case total == nil:
		return "collecting…"
	}
	n := *total
	if n < 10_000 {
		return groupThousands(n) + " tokens"
	}
	if k := (n + 50) / 100; k < 10_000 {
		return tenths(k) + "K tokens"
	}
	return tenths((n+50_000)/100_000) + "M tokens"
}

// tenths writes a count of tenths as "12.3".
func tenths(t int64) string {
	return strconv.FormatInt(t/10, 10) + "." + strconv.FormatInt(t%10, 10)
}

func groupThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	pre := len(s) % 3
	if pre > 0 {
		b.WriteString(s[:pre])
	}
	for i := pre; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// WaitingText is the status of a running card whose model call waits for
// a slot of its model (max_concurrent_requests).
const WaitingText = "Waiting for a slot"

// StatusText is the card's one-line status.
func StatusText(status, activity string, waiting bool) string {
	switch status {
	case "queued":
		return "Queued"
	case "running":
		if waiting {
			return WaitingText
		}
		if activity != "" {
			return activity
		}
		return "Thinking"
	case "completed":
		return "Completed"
	case "failed":
		return "Failed"
	case "cancelled":
		return "Cancelled"
	case "timed_out", "polling_timed_out":
		return "Timed out"
	}
	return "Running"
}

// NotStartedText is the status of a card whose task a limit refused
// before it started, from its refusal's reason and limit (the
// ToolMessage's subagent_refusal), such as "Not started · limit of 4 per
// response"; "" for any other reason.
func NotStartedText(reason string, limit int64) string {
	switch reason {
	case "max_concurrent_per_response":
		return "Not started · limit of " + i64(limit) + " per response"
	case "max_total_per_run":
		return "Not started · limit of " + i64(limit) + " per run"
	}
	return ""
}

// notStarted is the status of card c if a limit refused it, else "".
func notStarted(c CardView) string {
	if c.Status != "failed" {
		return ""
	}
	return NotStartedText(c.RefusalReason, c.RefusalLimit)
}

// HeldText is the status of a card the per-response limit refused while
// its run may still call it again (agent.Card.Held), such as "Waiting: at
// most 4 start per response"; "" for any other reason.
func HeldText(reason string, limit int64) string {
	if reason != "max_concurrent_per_response" {
		return ""
	}
	return "Waiting: at most " + i64(limit) + " start per response"
}

// held reports whether card c waits for a later call of its task.
func held(c CardView) bool {
	return c.Status == "queued" && HeldText(c.RefusalReason, c.RefusalLimit) != ""
}

// refusalLimitAttr is the limit of a refused card for the script; "" for
// a card no limit refused.
func refusalLimitAttr(c CardView) string {
	if c.RefusalReason == "" {
		return ""
	}
	return i64(c.RefusalLimit)
}

// cardStatus is the status line of card c.
func cardStatus(c CardView) string {
	if t := notStarted(c); t != "" {
		return t
	}
	if held(c) {
		return HeldText(c.RefusalReason, c.RefusalLimit)
	}
	return StatusText(c.Status, c.Activity, c.Waiting)
}

// StopLabel is the badge of a stop reason.
func StopLabel(reason string) string {
	switch reason {
	case "token_capped":
		return "capped: token budget"
	case "turn_capped":
		return "capped: turn budget"
	case "loop_capped":
		return "capped: repeated tool-call loop"
	case "budget":
		return "capped: budget used up"
	}
	return ""
}

// IsTerminalStatus reports whether a card status is final.
func IsTerminalStatus(s string) bool {
	switch s {
	case "completed", "failed", "cancelled", "timed_out", "polling_timed_out":
		return true
	}
	return false
}

func cardDOMID(c CardView) string { return "card-" + c.RunID + "-" + c.TaskID }

func cardTitle(c CardView) string {
	if strings.TrimSpace(c.Description) == "" {
		return "Subagent task"
	}
	return c.Description
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }

func boolAttr(b bool) string {
	if b {
		return "1"
	}
	return ""
}

func totalAttr(t *int64) string {
	if t == nil {
		return ""
	}
	return strconv.FormatInt(*t, 10)
}

// TokenCount is an exact count with thousands separators.
func TokenCount(n int64) string { return groupThousands(n) }

// notReported names the calls whose provider reported no usage: "not
// reported for 2 calls"; "" when every call reported.
func notReported(n int64) string {
	switch {
	case n <= 0:
		return ""
	case n == 1:
		return "not reported for 1 call"
	}
	return "not reported for " + groupThousands(n) + " calls"
}

// cutByRestart names the calls a restart or a lost instance cut, whose
// usage can never be known: "2 calls cut by a restart: usage not
// reported"; "" when there are none.
func cutByRestart(n int64) string {
	switch {
	case n <= 0:
		return ""
	case n == 1:
		return "1 call cut by a restart: usage not reported"
	}
	return groupThousands(n) + " calls cut by a restart: usage not reported"
}

// unreportedNote names every call of t without usage, each kind apart:
// those cut by a restart, and the others whose provider reported none.
func unreportedNote(t UsageTotals) string {
	return joinNotes(notReported(t.Unreported-t.Lost), cutByRestart(t.Lost))
}

func joinNotes(a, b string) string {
	if a != "" && b != "" {
		return a + "; " + b
	}
	return a + b
}

// noneReported reports whether t has calls and none of them reported
// usage: its tokens are unknown, not 0.
func noneReported(t UsageTotals) bool { return t.Calls > 0 && t.Unreported == t.Calls }

// usageFigure is a line of the usage panel: its total tokens, "not
// reported" when none of its calls reported usage (static/usage-panel.js,
// figure).
func usageFigure(u UsageView, t UsageTotals) string {
	switch {
	case u.Blank:
		return ""
	case noneReported(t):
		return "not reported"
	}
	return TokenCount(t.Total)
}

// replacedNote names, beside the total, the tokens of the answers later
// runs replaced, which the total leaves out; "" when there are none
// (static/usage-panel.js, replacedNote).
func replacedNote(u UsageView) string {
	switch {
	case u.Blank || u.Replaced.Calls == 0:
		return ""
	case noneReported(u.Replaced):
		return "+ replaced answers, not reported"
	}
	return "+" + TokenCount(u.Replaced.Total) + " in replaced answers"
}

// usageNote is what the usage panel says beside a line's figure about
// its calls without usage (contracts/card_format_contract.json,
// usage_notes; static/usage-panel.js, usageNote): every such call when
// some others reported; when none did, the figure already says "not
// reported", and only the calls a restart cut are named.
func usageNote(t UsageTotals) string {
	if noneReported(t) {
		return cutByRestart(t.Lost)
	}
	return unreportedNote(t)
}

// Duration writes a span: "<1s", "42s", "3m 05s", "1h 02m"; "" for a
// negative one. A card's elapsed and total time, a step's time and the
// run timeline use it, as static/format.js's duration does.
func Duration(d time.Duration) string {
	switch {
	case d < 0:
		return ""
	case d < time.Second:
		return "<1s"
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return strconv.FormatInt(s, 10) + "s"
	case s < 3600:
		return fmt.Sprintf("%dm %02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh %02dm", s/3600, s/60%60)
}

// cardTime is a card's time in its header: the total once it ended, the
// time so far while it is queued or running (static/card-view.js ticks
// it on), "" before it was queued or started.
func cardTime(c CardView) string {
	from := c.StartedAt
	if from == nil {
		from = c.QueuedAt
	}
	switch {
	case from == nil:
		return ""
	case c.EndedAt != nil:
		return Duration(c.EndedAt.Sub(*from))
	case IsTerminalStatus(c.Status) || c.Now.IsZero():
		return ""
	}
	return Duration(c.Now.Sub(*from))
}

// instant is a time as the scripts read it: UTC to the millisecond, ""
// for none.
func instant(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// FilesCount is a collapsed card's count of the files its subagent wrote
// ("" for none): static/card-view.js filesCount writes the same.
func FilesCount(n int) string {
	switch n {
	case 0:
		return ""
	case 1:
		return "1 file"
	}
	return strconv.Itoa(n) + " files"
}
