package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// CopyOptions tunes CopyToPostgres.
type CopyOptions struct {
	// Replace empties the target's herd tables first; without it a target
	// holding any row is refused (ErrTargetNotEmpty).
	Replace bool
	// BatchRows is how many rows one COPY sends (default 5,000).
	BatchRows int
	// Progress, when set, is told each table's rows as they are copied.
	Progress func(table string, copied int64)
}

// TableCopy is one table of a copy: its rows in the source and in the
// target once copied.
type TableCopy struct {
	Table  string
	Source int64
	Target int64
	// Absent says the source has no such table (a herd older than it):
	// nothing to copy.
	Absent bool
}

// CopyReport is what CopyToPostgres copied and verified.
type CopyReport struct {
	Tables []TableCopy
	// Threads is how many threads' last seqs were compared (all of them).
	Threads int
	// Usage is the ledger's total in the source, found equal in the target.
	Usage UsageTotals
	// Sanitized counts text values PostgreSQL would refuse (NUL bytes,
	// invalid UTF-8) that were stored with U+FFFD instead, as herd stores
	// such text on PostgreSQL (docs/DESIGN.md §7).
	Sanitized int64
	// Replaced counts the target's rows deleted first (CopyOptions.Replace).
	Replaced int64
	Elapsed  time.Duration
}

// Rows is the number of rows copied.
func (r CopyReport) Rows() int64 {
	var n int64
	for _, t := range r.Tables {
		n += t.Target
	}
	return n
}

// ErrTargetNotEmpty is returned when the target database holds herd data
// and CopyOptions.Replace is not set.
type ErrTargetNotEmpty struct{ Counts []TableCopy }

func (e *ErrTargetNotEmpty) Error() string {
	var parts []string
	for _, c := range e.Counts {
		if c.Target > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.Target, c.Table))
		}
	}
	return "the target database already holds herd data (" + strings.Join(parts, ", ") + ")"
}

// ErrVerify is returned when the copy does not match its source; the
// transaction is rolled back, so the target is left as it was.
var ErrVerify = errors.New("the copy does not match the source")

