package models

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Store is herd's database. SQLite allows one writer at a time, so all
// writes share one connection (w), but for best-effort touches, which
// have their own (aside): concurrent writers would otherwise
// queue inside SQLite on the busy timeout, and a per-thread sequence
// assigned in the writing transaction could not be contended at all.
// Reads use a separate pool (r) that WAL lets run beside the writer.
type Store struct {
	path string // the SQLite file; "" on PostgreSQL
	pg   bool   // PostgreSQL rather than SQLite (docs/DESIGN.md §7)
	name string // PostgreSQL's user@host:port/database, for messages
	// cc configures the dedicated connections of LISTEN and NOTIFY
	// (Listen, NewNotifier); nil on SQLite.
	cc  *pgx.ConnConfig
	w   *gorm.DB
	r   *gorm.DB
	now func() time.Time
	// reads counts the read statements run, so a test can assert that a
	// page costs a constant number of queries whatever its size.
	reads atomic.Int64
	probe prober // readiness's own connection (Probe)
	// aside takes the best-effort writes (touches); on SQLite its own
	// connection with a short busy timeout, on PostgreSQL w.
	aside *gorm.DB
}

// Reads returns how many read statements the store has run.
func (s *Store) Reads() int64 { return s.reads.Load() }

func (s *Store) countReads(db *gorm.DB) error {
	count := func(*gorm.DB) { s.reads.Add(1) }
	if err := db.Callback().Query().After("gorm:query").Register("herd:count", count); err != nil {
		return err
	}
	if err := db.Callback().Row().After("gorm:row").Register("herd:count", count); err != nil {
		return err
	}
	return db.Callback().Raw().After("gorm:raw").Register("herd:count", count)
}

// Options tunes Open.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives slow-query and error logs; nil means silent.
	Logger *slog.Logger
}

// Open opens (creating if needed) the SQLite database at path in WAL mode
// and migrates it. The database holds password hashes and session tokens,
// so it is private to the server's user whatever the umask: a directory
// Open creates is 0700, the database and its -wal and -shm files are 0600
// (tightened if an older herd left them looser). A directory that already
// exists keeps its mode, since it is the operator's; one that others may
// enter gets a warning.
func Open(path string, opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := privateDir(filepath.Dir(path), log); err != nil {
		return nil, err
	}
	if err := privateFile(path, true); err != nil {
		return nil, err
	}
	s, err := open(path, opts)
	if err != nil {
		return nil, err
	}
	// SQLite gives these the database's mode; an older herd's may be looser.
	for _, f := range []string{path + "-wal", path + "-shm"} {
		if err := privateFile(f, false); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

// privateDir creates dir 0700, or warns when an existing one lets other
// users in.
func privateDir(dir string, log *slog.Logger) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("store: create data dir: %w", err)
		}
		// MkdirAll's mode passes through the umask.
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("store: create data dir: %w", err)
		}
	case err != nil:
		return fmt.Errorf("store: data dir: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("store: data dir %s is not a directory", dir)
	case fi.Mode().Perm()&0o077 != 0:
		log.Warn("the data directory is open to other users of this machine; herd's own files in it are private, but consider chmod 700",
			"dir", dir, "mode", fmt.Sprintf("%#o", fi.Mode().Perm()))
	}
	return nil
}

// privateFile makes path 0600, creating it first when create is set.
func privateFile(path string, create bool) error {
	if create {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("store: create %s: %w", path, err)
		}
		_ = f.Close()
	}
	if err := os.Chmod(path, 0o600); err != nil && !(errors.Is(err, fs.ErrNotExist) && !create) {
		return fmt.Errorf("store: make %s private: %w", path, err)
	}
	return nil
}

func open(path string, opts Options) (*Store, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	cfg := gormConfig(now)
	w, err := openWriter(sqlite.Open(dsn(path, false)), cfg)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	s := &Store{path: path, w: w, now: now}
	if s.aside, err = openWriter(sqlite.Open(fileDSN(path, asideBusyTimeout, url.Values{"_foreign_keys": {"on"}, "_synchronous": {"NORMAL"}})), cfg); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return s.finishOpen(sqlite.Open(dsn(path, true)), cfg)
}

// asideBusyTimeout bounds how long a best-effort write, a session's last
// sight or a token's last use, waits for SQLite's write lock (and for its
// connection). Such a write is dropped rather than added to a request's
// wait: on the writer's connection it queued behind the writer's retries
// and waited out its own busy timeout before the request's real write
// waited out another, so a request under a lock held elsewhere answered
// in 10–16 s instead of 5 (TestHeldLockAnswersWithinTheBusyTimeout). The
// next request tries the touch again.
const asideBusyTimeout = 100 * time.Millisecond

// touch runs a best-effort write on the aside connection, giving up
// after asideBusyTimeout.
func (s *Store) touch(ctx context.Context, write func(*gorm.DB) error) error {
	if s.pg {
		return write(s.w.WithContext(ctx))
	}
	ctx, cancel := context.WithTimeout(ctx, asideBusyTimeout)
	defer cancel()
	return write(s.aside.WithContext(ctx))
}

