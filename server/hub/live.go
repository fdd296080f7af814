package hub

import (
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"herd/agent"
	"herd/models"
	"herd/server/render"
)

// FrameAIHTML carries an answer being written, rendered and sanitized by
// the server like a saved message, so the page shows Markdown as it
// arrives and the saved message replaces it without a jump (docs/API.md,
// docs/DESIGN.md "Rendering").
const FrameAIHTML = "ai_html"

// Live rendering is throttled: an answer is rendered again at most every
// liveMinGap, and never sooner than liveCostFactor times its last render
// took, so rendering a growing answer costs at most about a sixth of a
// core however fast tokens arrive, and a long answer is rendered less
// often rather than slower (BenchmarkLiveRender, docs/PERFORMANCE.md).
const (
	liveMinGap     = 100 * time.Millisecond
	liveCostFactor = 5
	// A frame carries the whole HTML, not a diff, first, for a client that
	// has just subscribed, and then once the diffs since the last whole
	// frame add up to the HTML's size or liveFullAfter has passed: a
	// client that missed a frame (its queue overflowed) catches up, and
	// whole frames cost at most as many bytes as the diffs. Highlighted
	// code makes HTML several times the size of its text.
	liveFullAfter = 5 * time.Second
	// Bounds of what is held: answers past liveMaxBytes, or beyond
	// liveMaxAnswers at once, are not rendered live; their saved message
	// shows them rendered.
	liveMaxBytes   = 1 << 20
	liveMaxAnswers = 4096
)

// aiHTMLFrame is an ai_html frame's data: the answer's HTML is the HTML of
// the previous version's frame cut to its first Keep UTF-16 code units (a
// JavaScript string's length), followed by HTML. Keep 0 is a whole HTML.
type aiHTMLFrame struct {
	MessageID string `json:"message_id"`
	Version   int    `json:"version"`
	Keep      int    `json:"keep"`
	HTML      string `json:"html"`
}

// liveText renders the answers being written from their text so far, in
// one goroutine (run) that the hub owns: when rendering falls behind,
// deltas coalesce into fewer renders instead of queueing.
type liveText struct {
	md      *render.Markdown
	publish func(threadID string, f *frame)
	watched func(threadID string) bool
	now     func() time.Time
	wake    chan struct{}

	mu      sync.Mutex
	answers map[string]*liveAnswer // by message id
}

// liveAnswer is one answer being written.
type liveAnswer struct {
	threadID, runID string
	text            strings.Builder
	over            bool // past liveMaxBytes: no longer rendered
	dirty           bool // text arrived since the last render
	full            bool // the next frame carries the whole HTML
	due             time.Time
	sent            string // the HTML of the last frame
	version         int
	wholeAt         time.Time // when the last whole frame was sent
	diffBytes       int       // bytes of diffs sent since then
}

func newLiveText(md *render.Markdown, publish func(string, *frame), watched func(string) bool) *liveText {
	return &liveText{md: md, publish: publish, watched: watched, now: time.Now, wake: make(chan struct{}, 1), answers: map[string]*liveAnswer{}}
}

// append adds streamed text to an answer; reset replaces what it held
// (a resumed answer's text so far, which an instance that watched it
// before the restart holds already).
func (l *liveText) append(threadID, runID, messageID, text string, reset bool) {
	if messageID == "" || (text == "" && !reset) {
		return
	}
	l.mu.Lock()
	a := l.answers[messageID]
	if a == nil {
		if len(l.answers) >= liveMaxAnswers {
			l.mu.Unlock()
			return
		}
		a = &liveAnswer{threadID: threadID, runID: runID, full: true}
		l.answers[messageID] = a
	}
	if reset {
		a.text, a.over, a.full = strings.Builder{}, false, true
	}
	if !a.over {
		if a.text.Len()+len(text) > liveMaxBytes {
			a.over = true
			a.text = strings.Builder{} // never rendered again: let it go
		} else {
			a.text.WriteString(text)
			a.dirty = true
		}
	}
	l.mu.Unlock()
	l.signal()
}

