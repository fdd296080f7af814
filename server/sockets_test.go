package server

import (
	"context"
	"errors"
	"testing"
)

// TestSocketsRevalidate: after a listener reconnects, the sockets whose
// credential ended meanwhile (a sign-out on another instance whose word
// was lost) are closed, and those whose user's role changed (an API
// token outlives a promotion), and only those; a credential the database
// cannot check now keeps its sockets (an outage is not a sign-out).
func TestSocketsRevalidate(t *testing.T) {
	r := newSockets(nil)
	open := func(role, cred string) context.Context {
		ctx, _, done := r.track(context.Background(), "u1", role, cred, nil, func() bool { return true })
		t.Cleanup(done)
		return ctx
	}
	live := open("user", sessionCredential("a"))
	gone := open("user", sessionCredential("b"))
	promoted := open("user", tokenCredential("t"))
	promotedLater := open("admin", tokenCredential("t"))
	unknown := open("user", sessionCredential("c"))
	r.revalidate(func(userID, cred string) (string, error) {
		switch {
		case userID != "u1":
			return "", errCredentialGone
		case cred == sessionCredential("a"):
			return "user", nil
		case cred == tokenCredential("t"):
			return "admin", nil
		case cred == sessionCredential("c"):
			return "", errors.New("connection refused")
		}
		return "", errCredentialGone
	})
	for name, ctx := range map[string]context.Context{"live session": live, "opened after the promotion": promotedLater, "unverifiable": unknown} {
		if ctx.Err() != nil {
			t.Errorf("the %s socket was closed", name)
		}
	}
	for name, ctx := range map[string]context.Context{"ended session": gone, "promoted user's token": promoted} {
		if ctx.Err() == nil {
			t.Errorf("the %s socket stayed open", name)
		}
	}
}
