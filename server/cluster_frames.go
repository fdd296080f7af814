package server

import (
	"encoding/json"
	"sync"
	"time"

	"herd/agent"
	"herd/models"
)

// A thread's ephemeral frames beyond streamed text and card progress:
// a lead's tool call's progress and any call's log lines, the thread's
// new title and its title call's usage. Each goes to this instance's
// clients as on one process and to the other instances in a notice of
// kind kindFrame (its frame type and data), so a page on any instance
// shows them (docs/DESIGN.md §14). The data of each is bounded by
// construction (a title, a ledger row, one log line a notice), well
// under what a notice may carry (TestClusterFramesFitANotice).

// threadPages is where a thread's title frames and the settings' frames
// go: the local hub, or a Cluster that also tells the other instances.
// *Hub and *Cluster implement it.
type threadPages interface {
	Broadcaster
	TitleUsage(threadID string, call models.UsageEntry)
	Renamed(threadID, title string)
}

// titleCalling tells pages on every instance that a thread's title call is
// in flight (titler); *Cluster implements it.
type titleCalling interface {
	TitleCall(threadID string, pending bool)
	TitlePending(threadID string) bool
}

// ToolProgress implements agent.ToolPublisher.
func (c *Cluster) ToolProgress(threadID, runID, callID, text string) {
	c.o.Hub.ToolProgress(threadID, runID, callID, text)
	text = cutUTF8(text, maxNoticeText) // a status line
	c.announceFrame(FrameToolProgress, threadID, runID, map[string]string{"tool_call_id": callID, "text": text})
}

// ToolLog implements agent.ToolPublisher. The lines go to the other
// instances in as many notices as they need (the page appends a frame's
// lines to the call's); a line is at most 500 runes and its level 16
// (agent.ToolLog), so one always fits.
func (c *Cluster) ToolLog(threadID, runID, taskID, callID string, lines []agent.ToolLog) {
	c.o.Hub.ToolLog(threadID, runID, taskID, callID, lines)
	const room = maxNoticeBytes - 200 // the ids around the lines
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
		c.announceFrame(FrameToolLog, threadID, runID, map[string]any{"task_id": taskID, "tool_call_id": callID, "lines": lines[:k]})
		lines = lines[k:]
	}
}

// Renamed implements threadPages: the thread's pages on every instance
// show its new title.
func (c *Cluster) Renamed(threadID, title string) {
	c.o.Hub.Renamed(threadID, title)
	c.announceFrame(FrameThreadRenamed, threadID, "", map[string]string{"title": title})
}

// TitleUsage implements threadPages: the title call's usage reaches the
// thread's pages on every instance, each under its own token gate.
func (c *Cluster) TitleUsage(threadID string, call models.UsageEntry) {
	c.o.Hub.TitleUsage(threadID, call)
	c.announceFrame(FrameTitleUsage, threadID, "", call)
}

// clusterFrames are the frame types a kindFrame notice carries, and the
// only ones a receiver takes (Cluster.handle): the frame goes to its
// pages as it came.
var clusterFrames = map[string]bool{FrameToolProgress: true, FrameToolLog: true, FrameThreadRenamed: true, FrameTitleUsage: true}

// announceFrame sends a thread's ephemeral frame to the other instances.
// Data that does not fit a notice is a bug (each kind's is bounded) and
// is logged, never sent cut; so is a type the receivers would refuse.
func (c *Cluster) announceFrame(typ, threadID, runID string, data any) {
	// Encoded as the hub encodes frames (no HTML escaping), so the other
	// instances send the very bytes this one does.
	raw, err := marshalJSON(data)
	if err != nil || len(raw) > maxNoticeBytes || !clusterFrames[typ] {
		c.log.Error("cluster: a frame that cannot go in a notice (too long, or a type the others refuse)", "type", typ, "bytes", len(raw), "err", err)
		return
	}
	c.announce(notice{Kind: kindFrame, Thread: threadID, Run: runID, Type: typ, Data: raw})
}

// framed hands another instance's ephemeral frame to the local hub.
func (c *Cluster) framed(n notice) {
	h := c.o.Hub
	if n.Type != FrameTitleUsage {
		h.send(n.Type, n.Thread, n.Run, n.Data)
		return
	}
	// The usage is framed here, in both token-gate variants.
	var call models.UsageEntry
	if err := json.Unmarshal(n.Data, &call); err != nil {
		c.log.Warn("cluster: unreadable title usage", "thread", n.Thread, "err", err)
		return
	}
	h.TitleUsage(n.Thread, call)
}

// TitleCall implements titleCalling: pages of the thread rendered on other
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

var (
	_ agent.ToolPublisher     = (*Cluster)(nil)
	_ agent.ProgressPublisher = (*Cluster)(nil)
	_ threadPages             = (*Cluster)(nil)
	_ threadPages             = (*Hub)(nil)
)
