package views

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
)

// taskTool is the lead's delegation tool. Its calls become subagent cards
// rather than compact tool rows; views keeps its own copy of the name so
// that it depends on nothing but its view models.
const taskTool = "task"

// threadPath is the URL of a thread, or of one of its actions when the
// suffix is set ("/rename", "/delete").
func threadPath(id, suffix string) string {
	return "/threads/" + url.PathEscape(id) + suffix
}

func tokenDeletePath(id string) string {
	return "/settings/tokens/" + url.PathEscape(id) + "/delete"
}

func sessionDeletePath(id string) string {
	return "/account/sessions/" + url.PathEscape(id) + "/delete"
}

// browserName is a short name for a User-Agent, for the sessions list.
func browserName(ua string) string {
	for _, b := range []struct{ mark, name string }{
		{"Edg/", "Edge"}, {"OPR/", "Opera"}, {"Firefox/", "Firefox"}, {"Chrome/", "Chrome"}, {"Safari/", "Safari"}, {"curl/", "curl"},
	} {
		if strings.Contains(ua, b.mark) {
			return b.name + platformName(ua)
		}
	}
	if ua == "" {
		return "Unknown browser"
	}
	if len(ua) > 40 {
		return strings.ToValidUTF8(ua[:40], "") + "…"
	}
	return ua
}

func platformName(ua string) string {
	for _, p := range []struct{ mark, name string }{
		{"Android", "Android"}, {"iPhone", "iPhone"}, {"iPad", "iPad"}, {"Windows", "Windows"}, {"Mac OS X", "macOS"}, {"CrOS", "ChromeOS"}, {"Linux", "Linux"},
	} {
		if strings.Contains(ua, p.mark) {
			return " on " + p.name
		}
	}
	return ""
}

func userPath(id, suffix string) string {
	return "/admin/users/" + url.PathEscape(id) + suffix
}

// signInText lists a user's ways in ("password, Acme SSO"); "nothing"
// for a user who has none (a provider account unlinked from a user
// without a password cannot happen, but a store edited by hand can).
func signInText(ways []string) string {
	if len(ways) == 0 {
		return "nothing"
	}
	return strings.Join(ways, ", ")
}

// modelLabel names a model in pickers; demo models say so, since nothing
// may pretend to be a real LLM (docs/DESIGN.md §12).
func modelLabel(m ModelOption) string {
	label := m.Label
	if label == "" {
		label = m.Name
	}
	if m.Provider == "demo" {
		label += " (demo)"
	}
	return label
}

func threadTitle(t ThreadItem) string {
	if t.Title == "" {
		return "Untitled thread"
	}
	return t.Title
}

func pageTitle(p Page) string {
	if p.Title == "" {
		return "herd"
	}
	return p.Title + " · herd"
}

// humanTime is a short, unambiguous date for lists; the full instant is in
// the <time datetime> attribute.
func humanTime(t time.Time) string {
	return t.Format("2 Jan 2006, 15:04")
}

func machineTime(t time.Time) string {
	return t.Format(time.RFC3339)
}

// threadMessages nests each tool message under the call that asked for it,
// as static/messages.js does with live messages. Provider tool-call ids may repeat
// across runs, so a result belongs to the latest call with its id. Tool
// messages with no compact call to sit under are dropped: task results
// belong to their cards.
func threadMessages(msgs []MessageView) []MessageView {
	type at struct{ msg, call int }
	out := make([]MessageView, 0, len(msgs))
	latest := map[string]at{}
	for _, m := range msgs {
		if m.Type == "tool" {
			if a, ok := latest[m.ToolCallID]; ok {
				result := m
				out[a.msg].ToolCalls[a.call].result = &result
			}
			continue
		}
		// A copy, so rendering never writes into the handler's slices.
		m.ToolCalls = slices.Clone(m.ToolCalls)
		for i, c := range m.ToolCalls {
			if c.Name == taskTool {
				delete(latest, c.ID)
			} else {
				latest[c.ID] = at{len(out), i}
			}
		}
		out = append(out, m)
	}
	return out
}

// errorHeading is the error's message, or a plain phrase for its status.
func errorHeading(p ErrorPage) string {
	switch {
	case p.Message != "":
		return p.Message
	case p.Status == 404:
		return "Not found"
	case p.Status == 403:
		return "You don't have access to this page"
	default:
		return "Something went wrong"
	}
}

