package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"herd/agent"
	"herd/models"
	"herd/server/render"
)

// TestFramesCarryHTMLUnescaped: rendered Markdown goes out as is, not with
// every '<' as \u003c (a frame is parsed by JSON.parse, never put in a
// page), and the frame still decodes to the same text.
func TestFramesCarryHTMLUnescaped(t *testing.T) {
	const html = `<p>a &amp; <code>b</code></p>`
	raw := encodeEnvelope(0, time.Time{}, "ai_html", "th", "run", map[string]string{"html": html})
	if bytes.Contains(raw, []byte(`\u003c`)) || !bytes.Contains(raw, []byte(html)) {
		t.Fatalf("frame %s: want the HTML unescaped", raw)
	}
	if bytes.HasSuffix(raw, []byte("\n")) {
		t.Error("the frame ends with a newline")
	}
	var env struct {
		Data struct{ HTML string } `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || env.Data.HTML != html {
		t.Fatalf("decoded %q, %v; want %q", env.Data.HTML, err, html)
	}
}

// envelope is the frame's shape as a struct: appendEnvelope must write
// what encoding/json writes for it.
type envelope struct {
	Seq       *int64     `json:"seq"`
	Type      string     `json:"type"`
	ThreadID  string     `json:"thread_id"`
	RunID     string     `json:"run_id"`
	Data      any        `json:"data"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
}

func TestEnvelopeIsWhatJSONWrites(t *testing.T) {
	at := time.Date(2026, 11, 30, 22, 41, 34, 669101066, time.FixedZone("x", 3600))
	data := map[string]any{"text": "a <b> & \"c\" é", "n": 3}
	for _, seq := range []int64{0, 1, 104} {
		for _, id := range []string{"77cb41c5-e935-47ae-9eaa-215f558d46e7", `odd "id" \ é` + "\n"} {
			env := envelope{Type: "task_running", ThreadID: id, RunID: "run", Data: data}
			if seq > 0 {
				utc := at.UTC()
				env.Seq, env.CreatedAt = &seq, &utc
			}
			want, err := marshalJSON(env)
			if err != nil {
				t.Fatal(err)
			}
			got := encodeEnvelope(seq, at, env.Type, env.ThreadID, env.RunID, data)
			if !bytes.Equal(got, want) {
				t.Errorf("seq %d, id %q:\n got %s\nwant %s", seq, id, got, want)
			}
		}
	}
}

type journalFunc func(recs []models.Record)

func (f journalFunc) WriteWhile(_ context.Context, during func(), recs ...models.Record) error {
	f(recs)
	during()
	return nil
}

func (f journalFunc) Enqueue(_ context.Context, recs ...models.Record) error {
	f(recs)
	return nil
}

// TestPreparedFrames: the server's journal builds a record's frame body
// on the producer's goroutine, so framing it after the commit renders
// nothing, and the frame is the one the hub would have built itself, in
// both token-gate variants.
func TestPreparedFrames(t *testing.T) {
	md := render.NewMarkdown()
	step := agent.TaskStep{
		TaskRef:  agent.TaskRef{TaskID: "call_1", ExecutionID: "e1", RunID: "r1", Version: 2},
		StepBody: agent.StepBody{Kind: "ai", Text: "**bold** and `code`"},
		Usage:    &agent.TokenUsage{InputTokens: 10, OutputTokens: 2, TotalTokens: 12},
	}
	ev := &models.RunEvent{ThreadID: "th", RunID: "r1", TaskID: "call_1", EventType: "subagent.step"}
	msg := &models.Message{ThreadID: "th", RunID: "r1", Type: agent.TypeAI, Content: "# Title\n\n- item"}
	var queued []models.Record
	j := (&Hub{md: md}).Preparing(journalFunc(func(recs []models.Record) { queued = append(queued, recs...) }))
	if err := j.Write(context.Background(), models.Record{Event: ev, Payload: step}, models.Record{Message: msg}); err != nil || len(queued) != 2 {
		t.Fatalf("write: %v, %d queued", err, len(queued))
	}
	ev.Seq, ev.CreatedAt = 7, time.Now()
	before := md.Renders()
	f, err := eventFrame(queued[0], md)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := queued[1].Prepared.(*prepared[messageHTML]); !ok || p.build != nil || !strings.Contains(string(p.v), "<h1") {
		t.Errorf("the message was not prepared: %#v", queued[1].Prepared)
	}
	full, redacted := f.wire(true), f.wire(false)
	if n := md.Renders() - before; n != 0 {
		t.Errorf("framing a prepared event rendered Markdown %d times", n)
	}
	plain := queued[0]
	plain.Prepared = nil
	g, err := eventFrame(plain, md)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(full, g.wire(true)) || !bytes.Equal(redacted, g.wire(false)) {
		t.Errorf("prepared frame\n %s\n %s\ndiffers from the hub's\n %s\n %s", full, redacted, g.wire(true), g.wire(false))
	}
	if bytes.Contains(redacted, []byte(`"total_tokens"`)) || !bytes.Contains(full, []byte(`"total_tokens":12`)) {
		t.Errorf("token gate: full %s, redacted %s", full, redacted)
	}
}

// encodeEnvelope encodes data in its envelope, a frame's payload, as
// encodeWire does before framing it.
func encodeEnvelope(seq int64, createdAt time.Time, typ, threadID, runID string, data any) []byte {
	e := encoders.Get().(*frameEncoder)
	defer encoders.Put(e)
	body := e.body(data, &typ)
	return appendEnvelope(make([]byte, 0, len(body)+envelopeRoom), seq, createdAt, typ, threadID, runID, body)
}
