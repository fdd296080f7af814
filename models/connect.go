package models

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
)

// The waits between a server's attempts to reach PostgreSQL at start:
// doubling from connectFirstWait up to connectMaxWait, each drawn at
// random from its upper half, so herds started together do not knock in
// step.
const (
	connectFirstWait = 250 * time.Millisecond
	connectMaxWait   = 5 * time.Second
)

// OpenPostgresWaiting is OpenPostgres for a server's start, when the
// database may come up after herd (both started at boot, or PostgreSQL
// restarting): while the database cannot be reached (a storage fault,
// pgFault: no server, a server starting or shutting down, a lost
// connection during the migration) it logs one line through
// opts.Logger and tries again with capped exponential backoff, for up to
// timeout. Any other failure (a bad DSN, a wrong password, a missing
// database) is returned at once, as is ctx's end. waited is how long it
// waited for the database, 0 if the first attempt succeeded, so that a
// caller can tell a start after an outage from a normal one.
func OpenPostgresWaiting(ctx context.Context, dsn string, opts Options, timeout time.Duration) (s *Store, waited time.Duration, err error) {
	cc, err := pgConnConfig(dsn)
	if err != nil {
		return nil, 0, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	deadline := start.Add(timeout)
	wait := connectFirstWait
	for attempt := 1; ; attempt++ {
		s, err = openPostgresOnce(ctx, cc, dsn, opts, deadline)
		if err == nil {
			if attempt > 1 {
				waited = time.Since(start)
			}
			return s, waited, nil
		}
		if ctx.Err() != nil {
			return nil, 0, stoppedWaiting(ctx, cc)
		}
		reason, ok := pgFault(err)
		if !ok {
			return nil, 0, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, 0, fmt.Errorf("store: the database could not be reached for %s: %w", seconds(time.Since(start)), err)
		}
		if attempt == 1 {
			log.Warn(fmt.Sprintf("waiting for the database at %s: %s; retrying for up to %s", pgName(cc), reason, seconds(timeout)), "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, 0, stoppedWaiting(ctx, cc)
		case <-time.After(min(wait/2+rand.N(wait/2+1), left)):
		}
		wait = min(2*wait, connectMaxWait)
	}
}

func stoppedWaiting(ctx context.Context, cc *pgx.ConnConfig) error {
	return fmt.Errorf("store: stopped while waiting for the database at %s: %w", pgName(cc), ctx.Err())
}

// attemptFloor is the least time an attempt has to connect, even the
// last one, made at the deadline: cut at once it would fail with the
// deadline rather than say why the database cannot be reached.
const attemptFloor = time.Second

// openPostgresOnce makes one attempt: a connection that ctx and the
// deadline can cut (gorm's own ping cannot be cancelled, and a host that
// drops packets would hold it for as long as the kernel tries), then
// OpenPostgres, which migrates.
func openPostgresOnce(ctx context.Context, cc *pgx.ConnConfig, dsn string, opts Options, deadline time.Time) (*Store, error) {
	pctx, cancel := context.WithDeadline(ctx, later(deadline, time.Now().Add(attemptFloor)))
	defer cancel()
	conn, err := pgx.ConnectConfig(pctx, cc)
	if err != nil {
		return nil, fmt.Errorf("store: open PostgreSQL database %s: %w", pgName(cc), err)
	}
	_ = conn.Close(pctx)
	return OpenPostgres(dsn, opts)
}

// seconds writes d as whole seconds, as the configuration gives them.
func seconds(d time.Duration) string {
	return fmt.Sprintf("%d s", int(d.Round(time.Second)/time.Second))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