// searchResults says how many threads a title search found.
func searchResults(n int, q string) string {
	switch n {
	case 0:
		return "No thread title contains “" + q + "”."
	case 1:
		return "1 thread title contains “" + q + "”."
	}
	return strconv.Itoa(n) + " thread titles contain “" + q + "”."
}

// rawName is a tool call's raw name as the title of its label, when
// the label differs (agent.ToolLabel).
func rawName(c ToolCallView) templ.Attributes {
	if c.Label == "" || c.Label == c.Name {
		return nil
	}
	return templ.Attributes{"title": c.Name}
}

// retryLabel is the button that answers a run's message again: Retry
// after a failure or a Stop, Regenerate after an answer.
// versionIndex is where runID is among the versions ids (0 if absent).
func versionIndex(runID string, ids []string) int {
	return max(slices.Index(ids, runID), 0)
}

// versionAt is the version at i, "" out of range.
func versionAt(ids []string, i int) string {
	if i < 0 || i >= len(ids) {
		return ""
	}
	return ids[i]
}

func retryLabel(status string) string {
	if status == "completed" {
		return "Regenerate"
	}
	return "Retry"
}

// FileSize writes a file's size as the composer's chips and the
// message's do (static/format.js fileSize): bytes below 1 KiB, else KB or
// MB in tenths rounded half up (1 KB = 1024 bytes), the unit chosen after
// rounding.
func FileSize(n int64) string {
	const kib, mib = 1024, 1024 * 1024
	if n < kib {
		return strconv.FormatInt(n, 10) + " B"
	}
	if t := (n*10 + kib/2) / kib; t < 10*kib {
		return tenthsText(t) + " KB"
	}
	return tenthsText((n*10+mib/2)/mib) + " MB"
}

func tenthsText(t int64) string {
	return strconv.FormatInt(t/10, 10) + "." + strconv.FormatInt(t%10, 10)
}

// fileURL is where the thread's files route serves path: each segment
// escaped, the slashes kept (static/messages.js fileURL).
func fileURL(threadID, path string) templ.SafeURL {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return templ.SafeURL("/api/threads/" + url.PathEscape(threadID) + "/files/" + strings.Join(segs, "/"))
}

// baseName is the last segment of a workspace path: what a chip shows.
func baseName(path string) string {
	return path[strings.LastIndexByte(path, '/')+1:]
}

// isImage reports whether a chip's file opens in the browser as an image
// (server/files.go previewable), not as a download.
func isImage(typ string) bool {
	switch typ {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// tableNote says what a CSV preview's table leaves out: its rows past
// the first, its columns past the first; "" when it shows the whole file.
func tableNote(t *PreviewTable) string {
	var parts []string
	if len(t.Rows) < t.Total || t.AtLeast {
		of := "of "
		if t.AtLeast {
			of = "of at least "
		}
		parts = append(parts, "first "+strconv.Itoa(len(t.Rows))+" "+of+strconv.Itoa(t.Total)+" rows")
	}
	shown := len(t.Header)
	for _, r := range t.Rows {
		shown = max(shown, len(r))
	}
	if shown < t.Columns {
		parts = append(parts, "first "+strconv.Itoa(shown)+" of "+strconv.Itoa(t.Columns)+" columns")
	}
	if len(parts) == 0 {
		return ""
	}
	s := strings.Join(parts, ", ")
	return strings.ToUpper(s[:1]) + s[1:]
}

// auditSummary names an audit entry's disclosure of its fields.
func auditSummary(cs []AuditChange) string {
	if len(cs) == 1 {
		return "Show the field before and after"
	}
	return "Show all " + strconv.Itoa(len(cs)) + " fields before and after"
}

// auditSide is one side of a changed field in words: none for a field
// that side lacks.
func auditSide(v string) string {
	if v == "" {
		return "none"
	}
	return v
}

// auditInline is how many changed fields an audit entry's row names; the
// rest are counted, and all are in its disclosure.
const auditInline = 3

// auditShown are the changed fields an audit entry's row names.
func auditShown(cs []AuditChange) []AuditChange {
	var out []AuditChange
	for _, c := range cs {
		if c.Changed && len(out) < auditInline {
			out = append(out, c)
		}
	}
	return out
}

// auditMore is how many changed fields an audit entry's row leaves out.
func auditMore(cs []AuditChange) int {
	n := 0
	for _, c := range cs {
		if c.Changed {
			n++
		}
	}
	return max(0, n-auditInline)
}
