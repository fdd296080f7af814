package titles

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"herd/agent"
	"herd/agent/event"
	"herd/models"
)

func TestTitleFrom(t *testing.T) {
	for in, want := range map[string]string{
		"Four jobs:\n- alpha\n- beta":               "Four jobs",
		"  # Compare **SQLite** and `PostgreSQL`  ": "Compare SQLite and PostgreSQL",
		"- alpha\n- beta":                           "alpha",
		"```\ncode first\n```\nthen words":          "code first",
		"Run `sleep 2 && echo Done`":                "Run sleep 2 && echo Done",
		"???\n!!!":                                  "",
		"":                                          "",
		"Über die Frage, ob herd mit PostgreSQL und vielen Instanzen zurechtkommt, und wie": "Über die Frage, ob herd mit PostgreSQL und vielen Instanzen…",
	} {
		if got := From(in); got != want {
			t.Errorf("From(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCleanModelTitle(t *testing.T) {
	for in, want := range map[string]string{
		"Kyoto trip in March":                    "Kyoto trip in March",
		"\"Kyoto trip in March\".":               "Kyoto trip in March",
		"**Title:** Kyoto trip in March\n\nHere": "Kyoto trip in March",
		"# Comparing SQLite and PostgreSQL":      "Comparing SQLite and PostgreSQL",
		"“Über Instanzen”":                       "Über Instanzen",
		"\n\n  'Plan: a trip'  \n":               "Plan: a trip",
		"A very long title that the model made although it was asked for at most eight words": "A very long title that the model made although it was asked…",
		"...":      "",
		"":         "",
		"```\n```": "",
	} {
		if got := cleanModelTitle(in); got != want {
			t.Errorf("cleanModelTitle(%q) = %q, want %q", in, got, want)
		}
	}
}

// fakes of the Titler's parts, recording what they are told.
type (
	fakeModel struct {
		answer  string
		err     error
		release chan struct{} // nil: answer at once
	}
	fakeStore struct {
		mu      sync.Mutex
		title   string
		renamed bool // the owner renamed the thread meanwhile
	}
	fakePages struct {
		mu      sync.Mutex
		usage   int
		renamed []string
	}
	fakeOthers struct {
		mu    sync.Mutex
		calls []bool
	}
)

func (m *fakeModel) Title(ctx context.Context, req agent.TitleRequest) (agent.TitleAnswer, error) {
	if m.release != nil {
		select {
		case <-m.release:
		case <-ctx.Done():
			return agent.TitleAnswer{}, ctx.Err()
		}
	}
	return agent.TitleAnswer{Text: m.answer, Call: models.UsageEntry{ThreadID: req.ThreadID}}, m.err
}

func (s *fakeStore) RetitleThread(_ context.Context, _, _, from, to string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.renamed || s.title != from {
		return false, nil
	}
	s.title = to
	return true, nil
}

func (p *fakePages) Publish(_, _ string, f event.Frame) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch f := f.(type) {
	case event.TitleUsage:
		p.usage++
	case event.Renamed:
		p.renamed = append(p.renamed, f.Title)
	}
}
func (o *fakeOthers) TitleCall(_ string, pending bool) {
	o.mu.Lock()
	o.calls = append(o.calls, pending)
	o.mu.Unlock()
}
func (o *fakeOthers) TitlePending(string) bool { return false }

// TestTitler: a clean answer replaces the first title and reaches the
// pages; a rename meanwhile, a failed call or an unusable answer keeps
// the title, the call's usage still counted; the call is pending, here
// and for the other instances, until it ends.
func TestTitler(t *testing.T) {
	const first = "Plan a trip"
	cases := []struct {
		name        string
		model       fakeModel
		renamed     bool
		wantTitle   string
		wantRenamed []string
		wantUsage   int
	}{
		{"clean answer", fakeModel{answer: `"Kyoto in March".`}, false, "Kyoto in March", []string{"Kyoto in March"}, 1},
		{"owner renamed meanwhile", fakeModel{answer: "Kyoto in March"}, true, first, nil, 1},
		{"unusable answer", fakeModel{answer: "..."}, false, first, nil, 1},
		{"failed call", fakeModel{err: errors.New("model down")}, false, first, nil, 0},
		{"model names no threads", fakeModel{err: agent.ErrNoTitleCall}, false, first, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			model := c.model
			model.release = make(chan struct{})
			store, pages, others := &fakeStore{title: first, renamed: c.renamed}, &fakePages{}, &fakeOthers{}
			ti := New(&model, store, pages, others, slog.New(slog.DiscardHandler))
			th := &models.Thread{ID: "th", UserID: "u"}
			ti.Start(th, agent.Started{ModelName: "m"}, first, first)
			if !ti.Pending("th") {
				t.Error("the call in flight is not pending")
			}
			close(model.release)
			ti.Wait()
			if ti.Pending("th") {
				t.Error("the call is still pending after it ended")
			}
			if store.title != c.wantTitle || !slices.Equal(pages.renamed, c.wantRenamed) || pages.usage != c.wantUsage {
				t.Errorf("title %q, pages told %v and %d usages; want %q, %v, %d", store.title, pages.renamed, pages.usage, c.wantTitle, c.wantRenamed, c.wantUsage)
			}
			if !slices.Equal(others.calls, []bool{true, false}) {
				t.Errorf("the other instances were told %v, want [true false]", others.calls)
			}
			ti.Close()
		})
	}
}

// TestTitlerClose: Close cancels a call in flight and waits for it, and a
// start after Close calls nothing.
func TestTitlerClose(t *testing.T) {
	model := &fakeModel{answer: "Never", release: make(chan struct{})}
	store, pages := &fakeStore{title: "first"}, &fakePages{}
	ti := New(model, store, pages, nil, slog.New(slog.DiscardHandler))
	th := &models.Thread{ID: "th"}
	ti.Start(th, agent.Started{}, "first", "first")
	ti.Close()
	ti.Start(th, agent.Started{}, "first", "first")
	ti.Wait()
	if store.title != "first" || len(pages.renamed) != 0 || ti.Pending("th") {
		t.Errorf("after Close: title %q, renamed %v, pending %v", store.title, pages.renamed, ti.Pending("th"))
	}
}
