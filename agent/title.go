package agent

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"herd/models"
)

// Bounds of a title call: a short prompt, a short answer, and a few
// seconds, so a slow or failing model costs little and the thread keeps
// the title its first message gave it.
const (
	titleTimeout     = 6 * time.Second
	titleMaxTokens   = 40
	titleMessageSize = 2000 // bytes of the first message the model reads
)

// titlePrompt asks for a title and nothing else.
const titlePrompt = "You name chat threads. Reply with a short title, at most eight words, for the conversation that begins with the user's message below: " +
	"the subject, in the message's language, as plain text on one line. No quotes, no Markdown, no full stop, nothing else."

// ErrNoTitleCall is returned by Title when threads are titled without a
// call: on the demo provider, or with lead.model_titles off, threads keep
// the title their first message gives them.
var ErrNoTitleCall = errors.New("agent: this model names no threads")

// TitleRequest asks for the title of a thread from its first message.
type TitleRequest struct {
	ThreadID string
	UserID   string // the thread's owner, whom the call bills
	Model    string // the first run's model; "" for the default
	Content  string // the first message
}

// TitleAnswer is a title call's answer as the model gave it (the caller
// cleans it) and the call's row in the usage ledger.
type TitleAnswer struct {
	Text string
	Call models.UsageEntry
}

// Title asks req's model for a thread title in one bounded call
// (titleTimeout, titleMaxTokens). On a model with max_concurrent_requests
// it waits for the thread's run to end first. The call is a lead call: it
// is written to the usage ledger under the thread, with no run and no
// task, so the thread's lead figures count it, no run's totals do, and no
// Regenerate or Edit replaces it (docs/DESIGN.md §6).
func (rt *Runtime) Title(ctx context.Context, req TitleRequest) (TitleAnswer, error) {
	model, err := rt.model(req.Model)
	if err != nil {
		return TitleAnswer{}, err
	}
	if model.Config.Provider == "demo" || (rt.lead.ModelTitles != nil && !*rt.lead.ModelTitles) {
		return TitleAnswer{}, ErrNoTitleCall
	}
	if model.Config.MaxConcurrentRequests > 0 {
		// The model serves few calls at once: the title must not take the
		// slot the run's calls wait for, so it comes once the run is over.
		if err := rt.Wait(ctx, req.ThreadID); err != nil {
			return TitleAnswer{}, fmt.Errorf("agent: title call: %w", err)
		}
	}
	content := req.Content
	if len(content) > titleMessageSize {
		content = truncateUTF8(content, titleMessageSize)
	}
	ctx, cancel := context.WithTimeout(ctx, titleTimeout)
	defer cancel()
	resp, err := model.Provider.Complete(ctx, Request{
		Model:     model.Config.Model,
		Messages:  []Message{{Type: TypeSystem, Content: titlePrompt}, {Type: TypeHuman, Content: content}},
		MaxTokens: titleMaxTokens,
	}, nil)
	if err != nil {
		return TitleAnswer{}, fmt.Errorf("agent: title call: %w", err)
	}
	// Written, not queued: once Title returns the call is in the ledger,
	// so the title's frame, which refreshes the page's figures, finds it.
	pctx, pcancel := rt.persistCtx(ctx)
	defer pcancel()
	entry := ledgerEntry(owner{req.ThreadID, req.UserID}, "", "", model.Config.Name, resp)
	row := *entry // the writer stamps its own copy
	if err := rt.journal.Write(pctx, models.Record{Usage: &row}); err != nil {
		rt.log.Error("record usage", "call", entry.CallID, "err", err)
	}
	return TitleAnswer{Text: resp.Text, Call: *entry}, nil
}

// truncateUTF8 is s cut to at most n bytes, at a character boundary.
func truncateUTF8(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
