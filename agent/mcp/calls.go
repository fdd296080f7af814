package mcp

import (
	"context"
	"time"
)

// call is one tool call in flight on a server: whose it is, the progress
// token that names it, where its log lines go, and what its HTTP
// requests met.
type call struct {
	user, run string
	token     string                   // its progress token, if it has one
	show      func(level, text string) // nil: the call takes no log lines
	http      *exchange
}

// owner says whose call it is, "" when that is not known: such a call is
// given no line without an owner, and no other call is while it runs.
func (c *call) owner() string {
	if c.user == "" || c.run == "" {
		return ""
	}
	return c.user + "\x00" + c.run
}

// begin counts c in flight on the server until the returned func is
// called.
func (srv *server) begin(c *call) (end func()) {
	srv.callMu.Lock()
	defer srv.callMu.Unlock()
	srv.nextCall++
	id := srv.nextCall
	srv.calls[id] = c
	return func() {
		now := time.Now()
		srv.callMu.Lock()
		defer srv.callMu.Unlock()
		delete(srv.calls, id)
		for o, at := range srv.ended {
			if now.Sub(at) > logGrace {
				delete(srv.ended, o) // every run that ever called would stay
			}
		}
		srv.ended[c.owner()] = now
	}
}

type callKey struct{}

// withCall marks ctx as c's, so the HTTP transport can tell which call a
// request is for and note what it met in c.http.
func withCall(ctx context.Context, c *call) context.Context {
	return withExchange(context.WithValue(ctx, callKey{}, c), c.http)
}

// callOf is the call ctx is for, or nil.
func callOf(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}
