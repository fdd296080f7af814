package server

import (
	"testing"

	"herd/server/render"
)

// TestReplayRendersOnce: reconnecting to a thread does not render its
// Markdown again; the first replay renders each text once.
func TestReplayRendersOnce(t *testing.T) {
	md := render.NewMarkdown()
	a := newApp(t, func(c *appConfig) { c.markdown = md })
	u := a.newUser("ann@example.com", false)
	th := u.newThread("big")
	last := a.seedConversation(th, u.id, 20)
	if err := u.replayAll(th, last); err != nil {
		t.Fatal(err)
	}
	first := md.Renders()
	if first != 40 {
		t.Errorf("first replay rendered %d texts, want 40", first)
	}
	for range 5 {
		if err := u.replayAll(th, last); err != nil {
			t.Fatal(err)
		}
	}
	if got := md.Renders(); got != first {
		t.Errorf("5 reconnects rendered %d more texts, want 0", got-first)
	}
}