// migrationTables are the tables a copy carries: every model the store
// migrates (allModels), so a table added to the store is copied without
// a change here. TestCopyCoversEveryModel pins it.
func migrationTables(db *gorm.DB) ([]*schema.Schema, error) {
	out := make([]*schema.Schema, 0, len(allModels))
	for _, m := range allModels {
		s, err := schema.Parse(m, &sync.Map{}, db.NamingStrategy)
		if err != nil {
			return nil, fmt.Errorf("parse %T: %w", m, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// Source is a SQLite database opened read-only to be copied.
type Source struct{ db *gorm.DB }

// Close closes the source's connections.
func (s *Source) Close() error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// OpenSQLiteSource opens the SQLite database at path read-only for a copy:
// it never creates or changes it, and refuses a file that is not a herd
// database.
func OpenSQLiteSource(path string) (*Source, error) {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("no database at %s", path)
	case err != nil:
		return nil, err
	case !info.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a database file", path)
	}
	db, err := gorm.Open(sqlite.Open(readOnlyDSN(path)), gormConfig(time.Now))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	var n int
	if err := db.Raw("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'messages'").Scan(&n).Error; err != nil {
		closeGorm(db)
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if n == 0 {
		closeGorm(db)
		return nil, fmt.Errorf("%s is not a herd database", path)
	}
	return &Source{db: db}, nil
}

func closeGorm(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		_ = sqlDB.Close()
	}
}

// CopyToPostgres copies every herd table of the SQLite database src (see
// OpenSQLiteSource) into s, a PostgreSQL store, and verifies the copy: the
// rows of every table, every thread's last seq and the highest seq of its
// records, and the usage ledger's totals. It all happens in one
// transaction on the target, in batches of COPY, so a copy that fails or
// does not verify leaves the target as it was. Explicit ids are copied as
// they are, then the sequences behind auto-increment columns are moved
// past them. The source is read in one snapshot.
func (s *Store) CopyToPostgres(ctx context.Context, src *Source, opts CopyOptions) (CopyReport, error) {
	if !s.pg {
		return CopyReport{}, errors.New("store: copy: the target is not PostgreSQL")
	}
	if opts.BatchRows <= 0 {
		opts.BatchRows = 5000
	}
	start := time.Now()
	tables, err := migrationTables(s.w)
	if err != nil {
		return CopyReport{}, fmt.Errorf("store: copy: %w", err)
	}
	// One snapshot of the source (SQLite's read transaction).
	stx := src.db.WithContext(ctx).Begin(&sql.TxOptions{ReadOnly: true})
	if stx.Error != nil {
		return CopyReport{}, fmt.Errorf("store: copy: read the source: %w", stx.Error)
	}
	defer stx.Rollback()
	var rep CopyReport
	err = s.onPgConn(ctx, func(conn *pgx.Conn) error {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		c := &copier{ctx: ctx, src: stx, dst: tx, opts: opts, rep: &rep}
		if err := c.run(tables); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	rep.Elapsed = time.Since(start)
	if err != nil {
		return rep, fmt.Errorf("store: copy: %w", err)
	}
	return rep, nil
}

// onPgConn runs f on the writer's connection as pgx sees it (COPY is not
// in database/sql).
func (s *Store) onPgConn(ctx context.Context, f func(*pgx.Conn) error) error {
	db, err := s.w.DB()
	if err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		return f(sc.Conn())
	})
}

// copier is one copy in progress.
type copier struct {
	ctx  context.Context
	src  *gorm.DB
	dst  pgx.Tx
	opts CopyOptions
	rep  *CopyReport
}

func (c *copier) run(tables []*schema.Schema) error {
	if err := c.checkEmpty(tables); err != nil {
		return err
	}
	for _, t := range tables {
		tc, err := c.table(t)
		if err != nil {
			return fmt.Errorf("copy %s: %w", t.Table, err)
		}
		c.rep.Tables = append(c.rep.Tables, tc)
		if err := c.fixSequences(t); err != nil {
			return fmt.Errorf("copy %s: move its id sequence past the copied ids: %w", t.Table, err)
		}
	}
	return c.verify()
}

// checkEmpty refuses a target that holds herd data, or with Replace
// empties it. Counting first names what is there in the refusal.
func (c *copier) checkEmpty(tables []*schema.Schema) error {
	var counts []TableCopy
	var total int64
	for _, t := range tables {
		var n int64
		if err := c.dst.QueryRow(c.ctx, "SELECT count(*) FROM "+quote(t.Table)).Scan(&n); err != nil {
			return fmt.Errorf("count the target's %s: %w", t.Table, err)
		}
		counts = append(counts, TableCopy{Table: t.Table, Target: n})
		total += n
	}
	if total == 0 {
		return nil
	}
	if !c.opts.Replace {
		return &ErrTargetNotEmpty{Counts: counts}
	}
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = quote(t.Table)
	}
	if _, err := c.dst.Exec(c.ctx, "TRUNCATE "+strings.Join(names, ", ")+" RESTART IDENTITY"); err != nil {
		return fmt.Errorf("empty the target: %w", err)
	}
	c.rep.Replaced = total
	return nil
}

// table copies one table: the columns both sides have (an older source
// lacks newer columns, which take their defaults), streamed from the
// source and sent in batches of COPY.
func (c *copier) table(t *schema.Schema) (TableCopy, error) {
	tc := TableCopy{Table: t.Table}
	if !c.src.Migrator().HasTable(t.Table) {
		tc.Absent = true
		return tc, nil
	}
	fields, err := c.sourceFields(t)
	if err != nil {
		return tc, err
	}
	cols := make([]string, len(fields))
	for i, f := range fields {
		cols[i] = f.DBName
	}
	rows, err := c.src.Table(t.Table).Select(cols).Order(orderBy(t)).Rows()
	if err != nil {
		return tc, fmt.Errorf("read the source: %w", err)
	}
	defer rows.Close()
	batch := make([][]any, 0, c.opts.BatchRows)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		n, err := c.dst.CopyFrom(c.ctx, pgx.Identifier{t.Table}, cols, pgx.CopyFromRows(batch))
		if err != nil {
			return err
		}
		tc.Target += n
		batch = batch[:0]
		if c.opts.Progress != nil {
			c.opts.Progress(t.Table, tc.Target)
		}
		return nil
	}
	// Each column scans straight into its field of a fresh row, which
	// keeps the model's own types (JSON, times, booleans stored as 0 and 1).
	dests := make([]any, len(fields))
	for rows.Next() {
		row := reflect.New(t.ModelType).Elem()
		for i, f := range fields {
			dests[i] = row.FieldByIndex(f.StructField.Index).Addr().Interface()
		}
		if err := rows.Scan(dests...); err != nil {
			return tc, fmt.Errorf("read row %d: %w", tc.Source+1, err)
		}
		tc.Source++
		batch = append(batch, c.values(fields, row))
		if len(batch) == c.opts.BatchRows {
			if err := flush(); err != nil {
				return tc, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return tc, fmt.Errorf("read the source: %w", err)
	}
	return tc, flush()
}

// sourceFields are t's fields whose columns the source table has.
func (c *copier) sourceFields(t *schema.Schema) ([]*schema.Field, error) {
	types, err := c.src.Migrator().ColumnTypes(t.Table)
	if err != nil {
		return nil, fmt.Errorf("read the source's columns: %w", err)
	}
	have := map[string]bool{}
	for _, ct := range types {
		have[ct.Name()] = true
	}
	var out []*schema.Field
	for _, f := range t.Fields {
		if f.DBName != "" && have[f.DBName] {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the source table has none of its columns")
	}
	return out, nil
}

// orderBy orders rows by primary key, so batches (and ids) go in order.
func orderBy(t *schema.Schema) string {
	keys := make([]string, len(t.PrimaryFields))
	for i, f := range t.PrimaryFields {
		keys[i] = quote(f.DBName)
	}
	if len(keys) == 0 {
		return "rowid"
	}
	return strings.Join(keys, ", ")
}

// values are a row's column values as pgx encodes them, text made
// storable in PostgreSQL as the Writer makes it (pgText).
func (c *copier) values(fields []*schema.Field, row reflect.Value) []any {
	out := make([]any, len(fields))
	for i, f := range fields {
		v, _ := f.ValueOf(c.ctx, row)
		switch x := v.(type) {
		case string:
			v = c.text(x)
		case JSON:
			if len(x) > 0 {
				v = c.text(string(x))
			} else {
				v = nil
			}
		}
		out[i] = v
	}
	return out
}

func (c *copier) text(s string) string {
	clean := pgText(s).(string)
	if clean != s {
		c.rep.Sanitized++
	}
	return clean
}

// fixSequences moves the sequence behind each auto-increment column of t
// past the highest id copied, so the next row PostgreSQL numbers does not
// collide with a copied one.
func (c *copier) fixSequences(t *schema.Schema) error {
	for _, f := range t.Fields {
		if !f.AutoIncrement || f.DBName == "" {
			continue
		}
		q := fmt.Sprintf("SELECT setval(pg_get_serial_sequence('%s', '%s'), COALESCE(MAX(%s), 0) + 1, false) FROM %s",
			quote(t.Table), f.DBName, quote(f.DBName), quote(t.Table))
		if _, err := c.dst.Exec(c.ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// threadSeqs is, per thread, its last_seq and the highest seq among its
// messages and events: the two must agree on both sides.
const threadSeqs = `SELECT t.id, t.last_seq,
	COALESCE((SELECT MAX(m.seq) FROM messages m WHERE m.thread_id = t.id), 0),
	COALESCE((SELECT MAX(e.seq) FROM run_events e WHERE e.thread_id = t.id), 0)
	FROM threads t`

const usageSums = `SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), COALESCE(SUM(total_tokens), 0),
	COALESCE(SUM(cache_read_tokens), 0), COUNT(*) FROM usage_entries`

// verify compares the copy with its source inside the copy's transaction:
// the rows of each table, every thread's seqs and the ledger's totals.
func (c *copier) verify() error {
	var problems []string
	for _, t := range c.rep.Tables {
		var n int64
		if err := c.dst.QueryRow(c.ctx, "SELECT count(*) FROM "+quote(t.Table)).Scan(&n); err != nil {
			return fmt.Errorf("verify %s: %w", t.Table, err)
		}
		if n != t.Source {
			problems = append(problems, fmt.Sprintf("%s: %d rows in the source, %d in the target", t.Table, t.Source, n))
		}
	}
	srcSeqs, err := c.sourceSeqs()
	if err != nil {
		return err
	}
	dstSeqs, err := c.targetSeqs()
	if err != nil {
		return err
	}
	problems = append(problems, compareSeqs(srcSeqs, dstSeqs)...)
	c.rep.Threads = len(srcSeqs)
	su, du, err := c.usage()
	if err != nil {
		return err
	}
	if su != du {
		problems = append(problems, fmt.Sprintf("usage ledger: %+v in the source, %+v in the target", su, du))
	}
	c.rep.Usage = su
	if len(problems) > 0 {
		if len(problems) > 10 {
			problems = append(problems[:10], fmt.Sprintf("and %d more", len(problems)-10))
		}
		return fmt.Errorf("%w: %s", ErrVerify, strings.Join(problems, "; "))
	}
	return nil
}

// seqs are a thread's last_seq and the highest seq of its records.
type seqs struct{ last, records int64 }

func (c *copier) sourceSeqs() (map[string]seqs, error) {
	rows, err := c.src.Raw(threadSeqs).Rows()
	if err != nil {
		return nil, fmt.Errorf("verify: read the source's seqs: %w", err)
	}
	defer rows.Close()
	return scanSeqs(rows, "source")
}

func (c *copier) targetSeqs() (map[string]seqs, error) {
	rows, err := c.dst.Query(c.ctx, threadSeqs)
	if err != nil {
		return nil, fmt.Errorf("verify: read the target's seqs: %w", err)
	}
	defer rows.Close()
	return scanSeqs(rows, "target")
}

// scanSeqs reads threadSeqs' rows, from database/sql or pgx.
func scanSeqs(rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}, side string) (map[string]seqs, error) {
	out := map[string]seqs{}
	for rows.Next() {
		var id string
		var last, m, e int64
		if err := rows.Scan(&id, &last, &m, &e); err != nil {
			return nil, fmt.Errorf("verify: read the %s's seqs: %w", side, err)
		}
		out[id] = seqs{last, max(m, e)}
	}
	return out, rows.Err()
}

// compareSeqs names every thread whose seqs differ, in id order.
func compareSeqs(src, dst map[string]seqs) []string {
	var out []string
	for id, s := range src {
		d, ok := dst[id]
		switch {
		case !ok:
			out = append(out, "thread "+id+" is missing")
		case d != s:
			out = append(out, fmt.Sprintf("thread %s: last seq %d (records to %d) in the source, %d (records to %d) in the target", id, s.last, s.records, d.last, d.records))
		}
	}
	sort.Strings(out)
	return out
}

func (c *copier) usage() (src, dst UsageTotals, err error) {
	if err := c.src.Raw(usageSums).Row().Scan(&src.InputTokens, &src.OutputTokens, &src.TotalTokens, &src.CacheReadTokens, &src.Calls); err != nil {
		return src, dst, fmt.Errorf("verify: sum the source's ledger: %w", err)
	}
	if err := c.dst.QueryRow(c.ctx, usageSums).Scan(&dst.InputTokens, &dst.OutputTokens, &dst.TotalTokens, &dst.CacheReadTokens, &dst.Calls); err != nil {
		return src, dst, fmt.Errorf("verify: sum the target's ledger: %w", err)
	}
	return src, dst, nil
}

// quote quotes a PostgreSQL identifier.
func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }
