package server

import (
	"context"

	"herd/agent"
	"herd/models"
)

// Preparing returns the runtime's journal j with one step before each
// write: every record the hub will publish gets its frame body built on
// the calling goroutine — the subagent's or the lead's that produced it —
// before it joins the writer's queue. A burst of steps from many
// subagents is then encoded and rendered by its producers in parallel,
// and the thread's shard, which publishes them one after another, only
// wraps each body with the seq and time of its commit (docs/DESIGN.md §1).
func (h *Hub) Preparing(j agent.Journal) agent.Journal {
	return preparing{next: j, md: h.md}
}

type preparing struct {
	next agent.Journal
	md   *Markdown
}

func (p preparing) Write(ctx context.Context, recs ...models.Record) error {
	p.prepare(recs)
	return p.next.Write(ctx, recs...)
}

func (p preparing) Enqueue(ctx context.Context, recs ...models.Record) error {
	p.prepare(recs)
	return p.next.Enqueue(ctx, recs...)
}

func (p preparing) prepare(recs []models.Record) {
	for _, r := range recs {
		switch {
		case r.Message != nil:
			r.Message.Prepared = renderMessage(r.Message, p.md)
		case r.Event != nil:
			if ev, ok := r.Event.Payload.(agent.Event); ok {
				r.Event.Prepared = prepareEvent(ev, p.md)
			}
		}
	}
}

// messageHTML is a message's content rendered for its frame.
type messageHTML string

// renderMessage renders what a message frame shows as HTML: the text of
// an AI or human message, the result of a task (its card shows it as the
// page does); other tools' output is shown as text.
func renderMessage(m *models.Message, md *Markdown) messageHTML {
	switch {
	case m.Type != agent.TypeTool:
		return messageHTML(md.Render(m.Content))
	case m.Name == agent.ToolTask:
		if r := agent.TaskResultText(m.Content); r != "" {
			return messageHTML(md.Render(r))
		}
	}
	return ""
}
