package models

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Benchmark shape (docs/PERFORMANCE.md, "Event writer throughput").
const (
	benchRows      = 100_000 // subagent.step rows per iteration
	benchProducers = 8       // goroutines calling Enqueue, one run (thread) each
)

// BenchmarkWriterThroughput measures subagent.step rows per second
// committed through the Writer (group commit, sequence assignment,
// OnCommit) against a hand-written batched insert of the same rows with
// database/sql on the same connection settings, side by side in each
// iteration so the ratio is not skewed by a noisy machine drifting between
// runs. Each side gets a fresh database file.
//
// Metrics: writer-rows/s, raw-rows/s, writer/raw (the ratio) and
// rows/tx (the Writer's mean transaction size; the raw side uses its largest).
//
// It runs on each driver; PostgreSQL's is HERD_TEST_POSTGRES_DSN's server
// (or a throwaway one, fsync off: internal/pgtest), each side in a fresh
// schema.
func BenchmarkWriterThroughput(b *testing.B) {
	for _, d := range drivers {
		b.Run(d.name, func(b *testing.B) { benchWriterThroughput(b, d) })
	}
}

func benchWriterThroughput(b *testing.B, d dbDriver) {
	ctx := context.Background()
	var writerDur, rawDur time.Duration
	var txs, txRows int
	for range b.N {
		b.StopTimer()
		ws, threads := benchStore(b, d)
		recs := benchStepRows(threads, benchRows)
		var (
			mu      sync.Mutex
			batches []int
		)
		w := ws.NewWriter(WriterOptions{OnBatch: func(st BatchStats) {
			if st.Err != nil {
				b.Errorf("writer batch failed: %v", st.Err)
			}
			mu.Lock()
			batches = append(batches, st.Records)
			mu.Unlock()
		}})
		// The raw side gets the checkpoint setting the Writer runs with.
		var autoCheckpoint string
		if !ws.pg {
			var err error
			if autoCheckpoint, err = ws.pragma(ctx, "wal_autocheckpoint"); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()

		writerDur += enqueueAll(b, w, recs)

		b.StopTimer()
		w.Close()
		checkStepRows(b, ws, benchRows)
		mu.Lock()
		batchSize := 0
		for _, n := range batches {
			if n > 0 { // Flush's empty job
				txs++
				txRows += n
				batchSize = max(batchSize, n)
			}
		}
		mu.Unlock()
		_ = ws.Close()

		// The raw side inserts the rows exactly as committed (same seq,
		// same content), in transactions of the Writer's largest batch.
		rs, _ := benchStore(b, d)
		if !rs.pg {
			if _, err := rs.pragma(ctx, "wal_autocheckpoint = "+autoCheckpoint); err != nil {
				b.Fatal(err)
			}
		}
		db, err := rs.w.DB()
		if err != nil {
			b.Fatal(err)
		}
		events := make([]*RunEvent, len(recs))
		for k, r := range recs {
			ev := *r.Event
			ev.ID = 0
			events[k] = &ev
		}
		b.StartTimer()

		start := time.Now()
		if err := rawInsert(ctx, db, rs.pg, events, batchSize); err != nil {
			b.Fatal(err)
		}
		rawDur += time.Since(start)

		b.StopTimer()
		checkStepRows(b, rs, benchRows)
		_ = rs.Close()
		b.StartTimer()
	}
	total := float64(b.N * benchRows)
	wrate, rrate := total/writerDur.Seconds(), total/rawDur.Seconds()
	b.ReportMetric(wrate, "writer-rows/s")
	b.ReportMetric(rrate, "raw-rows/s")
	b.ReportMetric(wrate/rrate, "writer/raw")
	b.ReportMetric(float64(txRows)/float64(max(txs, 1)), "rows/tx")
}

// benchStore opens a fresh database with one thread per producer.
func benchStore(b *testing.B, d dbDriver) (*Store, []string) {
	b.Helper()
	s, err := d.open(b, Options{})
	if err != nil {
		b.Fatal(err)
	}
	threads := make([]string, benchProducers)
	for p := range threads {
		th, err := s.CreateThread(context.Background(), "u1", fmt.Sprintf("bench %d", p))
		if err != nil {
			b.Fatal(err)
		}
		threads[p] = th.ID
	}
	return s, threads
}

// benchStepRows builds n subagent.step rows shaped like the ones
// Execution.emitStep writes: alternating ai steps (with a tool call) and
// tool steps, 370–530 bytes of JSON each (mean about 470). Producer p gets the contiguous
// slice p of the result, all in its own thread.
func benchStepRows(threads []string, n int) []Record {
	out := make([]Record, 0, n)
	per := n / len(threads)
	for p, th := range threads {
		runID := fmt.Sprintf("00000000-0000-4000-8000-%012d", p)
		for k := range per {
			task := k / 9 // nine steps per subagent, as the demo makes
			idx := k%9 + 1
			c := map[string]any{
				"task_id":       fmt.Sprintf("call_%024d", p*per+task),
				"execution_id":  fmt.Sprintf("%08d-0000-4000-8000-%012d", p, task),
				"run_id":        runID,
				"version":       idx + 1,
				"message_index": idx,
				"model_name":    "demo",
				"truncated":     false,
				"usage":         map[string]any{"input_tokens": 180 * idx, "output_tokens": 40 * idx, "total_tokens": 220 * idx},
			}
			if idx%2 == 1 {
				path := fmt.Sprintf("notes/topic-%d-part-%d.md", task, idx)
				args, _ := json.Marshal(map[string]string{"path": path, "content": "# Part\n\nFindings on: " + strings.Repeat("topic ", k%5) + "\n\nStatus: draft\n"})
				c["kind"] = "ai"
				c["text"] = fmt.Sprintf("Drafting part %d in `%s`.", idx, path)
				c["tool_calls"] = []any{map[string]any{"name": "write_file", "args": string(args)}}
			} else {
				c["kind"] = "tool"
				c["tool_name"] = "write_file"
				c["text"] = fmt.Sprintf("Wrote %d bytes to notes/topic-%d-part-%d.md. ", 90+k%200, task, idx) + strings.Repeat("ok ", k%30)
			}
			body, err := json.Marshal(c)
			if err != nil {
				panic(err)
			}
			out = append(out, Record{Event: &RunEvent{
				ThreadID: th, RunID: runID, TaskID: c["task_id"].(string),
				EventType: "subagent.step", Category: CategorySubagent, Content: JSON(body),
			}})
		}
	}
	return out
}

// enqueueAll has benchProducers goroutines Enqueue recs (each its slice,
// in order) on w, and returns how long until all of it was committed.
func enqueueAll(b *testing.B, w *Writer, recs []Record) time.Duration {
	ctx := context.Background()
	start := time.Now()
	var wg sync.WaitGroup
	per := len(recs) / benchProducers
	for p := range benchProducers {
		wg.Go(func() {
			for _, r := range recs[p*per : (p+1)*per] {
				if err := w.Enqueue(ctx, r); err != nil {
					b.Errorf("enqueue: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := w.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// rawInsert writes events in transactions of batch rows, each one
// multi-row INSERT, on db (the Store's single writer connection).
func rawInsert(ctx context.Context, db *sql.DB, pg bool, events []*RunEvent, batch int) error {
	const cols = "thread_id, seq, run_id, event_type, category, task_id, content, metadata, created_at"
	const one = "(?, ?, ?, ?, ?, ?, ?, ?, ?)"
	now := time.Now().UTC()
	stmts := map[int]*sql.Stmt{}
	defer func() {
		for _, s := range stmts {
			_ = s.Close()
		}
	}()
	args := make([]any, 0, 9*batch)
	for lo := 0; lo < len(events); lo += batch {
		chunk := events[lo:min(lo+batch, len(events))]
		st, ok := stmts[len(chunk)]
		if !ok {
			var err error
			q := "INSERT INTO run_events (" + cols + ") VALUES " + strings.TrimSuffix(strings.Repeat(one+",", len(chunk)), ",")
			if pg {
				q = rebind(q)
			}
			st, err = db.PrepareContext(ctx, q)
			if err != nil {
				return err
			}
			stmts[len(chunk)] = st
		}
		args = args[:0]
		for _, e := range chunk {
			args = append(args, e.ThreadID, e.Seq, e.RunID, e.EventType, e.Category, e.TaskID, e.Content, e.Metadata, now)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.StmtContext(ctx, st).ExecContext(ctx, args...); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// checkStepRows fails the benchmark unless s holds exactly n step rows,
// each with a distinct (thread, seq): a fast writer that loses or
// duplicates rows is not fast.
func checkStepRows(b *testing.B, s *Store, n int) {
	b.Helper()
	var got, distinct int64
	if err := s.r.Raw("SELECT COUNT(*), COUNT(DISTINCT thread_id || ':' || seq) FROM run_events WHERE event_type = 'subagent.step' AND seq > 0").Row().Scan(&got, &distinct); err != nil {
		b.Fatal(err)
	}
	if got != int64(n) || distinct != int64(n) {
		b.Fatalf("stored %d step rows (%d distinct seq), want %d", got, distinct, n)
	}
}
