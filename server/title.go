package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"herd/agent"
	"herd/agent/event"
	"herd/models"
)

// titleRunes is how long a title made from a message may be.
const titleRunes = 60

// titleFrom makes a thread's title from its first message: the first line
// with words, without Markdown's markers (headings, list bullets,
// emphasis, code ticks) or a trailing colon, cut at a word boundary.
// "Four jobs:\n- alpha" is "Four jobs"; a message of only symbols gives "".
func titleFrom(content string) string {
	for line := range strings.Lines(content) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~") {
			continue
		}
		line = strings.TrimLeft(line, "#>-*+ \t")
		line = strings.NewReplacer("`", "", "*", "", "__", "").Replace(line)
		line = strings.Join(strings.Fields(line), " ")
		line = strings.TrimRight(line, ":;,")
		if strings.IndexFunc(line, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) < 0 {
			continue
		}
		return cutWords(line, titleRunes)
	}
	return ""
}

// cutWords cuts s to at most n runes, at a space when there is one in
// the second half, with an ellipsis.
func cutWords(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	cut := string(r[:n-1])
	if r[n-1] != ' ' {
		if i := strings.LastIndexByte(cut, ' '); i > len(cut)/2 {
			cut = cut[:i]
		}
	}
	return strings.TrimRight(cut, " ,;:.") + "…"
}

// titler names threads with their model: after a thread's first message
// is accepted (its run started, its title the one titleFrom gave it), one
// short call of the run's model (agent.Runtime.Title) proposes a better
// title beside the run. A clean answer replaces the first title unless
// the owner renamed the thread meanwhile; open pages of the thread get it
// at once (FrameThreadRenamed), on every instance. Any failure keeps the
// first title. The calls are the titler's goroutines, which close cancels
// and waits for.
type titler struct {
	rt interface {
		Title(ctx context.Context, req agent.TitleRequest) (agent.TitleAnswer, error)
	}
	store *models.Store
	pages threadPages
	// others, with several instances, hears of the calls in flight
	// elsewhere and tells them of this one's; nil on one.
	others titleCalling
	log    *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
	// pending are the threads whose title call is in flight: their pages
	// may have been rendered before the title and opened their stream
	// after its frame, so they ask again once connected.
	pending map[string]bool
}

func newTitler(rt *agent.Runtime, store *models.Store, pages threadPages, others titleCalling, log *slog.Logger) *titler {
	ctx, cancel := context.WithCancel(context.Background())
	return &titler{rt: rt, store: store, pages: pages, others: others, log: log, ctx: ctx, cancel: cancel, pending: map[string]bool{}}
}

// start asks for thread t's title from its first message, which titleFrom
// turned into first ("" when it gave none).
func (ti *titler) start(t *models.Thread, started agent.Started, content, first string) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	if ti.closed {
		return
	}
	ti.pending[t.ID] = true
	if ti.others != nil {
		ti.others.TitleCall(t.ID, true)
	}
	ti.wg.Go(func() {
		defer ti.done(t.ID)
		ti.title(t, started, content, first)
	})
}

func (ti *titler) done(threadID string) {
	ti.mu.Lock()
	delete(ti.pending, threadID)
	ti.mu.Unlock()
	if ti.others != nil {
		ti.others.TitleCall(threadID, false)
	}
}

// isPending reports whether thread id's title call is in flight, here or
// on another instance.
func (ti *titler) isPending(id string) bool {
	ti.mu.Lock()
	here := ti.pending[id]
	ti.mu.Unlock()
	return here || (ti.others != nil && ti.others.TitlePending(id))
}

func (ti *titler) title(t *models.Thread, started agent.Started, content, first string) {
	answer, err := ti.rt.Title(ti.ctx, agent.TitleRequest{ThreadID: t.ID, Model: started.ModelName, Content: content})
	switch {
	case errors.Is(err, agent.ErrNoTitleCall):
		return
	case err != nil:
		ti.log.Warn("the model did not title the thread; it keeps the title of its first message", "thread", t.ID, "err", err)
		return
	}
	// The call is in the ledger, its title used or not: open pages count
	// it now. Sent while the call is still pending (isPending), so a page
	// rendered after done either counts it from the ledger or catches up.
	ti.pages.Publish(t.ID, "", event.TitleUsage{Call: answer.Call})
	title := cleanModelTitle(answer.Text)
	if title == "" || title == first {
		return
	}
	changed, err := ti.store.RetitleThread(ti.ctx, t.UserID, t.ID, first, title)
	if err != nil {
		ti.log.Warn("store a thread's title", "thread", t.ID, "err", err)
		return
	}
	if changed {
		ti.pages.Publish(t.ID, "", event.Renamed{Title: title})
	}
}

// close cancels the title calls in flight and waits for them.
func (ti *titler) close() {
	ti.mu.Lock()
	ti.closed = true
	ti.mu.Unlock()
	ti.cancel()
	ti.wg.Wait()
}

// cleanModelTitle makes a model's answer a title: its first line with
// words, without Markdown, quotes, a "Title:" label or a closing full
// stop, cut to titleRunes at a word. "" when nothing usable is left.
func cleanModelTitle(raw string) string {
	line := titleFrom(raw)
	if label, rest, ok := strings.Cut(line, ":"); ok && strings.EqualFold(strings.TrimSpace(label), "title") {
		line = strings.TrimSpace(rest)
	}
	line = strings.Trim(line, "\"'“”‘’«»„")
	line = strings.TrimRight(line, ".。 ")
	line = strings.Trim(line, "\"'“”‘’«»„ ")
	if strings.IndexFunc(line, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) < 0 {
		return ""
	}
	return cutWords(line, titleRunes)
}

// FrameThreadRenamed tells a thread's open pages its new title (docs/API.md):
// a model's title, or the owner's rename from another tab.
const FrameThreadRenamed = event.TypeRenamed

// FrameTitleUsage tells a thread's open pages the usage of the call that
// named the thread (docs/API.md): the thread's calls of no run, which the
// usage panel counts in its lead figure.
const FrameTitleUsage = event.TypeTitleUsage

// usageTitleFrame frames a title call's usage (event.TitleUsage) for a
// thread's live clients; under the token gate it says only that the
// call was made.
func usageTitleFrame(threadID string, call models.UsageEntry) *frame {
	var rep models.UsageReport
	call.Count(&rep)
	wire := func(u *models.UsageReport) []byte {
		return encodeWire(0, time.Time{}, FrameTitleUsage, threadID, "", map[string]*models.UsageReport{"usage": u})
	}
	return &frame{full: wire(&rep), redact: func() []byte { return wire(redaction{hide: true}.titleUsage(&rep)) }}
}

// titleThread titles an untitled thread whose first run has started: from
// its first message at once, then by its model (titler) when the model
// makes calls.
func (s *Server) titleThread(c echo.Context, t *models.Thread, started agent.Started, content string) {
	first := titleFrom(content)
	if first != "" {
		if _, err := s.store.RenameThread(c.Request().Context(), t.UserID, t.ID, first); err != nil {
			s.log.Warn("title a thread from its first message", "thread", t.ID, "err", err)
			return
		}
	}
	s.titles.start(t, started, content, first)
}
