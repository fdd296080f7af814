package server

import (
	"context"
	"time"

	"github.com/labstack/echo/v4"

	"herd/models"
	"herd/server/auth"
)

// Actor is who did an audited action: a user with the address the request
// came from, or herd itself (all empty: a retention purge).
type Actor struct {
	ID, Email, IP string
}

// auditTimeout bounds one entry's write. The write does not end with the
// request: the change it records has committed, so a client that hangs
// up must not leave it off the log.
const auditTimeout = 10 * time.Second

// audit records the admin action of request c on target (an id or a
// name), with the target before and after it (nil: none, as before a
// create or after a delete); secrets in them are masked
// (models.MaskAudit). The actor and address are the request's.
//
// Call it once the change has committed, never before: an entry is a
// change that happened. It is written apart from the change, not in its
// transaction (the changes live in different stores: users, settings,
// soon models and budgets), so a crash between the two can lose an
// entry but never records a change that did not happen. A failed write
// is logged at ERROR and counted (herd_audit_failures_total), and the
// action still answers as done: it was.
func (s *Server) audit(c echo.Context, action, target string, before, after any) {
	a := Actor{IP: c.RealIP()}
	if u := auth.User(c); u != nil {
		a.ID, a.Email = u.ID, u.Email
	}
	s.Audit(c.Request().Context(), a, action, target, before, after)
}

// Audit records action on target by a, as audit does for a request: for
// callers without an echo.Context (a sign-in's role change made by the
// identity provider's claim, the retention purge).
func (s *Server) Audit(ctx context.Context, a Actor, action, target string, before, after any) {
	if err := s.writeAudit(ctx, a, action, target, before, after); err != nil {
		s.auditFailures.Add(1)
		if s.metrics != nil {
			s.metrics.AuditFailed()
		}
		s.log.Error("audit log: an admin action went unrecorded", "action", action, "target", target, "actor", a.ID, "err", err)
	}
}

func (s *Server) writeAudit(ctx context.Context, a Actor, action, target string, before, after any) error {
	b, af, err := models.MaskAudit(before, after)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	return s.store.AddAudit(ctx, &models.AuditEntry{
		At: s.now(), ActorID: a.ID, ActorEmail: a.Email, ActorIP: a.IP,
		Action: action, TargetID: target, Before: b, After: af, Instance: s.instance,
	})
}

// AuditFailures reports how many entries failed to be written.
func (s *Server) AuditFailures() int64 { return s.auditFailures.Load() }
