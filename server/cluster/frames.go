package cluster

import (
	"encoding/json"
	"sync"
	"time"

	"herd/agent"
	"herd/agent/event"
)

// Ephemeral frames (event.Frame) go to this instance's clients as on one
// process and to the other instances in notices of kind kindFrame, the
// frame's type and JSON, so a page on any instance shows them
// (Cluster.Publish). A receiver decodes them through the same closed set
// and refuses any other type (Cluster.handle). Streamed text goes in as
// many notices as it needs, progress is cut, log lines are split; the
// data of every other frame is bounded by construction (a title, a
// ledger row), well under what a notice may carry
// (TestClusterFramesFitANotice).

// announceFrame sends an ephemeral frame to the other instances, in
// notices that fit.
func (c *Cluster) announceFrame(threadID, runID string, f event.Frame) {
	one := func(f event.Frame) { c.announce(notice{Kind: kindFrame, Thread: threadID, Run: runID, frame: f}) }
	switch f := f.(type) {
	case event.Delta:
		for i, part := range splitUTF8(f.Text, maxNoticeText) {
			one(event.Delta{MessageID: f.MessageID, Text: part, Reset: f.Reset && i == 0})
		}
	case event.Reasoning:
		for _, part := range splitUTF8(f.Text, maxNoticeText) {
			one(event.Reasoning{MessageID: f.MessageID, Text: part})
		}
	case event.TaskProgress: // a status line: cut, not split
		one(event.TaskProgress{TaskID: f.TaskID, Text: cutUTF8(f.Text, maxNoticeText)})
	case event.ToolProgress:
		one(event.ToolProgress{CallID: f.CallID, Text: cutUTF8(f.Text, maxNoticeText)})
	case event.ToolLog:
		for _, lines := range splitLines(f.Lines) {
			one(event.ToolLog{Lines: lines, TaskID: f.TaskID, CallID: f.CallID})
		}
	default:
		one(f)
	}
}

// splitUTF8 cuts s into parts of at most n bytes, none splitting a
// character.
func splitUTF8(s string, n int) []string {
	var parts []string
	for s != "" {
		part := cutUTF8(s, n)
		s = s[len(part):]
		parts = append(parts, part)
	}
	return parts
}

// splitLines cuts log lines into runs that fit a notice each (the page
// appends a frame's lines to the call's); a line is at most 500 runes and
// its level 16 (agent.ToolLog), so one always fits.
func splitLines(lines []event.LogLine) [][]event.LogLine {
	const room = maxNoticeBytes - frameRoom
	var out [][]event.LogLine
	for len(lines) > 0 {
		k, size := 0, 0
		for k < len(lines) {
			b, _ := json.Marshal(lines[k])
			n := len(b) + 1
			if k > 0 && size+n > room {
				break
			}
			size += n
			k++
		}
		out = append(out, lines[:k])
		lines = lines[k:]
	}
	return out
}

// frameData encodes n's frame, if it has one, into its Type and Data, as
// the hub encodes frames (no HTML escaping), so the other instances send
// the very bytes this one does. Data that does not fit a notice is a bug
// (announceFrame bounds each kind's) and is logged, never sent cut.
func (c *Cluster) frameData(n *notice) bool {
	if n.frame == nil {
		return true
	}
	raw, err := event.Marshal(n.frame)
	if err != nil || len(raw) > maxNoticeBytes {
		c.log.Error("cluster: a frame that cannot go in a notice", "type", n.frame.FrameType(), "bytes", len(raw), "err", err)
		return false
	}
	n.Type, n.Data = n.frame.FrameType(), raw
	return true
}

// TitleCall tells the other instances that this one began or ended
// naming a thread (server's titler): pages of the thread rendered on other
// instances while the call is in flight ask for the title once their
// stream is open, as this instance's do (titler.isPending).
func (c *Cluster) TitleCall(threadID string, pending bool) {
	var p int64
	if pending {
		p = 1
	}
	c.announce(notice{Kind: kindTitle, Thread: threadID, Last: p})
}

// TitlePending reports whether another instance is naming the thread.
func (c *Cluster) TitlePending(threadID string) bool {
	return c.titles.pending(threadID, time.Now())
}

// remoteTitles are the threads other instances are naming, with when
// their call began.
type remoteTitles struct {
	mu    sync.Mutex
	m     map[string]time.Time
	swept time.Time // the last sweep of stale entries
}

// remoteTitleMax bounds how long a thread counts as being named: an
// instance that dies mid-call never says it ended. (A call waits for its
// run's end on a model with max_concurrent_requests, so this is long;
// the only cost of a stale entry is one read of the title by a page.)
const remoteTitleMax = 15 * time.Minute

func (r *remoteTitles) set(threadID string, pending bool, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !pending {
		delete(r.m, threadID)
		return
	}
	if r.m == nil {
		r.m = map[string]time.Time{}
	}
	// A sweep at most once a minute, so that a map of live entries is not
	// scanned on every call.
	if len(r.m) >= 1024 && now.Sub(r.swept) > time.Minute {
		r.swept = now
		for id, at := range r.m {
			if now.Sub(at) > remoteTitleMax {
				delete(r.m, id)
			}
		}
	}
	r.m[threadID] = now
}

func (r *remoteTitles) pending(threadID string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.m[threadID]
	return ok && now.Sub(at) <= remoteTitleMax
}

var _ agent.Publisher = (*Cluster)(nil)
