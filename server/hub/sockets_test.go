package hub

import (
	"context"
	"errors"
	"testing"

	"herd/server/auth"
)

// TestSocketsRevalidate: after a listener reconnects, the sockets whose
// credential ended meanwhile (a sign-out on another instance whose word
// was lost) are closed, and those whose user's role changed (an API
// token outlives a promotion), and only those; a credential the database
// cannot check now keeps its sockets (an outage is not a sign-out).
func TestSocketsRevalidate(t *testing.T) {
	r := NewSockets(nil)
	open := func(role, cred string) context.Context {
		ctx, _, done := r.Track(context.Background(), "u1", role, cred, nil, func() bool { return true })
		t.Cleanup(done)
		return ctx
	}
	live := open("user", auth.SessionCredential("a"))
	gone := open("user", auth.SessionCredential("b"))
	promoted := open("user", auth.TokenCredential("t"))
	promotedLater := open("admin", auth.TokenCredential("t"))
	unknown := open("user", auth.SessionCredential("c"))
	r.Revalidate(func(userID, cred string) (string, error) {
		switch {
		case userID != "u1":
			return "", auth.ErrCredentialGone
		case cred == auth.SessionCredential("a"):
			return "user", nil
		case cred == auth.TokenCredential("t"):
			return "admin", nil
		case cred == auth.SessionCredential("c"):
			return "", errors.New("connection refused")
		}
		return "", auth.ErrCredentialGone
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
