package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"herd/agent"
)

// contextNote is the start of the note an answer carries when older turns
// were left out of its run's requests (views.Message).
const contextNote = "Earlier messages were left out of this answer to fit the model's context window ("

// smallWindow gives a model a context window that a handful of turns
// outgrow: the lead's prompt and tools take about 1,200 of it.
func smallWindow(m agent.ModelConfig) agent.ModelConfig {
	m.ContextWindow, m.MaxOutputTokens = 2048, 256
	return m
}

// TestContextNoteAfterReload: a thread that outgrows its model's window
// keeps getting answers; the answer whose requests left turns out carries
// the note, in the messages API and on the page after a reload, and the
// earlier answers, whose requests sent everything, do not.
func TestContextNoteAfterReload(t *testing.T) {
	// Usage off: the demo counts no tool definitions, so its reports
	// would calibrate the estimate down; without them it stays as is.
	a := newApp(t, withModels(smallWindow(noUsage(demoModel("demo-small", 0, 0)))))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("long")
	const runs = 6
	for i := range runs {
		content := fmt.Sprintf("Question %d. %s", i, strings.Repeat("Tell me more about the weather. ", 12))
		u.mustJSON("POST", "/api/threads/"+th+"/runs", map[string]string{"content": content, "model": "demo-small"}, http.StatusAccepted, nil)
		a.waitIdle(th)
	}

	var page struct {
		Messages []struct {
			Type   string `json:"type"`
			Kwargs struct {
				Trimmed *struct{ Sent, Total int } `json:"context_trimmed"`
			} `json:"additional_kwargs"`
		} `json:"messages"`
	}
	u.mustJSON("GET", "/api/threads/"+th+"/messages?limit=100", nil, http.StatusOK, &page)
	var notes []string
	for _, m := range page.Messages {
		if m.Type == agent.TypeAI {
			if tr := m.Kwargs.Trimmed; tr != nil {
				notes = append(notes, fmt.Sprintf("%d/%d", tr.Sent, tr.Total))
			} else {
				notes = append(notes, "-")
			}
		}
	}
	if len(notes) != runs || notes[0] != "-" || notes[runs-1] == "-" {
		t.Fatalf("answers' notes %v: want %d answers, the first whole, the last with turns left out", notes, runs)
	}
	if want := fmt.Sprintf("/%d", 2*runs-1); !strings.HasSuffix(notes[runs-1], want) {
		t.Errorf("last note %s, want of %d turns", notes[runs-1], 2*runs-1)
	}

	body := string(u.do("GET", "/threads/"+th, nil).body)
	// The page's own note, outside the template live messages clone.
	live := body[:strings.Index(body, `<template id="message-template">`)]
	var sent, total int
	if i := strings.LastIndex(live, contextNote); i < 0 {
		t.Fatalf("the page lacks the note %q", contextNote)
	} else if _, err := fmt.Sscanf(stripTags(live[i+len(contextNote):]), "%d of %d turns sent", &sent, &total); err != nil || fmt.Sprintf("%d/%d", sent, total) != notes[runs-1] {
		t.Errorf("page note %d of %d (%v), want %s", sent, total, err, notes[runs-1])
	}
	if n := strings.Count(live, contextNote); n != countTrimmed(notes) {
		t.Errorf("%d notes on the page, want one per answer with turns left out (%v)", n, notes)
	}
}

func countTrimmed(notes []string) int {
	n := 0
	for _, s := range notes {
		if s != "-" {
			n++
		}
	}
	return n
}

// stripTags drops the markup from s, leaving its text.
func stripTags(s string) string {
	var b strings.Builder
	in := false
	for _, r := range s {
		switch {
		case r == '<':
			in = true
		case r == '>':
			in = false
		case !in:
			b.WriteRune(r)
		}
	}
	return b.String()
}
