package server

import (
	"context"
	"errors"
	"time"

	"herd/models"
)

// auditPurgeEvery is how often the audit log drops what its retention
// no longer keeps: an entry outlives its time by an hour at most.
const auditPurgeEvery = time.Hour

// auditRetention is the one goroutine that purges the audit log, at
// start and then every auditPurgeEvery; Close stops it and waits.
type auditRetention struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// keepAudit starts the purge of audit entries older than keep; keep 0
// keeps every entry and starts nothing. On PostgreSQL every instance
// purges: a row is deleted once, and only the instance that deleted
// some records the purge.
func (s *Server) keepAudit(keep time.Duration, onPurged func(int64)) *auditRetention {
	if keep <= 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &auditRetention{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		t := time.NewTicker(auditPurgeEvery)
		defer t.Stop()
		for {
			s.purgeAudit(ctx, keep, onPurged)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return r
}

// Close stops the purge and waits for one in progress; nil: none runs.
func (r *auditRetention) Close() {
	if r == nil {
		return
	}
	r.cancel()
	<-r.done
}

// purgeAudit deletes the entries older than keep and, when there were
// some, records that it did (audit.purge, by herd itself).
func (s *Server) purgeAudit(ctx context.Context, keep time.Duration, onPurged func(int64)) {
	cutoff := s.now().Add(-keep).UTC()
	n, err := s.store.PurgeAudit(ctx, cutoff)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			s.log.Error("audit log: purge failed; the next one tries again", "err", err)
		}
		return
	}
	if n > 0 {
		s.Audit(ctx, Actor{}, models.AuditAuditPurge, "", nil, map[string]any{"removed": n, "older_than": cutoff.Format(time.RFC3339)})
	}
	if onPurged != nil {
		onPurged(n)
	}
}
