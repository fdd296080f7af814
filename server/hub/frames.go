package hub

import (
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"herd/agent"
	"herd/agent/event"
	"herd/models"
	"herd/server/render"
)

// Frame types that are not task frames (docs/API.md).
const (
	FrameMessage = "message"
	FrameAIDelta = event.TypeDelta
	// FrameAIReasoning streams reasoning, as ai_delta streams text.
	FrameAIReasoning = event.TypeReasoning
	FrameSettings    = event.TypeSettings
	FramePing        = "ping"
	// FrameTaskProgress is a running subagent tool's progress, for the
	// card's status line; never persisted.
	FrameTaskProgress = event.TypeTaskProgress
	// FrameResync tells a client its cursor is past the thread's end (a
	// restored backup, another database): it must reload the thread.
	FrameResync = "resync"
	// FrameTitleUsage tells a thread's open pages the usage of the call
	// that named the thread (docs/API.md): the thread's calls of no run,
	// which the usage panel counts in its lead figure.
	FrameTitleUsage = event.TypeTitleUsage
)

// MessageJSON is a message on the wire (docs/API.md), plus html: the content
// rendered and sanitized by the server, so pages never render Markdown.
type MessageJSON struct {
	ID               string          `json:"id"`
	Seq              int64           `json:"seq"`
	RunID            string          `json:"run_id"`
	Type             string          `json:"type"`
	Content          string          `json:"content"`
	ToolCalls        json.RawMessage `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	Name             string          `json:"name"`
	AdditionalKwargs json.RawMessage `json:"additional_kwargs"`
	Usage            json.RawMessage `json:"usage"`
	ModelName        string          `json:"model_name"`
	CreatedAt        time.Time       `json:"created_at"`
	HTML             string          `json:"html,omitempty"`
}

// RawOr is j as raw JSON, or def when j is empty.
func RawOr(j models.JSON, def string) json.RawMessage {
	if len(j) == 0 {
		return json.RawMessage(def)
	}
	return json.RawMessage(j)
}

// eventFrame frames a persisted event (r.Event) in both token-gate
// variants, from the body its producer prepared (prepare.go) or else from
// its payload (agent.EventOf: read back from the database, decoded).
func eventFrame(r models.Record, md *render.Markdown) (*frame, error) {
	e := r.Event
	var p *preparedEvent
	if lazy, ok := r.Prepared.(*prepared[*preparedEvent]); ok {
		p = lazy.get()
	} else {
		ev, err := agent.EventOf(r)
		if err != nil {
			return nil, err
		}
		p = prepareEvent(ev, md)
	}
	var redact func() []byte
	if eventHasFigures(p.ev) {
		redact = func() []byte {
			typ, data := p.ev.Frame(Redaction{Hide: true}.eventFrame(p.opts))
			return encodeWire(e.Seq, e.CreatedAt, typ, e.ThreadID, e.RunID, data)
		}
	}
	wire := wireFrame(len(p.body)+envelopeRoom, func(b []byte) []byte {
		return appendEnvelope(b, e.Seq, e.CreatedAt, p.typ, e.ThreadID, e.RunID, p.body)
	})
	return &frame{seq: e.Seq, full: wire, redact: redact}, nil
}

// preparedEvent is an event's frame body (its data), encoded once with
// its Markdown rendered; the envelope around it needs the seq and time of
// the commit.
type preparedEvent struct {
	ev   agent.Event
	opts agent.FrameOptions // renders the result's Markdown once
	typ  string
	body []byte
}

func prepareEvent(ev agent.Event, md *render.Markdown) *preparedEvent {
	html, rendered := "", false
	p := &preparedEvent{ev: ev, opts: agent.FrameOptions{HTML: func(s string) string {
		if !rendered {
			html, rendered = md.Render(s), true
		}
		return html
	}}}
	typ, data := ev.Frame(p.opts)
	body, err := marshalJSON(data)
	if err != nil {
		// data comes from our own types; a failure here is a bug, and
		// an error frame is better than a dropped one.
		typ, body = "error", errorBody(err)
	}
	p.typ, p.body = typ, body
	return p
}

// frame is one frame as it goes on the wire — a WebSocket text frame,
// header and payload, encoded once and written as is to every client —
// in both token-gate variants.
type frame struct {
	seq  int64 // 0 for ephemeral frames
	full []byte
	// redact builds the token-gated variant (on the wire, as full), only
	// when a client needs it (any client while the gate is off); nil when
	// the frame has no token figure to hide.
	redact   func() []byte
	once     sync.Once
	redacted []byte
}

// wire returns the frame with its token figures, or without them.
func (f *frame) wire(figures bool) []byte {
	if figures || f.redact == nil {
		return f.full
	}
	f.once.Do(func() { f.redacted = f.redact() })
	return f.redacted
}

// encodeWire encodes data in its envelope as a WebSocket text frame, in
// one buffer: the body is encoded into a pooled buffer and copied once,
// into the frame.
func encodeWire(seq int64, createdAt time.Time, typ, threadID, runID string, data any) []byte {
	e := encoders.Get().(*frameEncoder)
	defer encoders.Put(e)
	body := e.body(data, &typ)
	return wireFrame(len(body)+envelopeRoom, func(b []byte) []byte {
		return appendEnvelope(b, seq, createdAt, typ, threadID, runID, body)
	})
}

// wireFrame builds a WebSocket text frame (appendTextHeader) without
// copying its payload: build appends the payload after room for the
// longest header, which then goes just before it.
func wireFrame(sizeHint int, build func([]byte) []byte) []byte {
	const room = 10
	b := build(make([]byte, room, room+sizeHint))
	var h [room]byte
	hdr := appendTextHeader(h[:0], len(b)-room)
	start := room - len(hdr)
	copy(b[start:], hdr)
	return b[start:]
}

func errorBody(err error) []byte {
	b, _ := marshalJSON(map[string]string{"message": err.Error()})
	return b
}

// envelopeRoom is what an envelope adds to its body, ids and time
// included, with room to spare.
const envelopeRoom = 192

// appendEnvelope appends the WebSocket frame (docs/API.md) around an
// encoded body: {"seq", "type", "thread_id", "run_id", "data",
// "created_at"}, with seq null and no created_at on an ephemeral frame
// (seq 0). created_at is when a persisted record was committed: clients
// date steps and measure delivery with it.
func appendEnvelope(b []byte, seq int64, createdAt time.Time, typ, threadID, runID string, body []byte) []byte {
	b = append(b, `{"seq":`...)
	if seq > 0 {
		b = strconv.AppendInt(b, seq, 10)
	} else {
		b = append(b, "null"...)
	}
	b = appendJSONString(append(b, `,"type":`...), typ)
	b = appendJSONString(append(b, `,"thread_id":`...), threadID)
	b = appendJSONString(append(b, `,"run_id":`...), runID)
	b = append(append(b, `,"data":`...), body...)
	if seq > 0 {
		b = append(b, `,"created_at":"`...)
		b = createdAt.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string: as is between quotes when
// it needs no escaping (ids, frame types), else through the encoder.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			q, _ := marshalJSON(s)
			return append(b, q...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

// marshalJSON encodes v as every frame is encoded (event.Encoder).
func marshalJSON(v any) ([]byte, error) { return event.Marshal(v) }

// body encodes a frame's data; a failure, a bug since data comes from our
// own types, JSON columns and maps, makes it an error frame (*typ
// "error"), which is better than a dropped one.
func (e *frameEncoder) body(data any, typ *string) []byte {
	b, err := e.Encode(nil, data, 0)
	if err != nil {
		*typ, b = "error", errorBody(err)
	}
	return b
}

// frameEncoder is an encoder and its buffer, reused as json.Marshal
// reuses its own: every frame of a burst is encoded through one.
type frameEncoder struct{ *event.Encoder }

var encoders = sync.Pool{New: func() any { return &frameEncoder{event.NewEncoder()} }}

// ephemeral builds a frame that is not persisted (seq null).
func ephemeral(typ, threadID, runID string, data any) *frame {
	return &frame{full: encodeWire(0, time.Time{}, typ, threadID, runID, data)}
}

// usageTitleFrame frames a title call's usage (event.TitleUsage) for a
// thread's live clients; under the token gate it says only that the
// call was made.
func usageTitleFrame(threadID string, call models.UsageEntry) *frame {
	var rep models.UsageReport
	call.Count(&rep)
	wire := func(u *models.UsageReport) []byte {
		return encodeWire(0, time.Time{}, FrameTitleUsage, threadID, "", map[string]*models.UsageReport{"usage": u})
	}
	return &frame{full: wire(&rep), redact: func() []byte { return wire(Redaction{Hide: true}.titleUsage(&rep)) }}
}
