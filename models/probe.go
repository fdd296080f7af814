package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// minFreeBytes is the free space below which the disk counts as full for
// readiness: SQLite needs room for WAL frames and checkpoints.
const minFreeBytes = 4 << 20

// probeBusyTimeout bounds how long the probe waits for the write lock, well
// inside a readiness deadline.
const probeBusyTimeout = 500 * time.Millisecond

// prober owns the probe's connection, opened on first use.
type prober struct {
	once sync.Once
	db   *sql.DB
	err  error
}

// Probe tells within about a second whether the database can be written
// now: the disk has room and the write lock can be taken (docs/DESIGN.md
// §10). It writes nothing and uses its own connection with a short busy
// timeout, so it never queues behind the writer's batches. The error is a
// *StorageFault.
func (s *Store) Probe(ctx context.Context) error {
	if s.pg {
		return s.probePostgres(ctx)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(s.path), &st); err == nil {
		if free := st.Bavail * uint64(st.Bsize); free < minFreeBytes {
			return &StorageFault{Since: s.now(), Reason: "the disk is full", Err: fmt.Errorf("%d bytes free in %s", free, filepath.Dir(s.path))}
		}
	}
	s.probe.once.Do(func() {
		s.probe.db, s.probe.err = sql.Open("sqlite3", probeDSN(s.path))
		if s.probe.err == nil {
			s.probe.db.SetMaxOpenConns(1)
		}
	})
	if s.probe.err != nil {
		return &StorageFault{Since: s.now(), Reason: "the database cannot be opened", Err: s.probe.err}
	}
	tx, err := s.probe.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: takes the write lock
	if err == nil {
		err = tx.Rollback()
	}
	if err != nil {
		if f, ok := AsStorageFault(err); ok {
			return f
		}
		return &StorageFault{Since: s.now(), Reason: "the database cannot be written", Err: err}
	}
	return nil
}

func probeDSN(path string) string {
	return fileDSN(path, probeBusyTimeout, url.Values{"_txlock": {"immediate"}})
}

// probePostgres tells whether PostgreSQL takes writes now: the server
// answers within probeTimeout on a reader connection and is not a
// read-only standby. The writer's connection is left to its batches.
func (s *Store) probePostgres(ctx context.Context) error {
	db, err := s.r.DB()
	if err != nil {
		return &StorageFault{Since: s.now(), Reason: "the database cannot be reached", Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var standby bool
	// database/sql, not gorm: the read counter is for the app's queries.
	if err := db.QueryRowContext(ctx, "SELECT pg_is_in_recovery()").Scan(&standby); err != nil {
		if f, ok := AsStorageFault(err); ok {
			return f
		}
		return &StorageFault{Since: s.now(), Reason: "the database cannot be reached", Err: err}
	}
	if standby {
		return &StorageFault{Since: s.now(), Reason: "the database is read-only", Err: errors.New("PostgreSQL is a standby (in recovery)")}
	}
	return nil
}

// probeTimeout bounds the PostgreSQL probe, well inside a readiness
// deadline.
const probeTimeout = time.Second
