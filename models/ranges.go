package models

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// SeqRange is the records of one thread with After < seq ≤ Upto.
type SeqRange struct {
	ThreadID    string
	After, Upto int64
}

// InRanges returns the records (messages and events) of several threads'
// seq ranges, each thread's in sequence order, the threads in the order
// of rs: the read-back of several instances' commits in one go
// (server.Cluster), two queries however many threads it covers, where a
// Since per thread took four round trips each and one pooled connection
// apiece.
//
// Every seq up to a range's Upto must already be committed (the cluster
// reads back what a notice announced after its commit): then the two
// tables may be read outside a transaction, since no later commit can add
// rows inside the ranges. The ranges' rows are not limited: a caller
// bounds them.
func (s *Store) InRanges(ctx context.Context, rs []SeqRange) ([]Record, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	type rng struct {
		T string `json:"t"`
		A int64  `json:"a"`
		B int64  `json:"b"`
	}
	list := make([]rng, len(rs))
	for i, r := range rs {
		list[i] = rng{T: r.ThreadID, A: r.After, B: r.Upto}
	}
	js, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	var ms []Message
	err = s.readRanges(ctx, "messages", string(js), func(rows *sql.Rows) error {
		ms = append(ms, Message{})
		m := &ms[len(ms)-1]
		return rows.Scan(&m.ID, &m.ThreadID, &m.Seq, &m.RunID, &m.Type, &m.Content, &m.ToolCalls, &m.ToolCallID,
			&m.Name, &m.AdditionalKwargs, &m.Usage, &m.ModelName, &m.CreatedAt)
	})
	if err != nil {
		return nil, err
	}
	var es []RunEvent
	err = s.readRanges(ctx, "run_events", string(js), func(rows *sql.Rows) error {
		es = append(es, RunEvent{})
		e := &es[len(es)-1]
		return rows.Scan(&e.ID, &e.ThreadID, &e.Seq, &e.RunID, &e.EventType, &e.Category, &e.TaskID, &e.Content, &e.Metadata, &e.CreatedAt)
	})
	if err != nil {
		return nil, err
	}
	return mergeRanges(rs, ms, es), nil
}

// rangeColumns are the columns InRanges reads of each table, in the order
// it scans them; a text column that may be NULL reads as "", as gorm
// reads it into a string.
var rangeColumns = map[string][]string{
	"messages": {"id", "thread_id", "seq", "COALESCE(x.run_id, '')", "type", "content", "tool_calls",
		"COALESCE(x.tool_call_id, '')", "COALESCE(x.name, '')", "additional_kwargs", "usage", "COALESCE(x.model_name, '')", "created_at"},
	"run_events": {"id", "thread_id", "seq", "COALESCE(x.run_id, '')", "event_type", "category",
		"COALESCE(x.task_id, '')", "content", "metadata", "created_at"},
}

// readRanges runs table's ranges query and scans each row. It reads
// through database/sql, not gorm, whose reflection took half the time of
// a read-back, and every instance of a cluster reads back every record
// the others commit (docs/PERFORMANCE.md §Several instances).
func (s *Store) readRanges(ctx context.Context, table, js string, scan func(*sql.Rows) error) error {
	db, err := s.r.DB()
	if err != nil {
		return err
	}
	s.reads.Add(1)
	rows, err := db.QueryContext(ctx, s.rangesQuery(table), js)
	if err != nil {
		return fmt.Errorf("store: read ranges: %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("store: read ranges: %s: %w", table, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: read ranges: %s: %w", table, err)
	}
	return nil
}

// rangesQuery selects table's rows in the ranges a JSON array
// [{"t":thread,"a":after,"b":upto}] names: one statement text per table
// and driver, so the prepared statement is reused whatever the number of
// ranges, and an index range scan per range.
//
// On PostgreSQL each range is a LATERAL subquery that OFFSET 0 keeps from
// being flattened into a join: the planner cannot see how many ranges the
// array holds (it guesses 100), and as a plain join it hashed the array
// and scanned the whole table for every read-back while the table was
// small — 1.8 million rows visited in one make load-cluster run — and
// would again whenever its guess tips that way
// (TestInRangesScansOnlyTheRanges).
func (s *Store) rangesQuery(table string) string {
	return rangeQueries[rangeKey{table, s.pg}]
}

type rangeKey struct {
	table string
	pg    bool
}

// rangeQueries are rangesQuery's statements, built once.
var rangeQueries = func() map[rangeKey]string {
	m := map[rangeKey]string{}
	for table := range rangeColumns {
		for _, pg := range []bool{false, true} {
			m[rangeKey{table, pg}] = buildRangesQuery(table, pg)
		}
	}
	return m
}()

func buildRangesQuery(table string, pg bool) string {
	cols := make([]string, len(rangeColumns[table]))
	for i, c := range rangeColumns[table] {
		if !strings.Contains(c, "(") {
			c = "x." + c
		}
		cols[i] = c
	}
	sel := "SELECT " + strings.Join(cols, ", ")
	if pg {
		return sel + " FROM json_to_recordset($1::json) AS r(t text, a bigint, b bigint) " +
			"CROSS JOIN LATERAL (SELECT * FROM " + table + " e WHERE e.thread_id = r.t AND e.seq > r.a AND e.seq <= r.b OFFSET 0) x"
	}
	return sel + " FROM json_each(?) AS r JOIN " + table + " x ON x.thread_id = r.value->>'t' " +
		"AND x.seq > r.value->>'a' AND x.seq <= r.value->>'b'"
}

// mergeRanges orders ms and es by the threads' order in rs, then by seq.
func mergeRanges(rs []SeqRange, ms []Message, es []RunEvent) []Record {
	rank := make(map[string]int, len(rs))
	for i, r := range rs {
		if _, ok := rank[r.ThreadID]; !ok {
			rank[r.ThreadID] = i
		}
	}
	out := make([]Record, 0, len(ms)+len(es))
	for i := range ms {
		out = append(out, Record{Message: &ms[i]})
	}
	for i := range es {
		out = append(out, Record{Event: &es[i]})
	}
	slices.SortFunc(out, func(a, b Record) int {
		if d := rank[a.ThreadID()] - rank[b.ThreadID()]; d != 0 {
			return d
		}
		if d := strings.Compare(a.ThreadID(), b.ThreadID()); d != 0 {
			return d
		}
		return int(a.Seq() - b.Seq())
	})
	return out
}
