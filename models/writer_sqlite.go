package models

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"time"

	"github.com/mattn/go-sqlite3"
)

// sqliteTx is tx on SQLite, run on the driver's connection itself with
// statements prepared on it (stmtCache). Through database/sql every
// statement of a transaction was wrapped for it (Tx.Stmt) and every
// argument list converted into a new array: a sixth of the bytes a task
// hand-off allocated, and the hand-off's p99 is the garbage collector's
// (BenchmarkTaskHandoff, docs/PERFORMANCE.md §1).
func (w *Writer) sqliteTx(recs []Record, now time.Time) (gone map[string]bool, err error) {
	err = w.onConn(func(ctx context.Context, dc any) error {
		c, ok := dc.(*sqlite3.SQLiteConn)
		if !ok {
			return fmt.Errorf("writer: a %T is no SQLite connection", dc)
		}
		if err := w.stmts.ready(c); err != nil {
			return err
		}
		dtx, err := c.BeginTx(ctx, driver.TxOptions{})
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		if gone, err = w.sqliteCommit(liteTx{ctx: ctx, c: w.stmts}, recs, now); err != nil {
			_ = dtx.Rollback()
			return err
		}
		if err := dtx.Commit(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return nil
	})
	return gone, err
}

// onConn runs f on the driver connection of the writer's pool: the one
// connection, taken from the pool until f returns.
func (w *Writer) onConn(f func(ctx context.Context, dc any) error) error {
	ctx := context.Background()
	conn, err := w.stmts.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error { return f(ctx, dc) })
}

// sqliteCommit reserves the seqs and writes the rows in tx.
func (w *Writer) sqliteCommit(tx liteTx, recs []Record, now time.Time) (map[string]bool, error) {
	next, gone, err := w.reserveSeqs(tx, recs, now)
	if err != nil {
		return nil, err
	}
	rows := placeRecords(recs, next, gone, now)
	// Runs are written before the log rows, in the order they came.
	t := w.stmts.tables.runs
	for _, r := range rows.runs {
		if _, err := tx.exec(w.stmts.inserts[insertKey{t.into, 1}], t.appendRow(nil, r)); err != nil {
			return nil, fmt.Errorf("upsert run: %w", err)
		}
	}
	return gone, w.insertLog(tx, rows)
}

// liteTx runs the cache's statements in the transaction open on their
// connection.
type liteTx struct {
	ctx context.Context
	c   *stmtCache
}

// values makes args the driver's values in the cache's buffer, converted
// as database/sql would convert them when one is not a driver value
// already (a named type, a Valuer).
func (t liteTx) values(args []any) ([]driver.NamedValue, error) {
	named := t.c.named[:0]
	for i, a := range args {
		if !driver.IsValue(a) {
			v, err := driver.DefaultParameterConverter.ConvertValue(a)
			if err != nil {
				return nil, fmt.Errorf("argument %d: %w", i+1, err)
			}
			a = v
		}
		named = append(named, driver.NamedValue{Ordinal: i + 1, Value: a})
	}
	t.c.named = named
	return named, nil
}

// done empties the buffer values filled, so that it keeps no row alive.
func (t liteTx) done() {
	clear(t.c.named)
	t.c.named = t.c.named[:0]
}

func (t liteTx) exec(st driver.Stmt, args []any) (driver.Result, error) {
	named, err := t.values(args)
	defer t.done()
	if err != nil {
		return nil, err
	}
	return st.(driver.StmtExecContext).ExecContext(t.ctx, named)
}

// queryInt runs st for the one integer it returns: sql.ErrNoRows when it
// returns no row.
func (t liteTx) queryInt(st driver.Stmt, args ...any) (int64, error) {
	named, err := t.values(args)
	defer t.done()
	if err != nil {
		return 0, err
	}
	rows, err := st.(driver.StmtQueryContext).QueryContext(t.ctx, named)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	switch err := rows.Next(dest); {
	case err == io.EOF:
		return 0, sql.ErrNoRows
	case err != nil:
		return 0, err
	}
	n, ok := dest[0].(int64)
	if !ok {
		return 0, fmt.Errorf("a %T where an integer was expected", dest[0])
	}
	return n, nil
}