// finishOpen migrates the store whose writer is open, then opens the
// readers on dial and registers the read counter.
func (s *Store) finishOpen(dial gorm.Dialector, cfg *gorm.Config) (*Store, error) {
	// Until the readers are open, Close closes the writer alone.
	if err := s.migrate(); err != nil {
		_ = s.Close()
		return nil, err
	}
	r, err := openReaders(dial, cfg)
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	s.r = r
	for _, db := range []*gorm.DB{r, s.w} {
		if err := s.countReads(db); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("store: register query counter: %w", err)
		}
	}
	return s, nil
}

// gormConfig is shared by both pools, so the readers and the writer see
// one clock.
func gormConfig(now func() time.Time) *gorm.Config {
	return &gorm.Config{
		Logger:                 logger.Discard,
		NowFunc:                func() time.Time { return now().UTC() },
		SkipDefaultTransaction: true, // every multi-row write here is already in an explicit transaction
		// No gorm statement cache (PrepareStmt): preparing a statement for
		// the first time outside a transaction waits for a pooled
		// connection while transactions that hold every connection wait
		// for that statement, and the pool hangs for good
		// (go-gorm/gorm#7465, open; it hung `make load-cluster`). pgx
		// caches prepared statements per connection on its own; SQLite
		// prepares a statement in microseconds. The Writer keeps its own
		// prepared statements on its connection.
		TranslateError: true,
	}
}

// openWriter opens the pool of the one writer connection, which is never
// recycled: the Writer's prepared statements and its wal_autocheckpoint
// setting live on it.
func openWriter(dial gorm.Dialector, cfg *gorm.Config) (*gorm.DB, error) {
	w, err := gorm.Open(dial, cfg)
	if err != nil {
		return nil, err
	}
	wdb, err := w.DB()
	if err != nil {
		return nil, err
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	return w, nil
}

// openReaders opens the query-only pool that WAL lets read beside the
// writer.
func openReaders(dial gorm.Dialector, cfg *gorm.Config) (*gorm.DB, error) {
	r, err := gorm.Open(dial, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: open for reading: %w", err)
	}
	rdb, err := r.DB()
	if err != nil {
		return nil, fmt.Errorf("store: open for reading: %w", err)
	}
	rdb.SetMaxOpenConns(8)
	rdb.SetMaxIdleConns(8)
	return r, nil
}

// dsn builds a go-sqlite3 DSN. The driver ignores parameters it does not
// know, so a misspelled one silently loses WAL: TestOpenPragmas checks the
// effective values. _txlock=immediate makes a write transaction take the
// write lock at BEGIN, so it waits on the busy timeout instead of failing
// with SQLITE_BUSY when it upgrades from a read.
// busyTimeout is how long a statement waits for a write lock held by
// another connection or process.
const busyTimeout = 5 * time.Second

func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	// A lock held elsewhere fails a statement after busyTimeout: the writer
	// then retries on its own (storage faults) and a request answers 503.
	q.Set("_foreign_keys", "on")
	q.Set("_synchronous", "NORMAL")
	if readOnly {
		q.Set("_query_only", "1")
	} else {
		q.Set("_txlock", "immediate")
	}
	return fileDSN(path, busyTimeout, q)
}

// fileDSN is the go-sqlite3 DSN of path with params and a busy timeout,
// shared by the pools, the readiness probe and backups. It is a URI, so
// the path is percent-encoded: read as it is, a "#" in a directory's name
// would end the path there (the database would go to a file named after
// the rest, with the umask's mode), a "?" would start the parameters
// (their pragmas lost) and a "%" would be read as an escape.
func fileDSN(path string, busy time.Duration, params url.Values) string {
	params.Set("_busy_timeout", strconv.Itoa(int(busy.Milliseconds())))
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + params.Encode()
}

// allModels is every model the store migrates.
var allModels = []any{&User{}, &Session{}, &APIToken{}, &Thread{}, &Message{}, &Run{}, &RunEvent{}, &UsageEntry{}, &Setting{}, &Instance{}, &Checkpoint{}, &AuditEntry{}, &Identity{}, &LoginFlow{}, &ConsoleEntry{}}

func (s *Store) migrate() error {
	var err error
	if s.pg {
		err = s.migratePostgres()
	} else if err = s.w.AutoMigrate(allModels...); err == nil {
		if err = dropThreadLedgerIndex(s.w); err == nil {
			err = s.migrateSearchSQLite()
		}
	}
	if err == nil {
		err = s.backfillLedgerOwners()
	}
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return nil
}

var errStoreClosed = errors.New("store: closed")

// Close closes both connection pools and the probe's connection.
func (s *Store) Close() error {
	var first error
	// Once syncs with a probe opening its connection, or keeps one from
	// opening after Close.
	s.probe.once.Do(func() { s.probe.err = errStoreClosed })
	if s.probe.db != nil {
		first = s.probe.db.Close()
	}
	for _, db := range []*gorm.DB{s.r, s.w, s.aside} {
		if db == nil {
			continue
		}
		if sqlDB, err := db.DB(); err == nil {
			if err := sqlDB.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// pragma returns the value of a PRAGMA on the writer connection, for tests
// and diagnostics.
func (s *Store) pragma(ctx context.Context, name string) (string, error) {
	var v string
	if err := s.w.WithContext(ctx).Raw("PRAGMA " + name).Scan(&v).Error; err != nil {
		return "", fmt.Errorf("store: pragma %s: %w", name, err)
	}
	return v, nil
}
