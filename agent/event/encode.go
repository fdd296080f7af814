package event

import (
	"bytes"
	"encoding/json"
	"sync"
)

// Encoder writes frames' JSON the way every instance sends it: without
// json.Marshal's HTML escaping (a frame only ever reaches JSON.parse, a
// WebSocket message and never a page, and rendered Markdown would
// otherwise go out with every '<' as \u003c, up to twice its size), into
// a buffer it reuses. The hub encodes frames with one and the cluster its
// notices, so a frame reaches another instance's clients in the very
// bytes this instance's get.
type Encoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// NewEncoder returns an Encoder ready for use.
func NewEncoder() *Encoder {
	e := &Encoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}

// Encode encodes v after prefix, with room for grow more bytes after it;
// the bytes, without the encoder's newline, are good until its next use.
func (e *Encoder) Encode(prefix []byte, v any, grow int) ([]byte, error) {
	e.buf.Reset()
	e.buf.Write(prefix)
	if err := e.enc.Encode(v); err != nil {
		return nil, err
	}
	e.buf.Grow(grow)
	b := e.buf.Bytes()
	return b[:len(b)-1], nil
}

var encoders = sync.Pool{New: func() any { return NewEncoder() }}

// Marshal encodes v as an Encoder does, into bytes of its own.
func Marshal(v any) ([]byte, error) {
	e := encoders.Get().(*Encoder)
	defer encoders.Put(e)
	b, err := e.Encode(nil, v, 0)
	return bytes.Clone(b), err
}
