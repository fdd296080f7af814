package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A call's progress and log notifications are read off the wire as they
// arrive, not taken from the SDK's notification handlers: the SDK runs
// those on a queue of their own, so the ones a server sent just before
// its result would often run after the call had returned, and a call
// would lose its final progress and its last log lines, or another call
// would get them. Read in order with the result, each lands on its call.

// observe handles a message read from a server: its progress and log
// notifications. ctx is the request whose HTTP response carried it, which
// may be a call's (callOf); a stdio server's is none.
func (srv *server) observe(ctx context.Context, m jsonrpc.Message) {
	req, ok := m.(*jsonrpc.Request)
	if !ok || req.IsCall() {
		return
	}
	switch req.Method {
	case "notifications/progress":
		var p sdk.ProgressNotificationParams
		if json.Unmarshal(req.Params, &p) == nil {
			srv.owner.onProgress(&p)
		}
	case "notifications/message":
		var p logMessage
		if json.Unmarshal(req.Params, &p) == nil {
			srv.onLog(&p, callOf(ctx))
		}
	}
}

// observedTransport shows every message a stdio server sends to see.
type observedTransport struct {
	sdk.Transport
	see func(jsonrpc.Message)
}

func (t observedTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return observedConn{Connection: c, see: t.see}, nil
}

type observedConn struct {
	sdk.Connection
	see func(jsonrpc.Message)
}

func (c observedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err == nil {
		c.see(m)
	}
	return m, err
}

// maxObservedEvent bounds one server-sent event read for its
// notifications; a larger one (a big result) is only passed on.
const maxObservedEvent = 1 << 20

// observeEvents passes an HTTP server's event stream on as it is and
// shows each message in it to see as the SDK reads it (the streamable
// HTTP transport's connection cannot be wrapped as a stdio one is).
func observeEvents(resp *http.Response, see func(jsonrpc.Message)) {
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" || see == nil {
		return
	}
	resp.Body = &eventTee{ReadCloser: resp.Body, see: see}
}

// eventTee reads server-sent events (lines; data: lines make an event's
// data, a blank line ends it) from what passes through it.
type eventTee struct {
	io.ReadCloser
	see  func(jsonrpc.Message)
	line []byte
	data []byte
	over bool // the event is over maxObservedEvent: skipped
}

func (t *eventTee) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.feed(p[:n])
	return n, err
}

func (t *eventTee) feed(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			t.keep(b)
			return
		}
		t.keep(b[:i])
		t.endLine()
		b = b[i+1:]
	}
}

func (t *eventTee) keep(b []byte) {
	if len(t.line)+len(b) > maxObservedEvent {
		t.over = true
		return
	}
	t.line = append(t.line, b...)
}

func (t *eventTee) endLine() {
	line := bytes.TrimSuffix(t.line, []byte("\r"))
	t.line = t.line[:0]
	switch {
	case len(line) == 0:
		if !t.over && len(t.data) > 0 {
			if m, err := jsonrpc.DecodeMessage(t.data); err == nil {
				t.see(m)
			}
		}
		t.data, t.over = t.data[:0], false
	case bytes.HasPrefix(line, []byte("data:")):
		v := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
		if len(t.data) > 0 {
			t.data = append(t.data, '\n')
		}
		if len(t.data)+len(v) > maxObservedEvent {
			t.over = true
			return
		}
		t.data = append(t.data, v...)
	}
}
