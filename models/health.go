package models

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mattn/go-sqlite3"
)

// StorageFault is why the database cannot be written right now: the disk
// is full, another process holds the write lock, or the file cannot be
// written. Such a fault passes: the writer keeps the records it could not
// commit and retries them until they do (docs/DESIGN.md §7).
type StorageFault struct {
	Since  time.Time
	Reason string // plain words for a 503: "the disk is full"
	Err    error
}

func (f *StorageFault) Error() string { return f.Reason + ": " + f.Err.Error() }
func (f *StorageFault) Unwrap() error { return f.Err }

// storageFault classifies err: a fault of the storage (which retrying
// outlives) rather than of the records (which retrying cannot fix).
func storageFault(err error) (reason string, ok bool) {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return pgFault(err)
	}
	switch se.Code {
	case sqlite3.ErrFull:
		return "the disk is full", true
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		return "the database is locked by another process", true
	case sqlite3.ErrIoErr, sqlite3.ErrCantOpen, sqlite3.ErrReadonly, sqlite3.ErrProtocol:
		return "the database cannot be written", true
	}
	return "", false
}

// faultState is the writer's current storage fault, nil while healthy.
type faultState struct{ p atomic.Pointer[StorageFault] }

func (s *faultState) get() *StorageFault { return s.p.Load() }

// set records err as the current fault, keeping the time it began.
func (s *faultState) set(reason string, err error, now time.Time) {
	since := now
	if old := s.p.Load(); old != nil {
		since = old.Since
	}
	s.p.Store(&StorageFault{Since: since, Reason: reason, Err: err})
}

func (s *faultState) clear() { s.p.Store(nil) }

// errWriterGaveUp fails the records a closing writer could not commit.
var errWriterGaveUp = errors.New("store: writer closed while the database could not be written")

func gaveUp(f *StorageFault) error { return fmt.Errorf("%w (%s)", errWriterGaveUp, f.Reason) }

// AsStorageFault reports err as a storage fault when it is one: a
// StorageFault from the writer or a probe, or a SQLite error of the
// storage (full disk, lock held elsewhere) from any other query.
func AsStorageFault(err error) (*StorageFault, bool) {
	var f *StorageFault
	if errors.As(err, &f) {
		return f, true
	}
	if reason, ok := storageFault(err); ok {
		return &StorageFault{Since: time.Now(), Reason: reason, Err: err}, true
	}
	return nil, false
}

// pgFault classifies a PostgreSQL error (docs/DESIGN.md §7): a server that
// cannot be reached, is shutting down, out of disk or resources, or
// read-only is a storage fault; an error the server raised about the
// statement (a constraint, a type) is the records'.
func pgFault(err error) (reason string, ok bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "53100":
			return "the disk is full", true
		case strings.HasPrefix(pe.Code, "53"), strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "57P"):
			return "the database cannot be reached", true
		case pe.Code == "25006":
			return "the database is read-only", true
		case pe.Code == "55P03", pe.Code == "40P01", pe.Code == "40001":
			return "the database is locked by another process", true
		}
		return "", false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		strings.Contains(err.Error(), "conn closed") {
		return "the database cannot be reached", true
	}
	return "", false
}
