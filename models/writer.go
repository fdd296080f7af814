package models

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Record is one write committed by the Writer. Exactly one field is set.
type Record struct {
	Message *Message
	Event   *RunEvent
	Usage   *UsageEntry // inserted once per call id; a repeat is ignored
	Run     *Run        // inserted, or its status, error and end time updated
}

// ThreadID is the thread the record belongs to.
func (r Record) ThreadID() string {
	switch {
	case r.Message != nil:
		return r.Message.ThreadID
	case r.Event != nil:
		return r.Event.ThreadID
	case r.Usage != nil:
		return r.Usage.ThreadID
	case r.Run != nil:
		return r.Run.ThreadID
	}
	return ""
}

// Seq is the record's place in its thread's sequence once committed; 0 for
// records outside the sequence (usage, run rows).
func (r Record) Seq() int64 {
	switch {
	case r.Message != nil:
		return r.Message.Seq
	case r.Event != nil:
		return r.Event.Seq
	}
	return 0
}

func (r Record) sequenced() bool { return r.Message != nil || r.Event != nil }

func (r Record) setSeq(seq int64) {
	switch {
	case r.Message != nil:
		r.Message.Seq = seq
	case r.Event != nil:
		r.Event.Seq = seq
	}
}

// ErrWriterClosed is returned for writes submitted after Close.
var ErrWriterClosed = errors.New("store: writer closed")

// BatchStats describes one committed (or failed) batch, for metrics.
type BatchStats struct {
	Records  int
	Attempts int
	Duration time.Duration
	Err      error
}

// WriterOptions configures a Writer.
type WriterOptions struct {
	// OnCommit receives every committed record, in sequence order, after
	// its transaction commits and before any waiting Write returns. It runs
	// on the writer's goroutine and must not block.
	OnCommit func([]Record)
	// OnBatch, when set, is told about every batch.
	OnBatch func(BatchStats)
	// Queue is how many submissions may wait; submitters block beyond it.
	Queue int
	// MaxBatch caps the records committed in one transaction.
	MaxBatch int
	// Backoff lists the waits between attempts of a failing batch; its
	// length bounds the retries.
	Backoff []time.Duration
	Logger  *slog.Logger
}

type job struct {
	recs []Record
	done chan error // nil when nobody waits
}

// Writer is the single writer of the thread log (SPEC §5.1, §5.4). It
// batches concurrent submissions into one transaction (group commit),
// assigns each record the next value of its thread's sequence inside that
// transaction, and hands committed records to OnCommit in order, so a
// record is always committed before it is broadcast and broadcasts follow
// the sequence.
type Writer struct {
	s    *Store
	opts WriterOptions
	log  *slog.Logger

	mu     sync.RWMutex // guards closed against sends on in
	closed bool
	in     chan *job
	done   chan struct{}
}

// NewWriter starts a writer; Close stops it.
func (s *Store) NewWriter(opts WriterOptions) *Writer {
	if opts.Queue <= 0 {
		opts.Queue = 8192
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 2000
	}
	if opts.Backoff == nil {
		opts.Backoff = []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 250 * time.Millisecond, time.Second, 2 * time.Second}
	}
	if opts.OnCommit == nil {
		opts.OnCommit = func([]Record) {}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Writer{s: s, opts: opts, log: log, in: make(chan *job, opts.Queue), done: make(chan struct{})}
	go w.loop()
	return w
}

// Write commits recs (in one transaction with whatever else is queued) and
// returns once they are committed and handed to OnCommit. The records get
// their Seq set.
func (w *Writer) Write(ctx context.Context, recs ...Record) error {
	j := &job{recs: recs, done: make(chan error, 1)}
	if err := w.submit(ctx, j); err != nil {
		return err
	}
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
		// The records may still commit; the caller has stopped waiting.
		return fmt.Errorf("store: write: %w", ctx.Err())
	}
}

// Enqueue submits recs without waiting for the commit. It blocks only
// while the queue is full, and at most until ctx ends.
func (w *Writer) Enqueue(ctx context.Context, recs ...Record) error {
	return w.submit(ctx, &job{recs: recs})
}

// Flush returns once everything submitted before it is committed.
func (w *Writer) Flush(ctx context.Context) error { return w.Write(ctx) }

// QueueLen is the number of submissions waiting.
func (w *Writer) QueueLen() int { return len(w.in) }

func (w *Writer) submit(ctx context.Context, j *job) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrWriterClosed
	}
	select {
	case w.in <- j:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("store: write queue full: %w", ctx.Err())
	}
}

// Close stops accepting writes, commits what is queued and returns.
func (w *Writer) Close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.in)
	}
	w.mu.Unlock()
	<-w.done
}

func (w *Writer) loop() {
	defer close(w.done)
	for j := range w.in {
		batch := []*job{j}
		n := len(j.recs)
	gather:
		for n < w.opts.MaxBatch {
			select {
			case more, ok := <-w.in:
				if !ok {
					break gather
				}
				batch = append(batch, more)
				n += len(more.recs)
			default:
				break gather
			}
		}
		w.commit(batch)
	}
}

