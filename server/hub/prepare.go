package hub

import (
	"context"
	"sync"

	"herd/agent"
	"herd/models"
	"herd/server/render"
)

// Preparing returns the runtime's journal, w with one step added: the
// goroutine that produced a record — a subagent's, the lead's — builds
// its frame body right after queuing it, while the writer commits. A
// burst of steps from many subagents is then encoded and rendered by its
// producers in parallel, and the thread's shard, which publishes them one
// after another, only wraps each body with the seq and time of its commit
// (docs/DESIGN.md §1). Building after queuing keeps it off the commit's
// path: a hand-off waits for whichever of the two ends last.
func (h *Hub) Preparing(w QueueWriter) agent.Journal {
	return preparing{next: w, md: h.md}
}

// QueueWriter is the writer as Preparing needs it (models.Writer).
type QueueWriter interface {
	WriteWhile(ctx context.Context, during func(), recs ...models.Record) error
	Enqueue(ctx context.Context, recs ...models.Record) error
}

type preparing struct {
	next QueueWriter
	md   *render.Markdown
}

func (p preparing) Write(ctx context.Context, recs ...models.Record) error {
	build := p.attach(recs)
	return p.next.WriteWhile(ctx, build, recs...)
}

func (p preparing) Enqueue(ctx context.Context, recs ...models.Record) error {
	build := p.attach(recs)
	err := p.next.Enqueue(ctx, recs...)
	if err == nil {
		build()
	}
	return err
}

// attach gives each record that will be framed its builder
// (models.Record.Prepared), before the record is queued: the hub finds it
// there after the commit. build runs them on the calling goroutine.
func (p preparing) attach(recs []models.Record) (build func()) {
	var gets []models.Prepared
	for i, r := range recs {
		switch {
		case r.Message != nil:
			m := r.Message
			recs[i].Prepared = &prepared[messageHTML]{build: func() messageHTML { return renderMessage(m, p.md) }}
		case r.Event != nil:
			if ev, ok := r.Payload.(agent.Event); ok {
				recs[i].Prepared = &prepared[*preparedEvent]{build: func() *preparedEvent { return prepareEvent(ev, p.md) }}
			}
		}
		if recs[i].Prepared != nil {
			gets = append(gets, recs[i].Prepared)
		}
	}
	return func() {
		for _, get := range gets {
			get.Prepare()
		}
	}
}

// prepared is a frame body built once, by whichever needs it first: its
// producer after queuing the record, or the hub's shard after the commit,
// which then waits for the producer instead of building it again. It is
// the models.Prepared the hub attaches; recordFrame reads it back as the
// type it attached for the record's kind.
type prepared[T any] struct {
	once  sync.Once
	build func() T
	v     T
}

// Prepare implements models.Prepared.
func (p *prepared[T]) Prepare() { p.get() }

func (p *prepared[T]) get() T {
	p.once.Do(func() { p.v, p.build = p.build(), nil })
	return p.v
}

// messageHTML is a message's content rendered for its frame.
type messageHTML string

// renderMessage renders what a message frame shows as HTML: the text of
// an AI or human message, the result of a task (its card shows it as the
// page does); other tools' output is shown as text. It reads none of the
// fields the writer sets (seq, time), so it may run during the commit.
func renderMessage(m *models.Message, md *render.Markdown) messageHTML {
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
