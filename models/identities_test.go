package models

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestSignInIdentity(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		ctx := context.Background()
		s := d.openStore(t, Options{})
		yes, no := true, false
		sign := func(so SignOn) *SignOnResult {
			t.Helper()
			res, err := s.SignInIdentity(ctx, so)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		// First sign-in: a user without a password, an admin by the claim.
		first := sign(SignOn{Provider: "corp", Issuer: "https://id", Subject: "a", Email: "A@Example.com", Admin: &yes})
		if !first.Created || first.User.Email != "a@example.com" || first.User.Role != RoleAdmin || first.User.PasswordHash != "" || first.RoleFrom != RoleUser {
			t.Fatalf("first sign-in = %+v, %+v", first, first.User)
		}
		// The email changed at the provider: the same account.
		again := sign(SignOn{Provider: "corp", Issuer: "https://id", Subject: "a", Email: "new@example.com", Admin: &yes})
		if again.Created || again.User.ID != first.User.ID || again.RoleFrom != "" {
			t.Errorf("second sign-in = %+v", again)
		}
		// The claim removed, but she is the last admin: kept.
		last := sign(SignOn{Provider: "corp", Issuer: "https://id", Subject: "a", Email: "a@example.com", Admin: &no})
		if !last.KeptLastAdmin || last.User.Role != RoleAdmin {
			t.Errorf("last admin's claim removed = %+v, %+v", last, last.User)
		}
		// A local account with the email is linked, and demoted by the
		// claim once another admin exists; its sessions end.
		local, err := s.CreateUser(ctx, "b@example.com", "hash", RoleAdmin, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CreateSession(ctx, &Session{ID: "sess-b", UserID: local.ID, CSRFToken: "c", CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		linked := sign(SignOn{Provider: "corp", Issuer: "https://id", Subject: "b", Email: "b@example.com", Admin: &no})
		if !linked.Linked || linked.User.ID != local.ID || linked.User.Role != RoleUser || linked.RoleFrom != RoleAdmin || len(linked.EndedSessions) != 1 {
			t.Errorf("linked = %+v, %+v", linked, linked.User)
		}
		if _, _, err := s.SessionUser(ctx, "sess-b"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the demoted user's session: %v, want ended", err)
		}
		// No claim: the role is herd's.
		if res := sign(SignOn{Provider: "corp", Issuer: "https://id", Subject: "b", Email: "b@example.com"}); res.User.Role != RoleUser || res.RoleFrom != "" {
			t.Errorf("without a claim = %+v", res)
		}
		if ids, err := s.Identities(ctx, local.ID); err != nil || len(ids) != 1 || ids[0].Subject != "b" {
			t.Errorf("identities = %+v, %v", ids, err)
		}
		if err := s.DeleteUser(ctx, local.ID); err != nil {
			t.Fatal(err)
		}
		if ids, _ := s.Identities(ctx, local.ID); len(ids) != 0 {
			t.Errorf("a deleted user's identities stay: %+v", ids)
		}
	})
}

func TestLoginFlowIsTakenOnce(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		ctx := context.Background()
		now := time.Now().UTC()
		s := d.openStore(t, Options{Now: func() time.Time { return now }})
		old := &LoginFlow{ID: "old", Browser: "b", Provider: "corp", Nonce: "n", Verifier: "v", ExpiresAt: now.Add(-time.Second)}
		if err := s.CreateLoginFlow(ctx, old); err != nil {
			t.Fatal(err)
		}
		f := &LoginFlow{ID: "f", Browser: "b", Provider: "corp", Nonce: "n", Verifier: "v", Next: "/x", ExpiresAt: now.Add(time.Minute)}
		if err := s.CreateLoginFlow(ctx, f); err != nil {
			t.Fatal(err)
		}
		if _, err := s.TakeLoginFlow(ctx, "old"); !errors.Is(err, ErrNotFound) {
			t.Errorf("an expired flow: %v, want it dropped", err)
		}
		var wg sync.WaitGroup
		got := make([]error, 4)
		for i := range got {
			wg.Go(func() {
				taken, err := s.TakeLoginFlow(ctx, "f")
				if err == nil && taken.Next != "/x" {
					err = errors.New("wrong flow")
				}
				got[i] = err
			})
		}
		wg.Wait()
		won := 0
		for _, err := range got {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrNotFound):
				t.Errorf("take: %v", err)
			}
		}
		if won != 1 {
			t.Errorf("%d takers got the flow, want 1", won)
		}
	})
}

// TestIdentityEmailFollowsAndUnlink: a linked identity's new email
// becomes the user's unless another user has it; an identity unlinks,
// ending its provider's sessions, unless it is the user's only way in.
func TestIdentityEmailFollowsAndUnlink(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		ctx := context.Background()
		s := d.openStore(t, Options{})
		first, err := s.SignInIdentity(ctx, SignOn{Provider: "corp", Issuer: "https://id", Subject: "a", Email: "a@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		uid := first.User.ID
		moved, err := s.SignInIdentity(ctx, SignOn{Provider: "corp", Issuer: "https://id", Subject: "a", Email: "ann@example.com"})
		if err != nil || moved.EmailFrom != "a@example.com" || moved.User.Email != "ann@example.com" {
			t.Fatalf("email change = %+v, %v", moved, err)
		}
		if _, err := s.CreateUser(ctx, "taken@example.com", "hash", RoleUser, false); err != nil {
			t.Fatal(err)
		}
		var taken *EmailTakenError
		if _, err := s.SignInIdentity(ctx, SignOn{Provider: "corp", Issuer: "https://id", Subject: "a", Email: "taken@example.com"}); !errors.As(err, &taken) {
			t.Errorf("a taken email: %v, want EmailTakenError", err)
		}
		if u, _ := s.User(ctx, uid); u.Email != "ann@example.com" {
			t.Errorf("email after the refusal = %s", u.Email)
		}

		ids, _ := s.Identities(ctx, uid)
		if _, err := s.UnlinkIdentity(ctx, uid, ids[0].ID); !errors.Is(err, ErrLastSignIn) {
			t.Errorf("unlinking the only way in: %v, want ErrLastSignIn", err)
		}
		if _, err := s.SignInIdentity(ctx, SignOn{Provider: "other", Issuer: "https://other", Subject: "a2", Email: "ann@example.com"}); err != nil {
			t.Fatal(err)
		}
		for _, sess := range []*Session{{ID: "from-corp", Provider: "corp"}, {ID: "from-other", Provider: "other"}} {
			sess.UserID, sess.CSRFToken, sess.CreatedAt, sess.ExpiresAt = uid, "c", time.Now(), time.Now().Add(time.Hour)
			if err := s.CreateSession(ctx, sess); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.UnlinkIdentity(ctx, "someone-else", ids[0].ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("unlinking through another user: %v, want ErrNotFound", err)
		}
		un, err := s.UnlinkIdentity(ctx, uid, ids[0].ID)
		if err != nil || un.Identity.Subject != "a" || len(un.EndedSessions) != 1 || un.EndedSessions[0] != "from-corp" {
			t.Fatalf("unlink = %+v, %v", un, err)
		}
		if _, _, err := s.SessionUser(ctx, "from-other"); err != nil {
			t.Errorf("the other provider's session ended: %v", err)
		}
		if left, _ := s.Identities(ctx, uid); len(left) != 1 || left[0].Provider != "other" {
			t.Errorf("identities left = %+v", left)
		}
	})
}
