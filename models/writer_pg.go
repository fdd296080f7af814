package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// pgTx is tx on PostgreSQL: the same statements in two round trips. Sent
// one by one, as database/sql sends them, a commit cost a round trip per
// thread's seq reservation, per run upsert and per INSERT chunk, plus
// BEGIN and COMMIT: ~10 ms for a commit of 27 records under make
// load-cluster, where every round trip waits for PostgreSQL's process to
// be scheduled. pgx pipelines a batch of statements into one round trip,
// so here BEGIN and the reservations go in one, and the rows (which need
// the reserved seqs) and COMMIT in the second (docs/PERFORMANCE.md
// §Several instances).
func (w *Writer) pgTx(recs []Record, now time.Time) (gone map[string]bool, err error) {
	if w.stmts.err != nil {
		return nil, fmt.Errorf("writer set-up: %w", w.stmts.err)
	}
	// A failure can leave the transaction open; pgx's database/sql
	// driver then discards the connection when the pool takes it back
	// (stdlib.Conn.ResetSession), and the next commit gets a new one.
	err = w.onConn(func(ctx context.Context, dc any) error {
		var err error
		gone, err = w.pgCommit(ctx, dc.(*stdlib.Conn).Conn(), recs, now)
		return err
	})
	return gone, err
}

// pgCommit reserves the seqs, writes the rows and commits on c.
func (w *Writer) pgCommit(ctx context.Context, c *pgx.Conn, recs []Record, now time.Time) (map[string]bool, error) {
	order, counts := seqCounts(recs)
	next := make(map[string]int64, len(order))
	var gone map[string]bool
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	// The fence goes in the same round trip: it locks the batch's runs
	// first, and a batch with a run this instance no longer owns is
	// rolled back before anything of it is written (FencedError).
	var (
		f     Fence
		runs  []string
		owned = map[string]bool{}
	)
	if w.opts.Fence != nil {
		f = w.opts.Fence()
		runs = recordRuns(recs)
	}
	if len(runs) > 0 {
		b.Queue(fenceRunsSQL, runs, f.Instance, f.Epoch).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return err
				}
				owned[id] = true
			}
			return rows.Err()
		})
	}
	for _, id := range order {
		b.Queue(w.stmts.pgReserve, counts[id], now, id).QueryRow(func(row pgx.Row) error {
			var last int64
			err := row.Scan(&last)
			if errors.Is(err, pgx.ErrNoRows) {
				if gone == nil {
					gone = map[string]bool{}
				}
				gone[id] = true
				return nil
			}
			if err != nil {
				return fmt.Errorf("reserve seq: %w", err)
			}
			next[id] = last - counts[id] + 1
			return nil
		})
	}
	if err := c.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	if len(owned) < len(runs) {
		fe := &FencedError{}
		for _, id := range runs {
			if !owned[id] {
				fe.Runs = append(fe.Runs, id)
			}
		}
		if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
			return nil, err
		}
		return nil, fe
	}
	rows := placeRecords(recs, next, gone, now)
	b = &pgx.Batch{}
	t := w.stmts.tables
	for _, r := range rows.runs {
		b.Queue(w.stmts.pgInserts[insertKey{t.runs.into, 1}], t.runs.appendRow(nil, r)...)
	}
	queueRows(b, w.stmts.pgInserts, t.messages, rows.msgs, nil)
	queueRows(b, w.stmts.pgInserts, t.events, rows.events, func(chunk []*RunEvent) func(pgx.Rows) error {
		return func(rs pgx.Rows) error { return setEventIDs(rs, chunk) }
	})
	queueRows(b, w.stmts.pgInserts, t.usage, rows.usage, nil)
	queueRows(b, w.stmts.pgInserts, t.checkpoints, rows.ckpts, nil)
	for _, id := range rows.ended {
		b.Queue(w.stmts.pgDropCheckpoints, id)
	}
	b.Queue("COMMIT").Exec(func(tag pgconn.CommandTag) error {
		// COMMIT of a transaction that failed answers ROLLBACK, no error.
		if tag.String() != "COMMIT" {
			return errors.New("commit: the transaction was rolled back")
		}
		return nil
	})
	if err := c.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return gone, nil
}

// queueRows queues rows' multi-row INSERTs; scan, when set, reads what
// each chunk's INSERT returns.
func queueRows[T any](b *pgx.Batch, queries map[insertKey]string, t insertTable, rows []T, scan func([]T) func(pgx.Rows) error) {
	_ = eachChunk(len(rows), func(lo, n int) error {
		chunk := rows[lo : lo+n]
		q := b.Queue(queries[insertKey{t.into, n}], appendRows(t, nil, chunk)...)
		if scan != nil {
			q.Query(scan(chunk))
		}
		return nil
	})
}

// rowScanner is what setEventIDs reads: pgx's rows (or database/sql's).
type rowScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// setEventIDs reads the (id, thread_id, seq) rows of an event INSERT …
// RETURNING and gives each event of chunk its id. PostgreSQL makes no
// promise about the order a sequence serves one INSERT's rows in, so a
// row is matched by the thread and seq that identify it.
func setEventIDs(rows rowScanner, chunk []*RunEvent) error {
	type key struct {
		thread string
		seq    int64
	}
	byKey := make(map[key]*RunEvent, len(chunk))
	for _, e := range chunk {
		byKey[key{e.ThreadID, e.Seq}] = e
	}
	n := 0
	for rows.Next() {
		var (
			k  key
			id int64
		)
		if err := rows.Scan(&id, &k.thread, &k.seq); err != nil {
			return err
		}
		if e := byKey[k]; e != nil {
			e.ID = id
			n++
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n != len(chunk) {
		return fmt.Errorf("%d event ids returned for %d rows", n, len(chunk))
	}
	return nil
}

// pgQueries sets the statements pgTx sends; pgx prepares each on the
// connection the first time and keeps it in its statement cache.
func (c *stmtCache) pgQueries() {
	c.pgReserve = rebind(reserveSeqSQL)
	c.pgInserts = map[insertKey]string{}
	for _, t := range []insertTable{c.tables.messages, c.tables.events, c.tables.usage, c.tables.checkpoints} {
		for n := 1; n <= maxInsertRows; n *= 2 {
			c.pgInserts[insertKey{t.into, n}] = t.query(n)
		}
	}
	c.pgDropCheckpoints = rebind(deleteCheckpointsSQL)
	c.pgInserts[insertKey{c.tables.runs.into, 1}] = c.tables.runs.query(1)
}
