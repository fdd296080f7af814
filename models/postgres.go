package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// OpenPostgres opens the PostgreSQL database dsn names (a libpq URL or
// key=value string) and migrates it. The store is laid out as on SQLite: one
// writer connection, which the Writer's sequence reservation and group
// commit run on, and a pool of readers. Sessions run in UTC, so dates
// computed in SQL (the usage history's days) are UTC days as on SQLite.
func OpenPostgres(dsn string, opts Options) (*Store, error) {
	cc, err := pgConnConfig(dsn)
	if err != nil {
		return nil, err
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	cfg := gormConfig(now)
	dial := func() gorm.Dialector {
		return postgres.New(postgres.Config{Conn: stdlib.OpenDB(*cc, stdlib.OptionAfterConnect(utcTimes))})
	}
	// gorm.Open pings: a server that cannot be reached fails here.
	w, err := openWriter(dial(), cfg)
	if err != nil {
		return nil, fmt.Errorf("store: open PostgreSQL database %s: %w", pgName(cc), err)
	}
	s := &Store{pg: true, name: pgName(cc), cc: cc, w: w, now: now}
	return s.finishOpen(dial(), cfg)
}

// utcTimes makes a connection read timestamptz values as UTC times, as
// SQLite's driver does, rather than in the server process's local zone.
func utcTimes(_ context.Context, conn *pgx.Conn) error {
	conn.TypeMap().RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
	return nil
}

// pgConnConfig parses dsn; errors never echo it, since it may hold a
// password.
func pgConnConfig(dsn string) (*pgx.ConnConfig, error) {
	if strings.TrimSpace(dsn) == "" {
		return nil, errors.New("store: database.dsn is empty; set it (or HERD_DATABASE_DSN) to a PostgreSQL connection string")
	}
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: database.dsn is not a valid PostgreSQL connection string: %w", err)
	}
	if _, ok := cc.RuntimeParams["timezone"]; !ok {
		cc.RuntimeParams["timezone"] = "UTC"
	}
	if _, ok := cc.RuntimeParams["application_name"]; !ok {
		cc.RuntimeParams["application_name"] = "herd"
	}
	// herd never leaves a transaction open between statements for long:
	// a process stopped inside one (SIGSTOP, a frozen VM) would hold its
	// runs' locks, and another instance's takeover with them (§14).
	if _, ok := cc.RuntimeParams["idle_in_transaction_session_timeout"]; !ok {
		cc.RuntimeParams["idle_in_transaction_session_timeout"] = "5000"
	}
	return cc, nil
}

// pgName names a database for messages: user@host:port/db, no password.
func pgName(cc *pgx.ConnConfig) string {
	return fmt.Sprintf("%s@%s:%d/%s", cc.User, cc.Host, cc.Port, cc.Database)
}

// migrateLock names the migration's advisory lock. A lock is keyed by
// the schema as well, so that several herds (or tests) in separate
// schemas of one database do not contend.
const migrateLock = "herd migrate "

func lockKey(name string) string {
	return "hashtext('" + name + "' || current_schema())"
}

// migratePostgres runs AutoMigrate in one transaction that first takes a
// transaction-scoped advisory lock: herds started together against one
// database migrate one after the other (the later ones find nothing left
// to do), and PostgreSQL's transactional DDL means a migration that fails
// halfway leaves the schema as it was. The channel's key is made here
// too, so the herds agree on it (createChannelKey).
func (s *Store) migratePostgres() error {
	return s.w.Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("SELECT pg_advisory_xact_lock(" + lockKey(migrateLock) + ")").Error; err != nil {
			return fmt.Errorf("take the migration lock: %w", err)
		}
		if err := tx.AutoMigrate(allModels...); err != nil {
			return err
		}
		if err := dropThreadLedgerIndex(tx); err != nil {
			return err
		}
		if err := migrateSearchPostgres(tx); err != nil {
			return err
		}
		return createChannelKey(tx)
	})
}

// Name names the store's database for messages: the SQLite file's path,
// or PostgreSQL's user@host:port/database (never the password).
func (s *Store) Name() string {
	if s.pg {
		return s.name
	}
	return s.path
}

// GormDBDataType stores JSON as text on PostgreSQL (a []byte would be
// bytea); SQLite keeps the type its databases were created with.
func (JSON) GormDBDataType(db *gorm.DB, _ *schema.Field) string {
	if db.Name() == "postgres" {
		return "text"
	}
	return ""
}

// rebind turns the ? placeholders of q into PostgreSQL's $1, $2, …; the
// Writer's statements hold no literal question marks.
func rebind(q string) string {
	var b strings.Builder
	b.Grow(len(q) + len(q)/4)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] != '?' {
			b.WriteByte(q[i])
			continue
		}
		n++
		fmt.Fprintf(&b, "$%d", n)
	}
	return b.String()
}

// pgText makes v storable in a PostgreSQL text column, which refuses NUL
// bytes and invalid UTF-8 that SQLite keeps: a tool's output may hold
// either, and a record the database refuses would be lost. The checks
// cost a scan of the string; a clean one is returned as is.
func pgText(v any) any {
	s, ok := v.(string)
	if !ok || (utf8.ValidString(s) && strings.IndexByte(s, 0) < 0) {
		return v
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// txOptions are the options of a read transaction that must see one
// snapshot: SQLite's transactions always do; PostgreSQL's default (read
// committed) takes a snapshot per statement.
func (s *Store) snapshotTx() *sql.TxOptions {
	if s.pg {
		return &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
	}
	return nil
}
