// Package titles names threads: at once from the first message (From),
// then by one short call of the run's model (Titler), whose answer
// replaces that first title unless the owner renamed the thread
// meanwhile. It owns the calls in flight; the store, the pages and the
// other instances are reached through the interfaces declared here.
package titles

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"herd/agent"
	"herd/agent/event"
	"herd/models"
)

// titleRunes is how long a title made from a message may be.
const titleRunes = 60

// From makes a thread's title from its first message: the first line
// with words, without Markdown's markers (headings, list bullets,
// emphasis, code ticks) or a trailing colon, cut at a word boundary.
// "Four jobs:\n- alpha" is "Four jobs"; a message of only symbols gives "".
func From(content string) string {
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

// Titler names threads with their model: after a thread's first message
// is accepted (its run started, its title the one From gave it), one
// short call of the run's model (agent.Runtime.Title) proposes a better
// title beside the run. A clean answer replaces the first title unless
// the owner renamed the thread meanwhile; open pages of the thread get it
// at once (event.Renamed), on every instance. Any failure keeps the
// first title. The calls are the Titler's goroutines, which Close cancels
// and waits for.
type Titler struct {
	model Model
	store Store
	pages Pages
	// others, with several instances, hears of the calls in flight
	// elsewhere and tells them of this one's; nil on one.
	others Others
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

// Model answers a title call: agent.Runtime.
type Model interface {
	Title(ctx context.Context, req agent.TitleRequest) (agent.TitleAnswer, error)
}

// Store keeps a model's title unless the thread's title is no longer
// from: models.Store.
type Store interface {
	RetitleThread(ctx context.Context, userID, id, from, to string) (bool, error)
}

// Pages are a thread's open pages, on every instance: they count the
// title call's usage (event.TitleUsage) and show the new title
// (event.Renamed).
type Pages interface {
	Publish(threadID, runID string, f event.Frame)
}

// Others are the other instances: they hear of this one's title calls in
// flight and answer for theirs.
type Others interface {
	TitleCall(threadID string, pending bool)
	TitlePending(threadID string) bool
}

// New returns a Titler calling model; others is nil on one instance.
func New(model Model, store Store, pages Pages, others Others, log *slog.Logger) *Titler {
	ctx, cancel := context.WithCancel(context.Background())
	return &Titler{model: model, store: store, pages: pages, others: others, log: log, ctx: ctx, cancel: cancel, pending: map[string]bool{}}
}

// Start asks for thread t's title from its first message, which From
// turned into first ("" when it gave none).
func (ti *Titler) Start(t *models.Thread, started agent.Started, content, first string) {
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

func (ti *Titler) done(threadID string) {
	ti.mu.Lock()
	delete(ti.pending, threadID)
	ti.mu.Unlock()
	if ti.others != nil {
		ti.others.TitleCall(threadID, false)
	}
}

// Pending reports whether thread id's title call is in flight, here or
// on another instance.
func (ti *Titler) Pending(id string) bool {
	ti.mu.Lock()
	here := ti.pending[id]
	ti.mu.Unlock()
	return here || (ti.others != nil && ti.others.TitlePending(id))
}

func (ti *Titler) title(t *models.Thread, started agent.Started, content, first string) {
	answer, err := ti.model.Title(ti.ctx, agent.TitleRequest{ThreadID: t.ID, UserID: t.UserID, Model: started.ModelName, Content: content})
	switch {
	case errors.Is(err, agent.ErrNoTitleCall):
		return
	case err != nil:
		ti.log.Warn("the model did not title the thread; it keeps the title of its first message", "thread", t.ID, "err", err)
		return
	}
	// The call is in the ledger, its title used or not: open pages count
	// it now. Sent while the call is still pending (Pending), so a page
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

// Wait waits for the title calls in flight to end, without cancelling
// them: tests read their outcome after it.
func (ti *Titler) Wait() { ti.wg.Wait() }

// Close cancels the title calls in flight and waits for them.
func (ti *Titler) Close() {
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
	line := From(raw)
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