// commit writes a batch, retrying with backoff. If the batch still fails,
// each job is tried on its own so one bad record cannot sink the others.
func (w *Writer) commit(batch []*job) {
	start := time.Now()
	var recs []Record
	for _, j := range batch {
		recs = append(recs, j.recs...)
	}
	var (
		gone     map[string]bool
		err      error
		attempts int
	)
	for attempts = 1; ; attempts++ {
		gone, err = w.tx(recs)
		if err == nil || attempts > len(w.opts.Backoff) {
			break
		}
		w.log.Warn("store: batch write failed, retrying", "records", len(recs), "attempt", attempts, "err", err)
		time.Sleep(w.opts.Backoff[attempts-1])
	}
	if w.opts.OnBatch != nil {
		w.opts.OnBatch(BatchStats{Records: len(recs), Attempts: attempts, Duration: time.Since(start), Err: err})
	}
	if err == nil {
		w.deliver(batch, gone)
		return
	}
	if len(batch) == 1 {
		w.log.Error("store: write failed", "records", len(recs), "err", err)
		finish(batch[0], fmt.Errorf("store: write: %w", err))
		return
	}
	for _, j := range batch {
		gone, err := w.tx(j.recs)
		if err != nil {
			w.log.Error("store: write failed", "records", len(j.recs), "err", err)
			finish(j, fmt.Errorf("store: write: %w", err))
			continue
		}
		w.deliver([]*job{j}, gone)
	}
}

func (w *Writer) deliver(batch []*job, gone map[string]bool) {
	committed := make([]Record, 0, 64)
	for _, j := range batch {
		for _, r := range j.recs {
			if !gone[r.ThreadID()] {
				committed = append(committed, r)
			}
		}
	}
	if len(committed) > 0 {
		w.opts.OnCommit(committed)
	}
	for _, j := range batch {
		var err error
		for _, r := range j.recs {
			if gone[r.ThreadID()] {
				err = fmt.Errorf("store: write to thread %s: %w", r.ThreadID(), ErrNotFound)
				break
			}
		}
		finish(j, err)
	}
}

func finish(j *job, err error) {
	if j.done != nil {
		j.done <- err
	}
}

// tx writes recs in one transaction. Records of a thread that no longer
// exists are skipped and reported in gone. On error nothing is written and
// every record's Seq is reset.
func (w *Writer) tx(recs []Record) (gone map[string]bool, err error) {
	if len(recs) == 0 {
		return nil, nil
	}
	now := w.s.now().UTC()
	err = w.s.w.Transaction(func(tx *gorm.DB) error {
		gone = nil
		// One UPDATE per thread reserves a block of sequence numbers.
		counts := map[string]int64{}
		var order []string
		for _, r := range recs {
			if !r.sequenced() {
				continue
			}
			id := r.ThreadID()
			if _, seen := counts[id]; !seen {
				order = append(order, id)
			}
			counts[id]++
		}
		next := make(map[string]int64, len(order))
		for _, id := range order {
			var last []int64
			if err := tx.Raw("UPDATE threads SET last_seq = last_seq + ?, updated_at = ? WHERE id = ? RETURNING last_seq", counts[id], now, id).Scan(&last).Error; err != nil {
				return fmt.Errorf("reserve seq: %w", err)
			}
			if len(last) == 0 {
				if gone == nil {
					gone = map[string]bool{}
				}
				gone[id] = true
				continue
			}
			next[id] = last[0] - counts[id] + 1
		}
		var (
			msgs   []*Message
			events []*RunEvent
			usage  []*UsageEntry
		)
		for _, r := range recs {
			if gone[r.ThreadID()] {
				continue
			}
			if r.sequenced() {
				id := r.ThreadID()
				r.setSeq(next[id])
				next[id]++
			}
			switch {
			case r.Message != nil:
				if r.Message.CreatedAt.IsZero() {
					r.Message.CreatedAt = now
				}
				msgs = append(msgs, r.Message)
			case r.Event != nil:
				if r.Event.CreatedAt.IsZero() {
					r.Event.CreatedAt = now
				}
				events = append(events, r.Event)
			case r.Usage != nil:
				if r.Usage.CreatedAt.IsZero() {
					r.Usage.CreatedAt = now
				}
				usage = append(usage, r.Usage)
			case r.Run != nil:
				// Runs are written in order with the log so that a run's
				// end row never precedes its last event.
				if err := tx.Clauses(clause.OnConflict{
					Columns:   []clause.Column{{Name: "id"}},
					DoUpdates: clause.AssignmentColumns([]string{"status", "error", "ended_at"}),
				}).Create(r.Run).Error; err != nil {
					return fmt.Errorf("upsert run: %w", err)
				}
			}
		}
		if len(msgs) > 0 {
			if err := tx.CreateInBatches(msgs, 200).Error; err != nil {
				return fmt.Errorf("insert messages: %w", err)
			}
		}
		if len(events) > 0 {
			if err := tx.CreateInBatches(events, 500).Error; err != nil {
				return fmt.Errorf("insert events: %w", err)
			}
		}
		if len(usage) > 0 {
			if err := tx.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(usage, 500).Error; err != nil {
				return fmt.Errorf("insert usage: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		for _, r := range recs {
			r.setSeq(0)
			if r.Event != nil {
				r.Event.ID = 0
			}
		}
		return nil, err
	}
	return gone, nil
}