func (l *liveText) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// committed forgets the answers whose message is saved (its frame shows
// it from now on) and those of runs that ended (a failure or a stop left
// them unsaved).
func (l *liveText) committed(recs []models.Record) {
	runEnd := agent.RunEnd{}.EventType()
	var done []string
	var ended []string
	for _, r := range recs {
		switch {
		case r.Message != nil && r.Message.Type == agent.TypeAI:
			done = append(done, r.Message.ID)
		case r.Event != nil && r.Event.EventType == runEnd:
			ended = append(ended, r.Event.RunID)
		}
	}
	if len(done) == 0 && len(ended) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range done {
		delete(l.answers, id)
	}
	for id, a := range l.answers {
		for _, run := range ended {
			if a.runID == run {
				delete(l.answers, id)
			}
		}
	}
}

// resend has the thread's answers sent whole on their next frame, at
// once: a client that has just subscribed shows them without waiting.
func (l *liveText) resend(threadID string) {
	l.mu.Lock()
	found := false
	for _, a := range l.answers {
		if a.threadID == threadID && !a.over {
			a.full, a.dirty, a.due = true, true, time.Time{}
			found = true
		}
	}
	l.mu.Unlock()
	if found {
		l.signal()
	}
}

// run renders due answers until closing is closed.
func (l *liveText) run(closing <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Stop()
		if wait := l.renderDue(); wait > 0 {
			timer.Reset(wait)
		}
		select {
		case <-closing:
			return
		case <-l.wake:
		case <-timer.C:
		}
	}
}

// liveJob is one render to do, taken under the lock.
type liveJob struct{ id, threadID string }

// renderDue renders every answer that is due and watched, and returns how
// long until the next one is due (0: none is waiting).
func (l *liveText) renderDue() time.Duration {
	now := l.now()
	var jobs []liveJob
	var next time.Duration
	l.mu.Lock()
	for id, a := range l.answers {
		switch {
		case !a.dirty || a.over:
		case a.due.After(now):
			if wait := a.due.Sub(now); next == 0 || wait < next {
				next = wait
			}
		default:
			jobs = append(jobs, liveJob{id: id, threadID: a.threadID})
		}
	}
	l.mu.Unlock()
	for _, j := range jobs {
		if l.watched(j.threadID) {
			l.render(j)
		}
	}
	return next
}

// render renders one answer's text so far and publishes its frame.
func (l *liveText) render(j liveJob) {
	l.mu.Lock()
	a := l.answers[j.id]
	if a == nil {
		l.mu.Unlock()
		return
	}
	text, sent, full := a.text.String(), a.sent, a.full
	a.dirty, a.full = false, false
	l.mu.Unlock()

	start := l.now()
	html := strings.ToValidUTF8(l.md.Render(text), "\uFFFD")
	took := l.now().Sub(start)

	l.mu.Lock()
	if l.answers[j.id] != a {
		l.mu.Unlock()
		return // saved or ended while it rendered
	}
	a.version++
	a.sent = html
	a.due = start.Add(max(liveMinGap, liveCostFactor*took))
	data := aiHTMLFrame{MessageID: j.id, Version: a.version, HTML: html}
	if full || a.diffBytes >= len(html) || start.Sub(a.wholeAt) >= liveFullAfter {
		a.wholeAt, a.diffBytes = start, 0
	} else {
		n, units := commonPrefix(sent, html)
		data.Keep, data.HTML = units, html[n:]
		a.diffBytes += len(data.HTML)
	}
	threadID, runID := a.threadID, a.runID
	l.mu.Unlock()
	l.publish(threadID, ephemeral(FrameAIHTML, threadID, runID, data))
}

// commonPrefix is the longest prefix of b that a shares, ending on a
// character boundary, in bytes and in UTF-16 code units (b is valid
// UTF-8).
func commonPrefix(a, b string) (n, units int) {
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	for n > 0 && n < len(b) && !utf8.RuneStart(b[n]) {
		n--
	}
	for _, r := range b[:n] {
		units += utf16.RuneLen(r)
	}
	return n, units
}
