package models

import (
	"context"
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
	ms, err := scanRanges[Message](ctx, s, "messages", string(js))
	if err != nil {
		return nil, err
	}
	es, err := scanRanges[RunEvent](ctx, s, "run_events", string(js))
	if err != nil {
		return nil, err
	}
	return mergeRanges(rs, ms, es), nil
}

// scanRanges reads table's rows in the ranges of js.
func scanRanges[T any](ctx context.Context, s *Store, table, js string) ([]T, error) {
	var out []T
	if err := s.r.WithContext(ctx).Raw(s.rangesQuery(table), js).Scan(&out).Error; err != nil {
		return nil, fmt.Errorf("store: read ranges: %s: %w", table, err)
	}
	return out, nil
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
	if s.pg {
		return "SELECT x.* FROM json_to_recordset($1::json) AS r(t text, a bigint, b bigint) " +
			"CROSS JOIN LATERAL (SELECT * FROM " + table + " e WHERE e.thread_id = r.t AND e.seq > r.a AND e.seq <= r.b OFFSET 0) x"
	}
	return "SELECT x.* FROM json_each(?) AS r JOIN " + table + " x ON x.thread_id = r.value->>'t' " +
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
