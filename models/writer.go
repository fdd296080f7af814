package models

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/mattn/go-sqlite3"
	"gorm.io/gorm"
)

// Record is one write committed by the Writer. Exactly one field is set.
type Record struct {
	Message *Message
	Event   *RunEvent
	Usage   *UsageEntry // inserted once per call id; a repeat is ignored
	Run     *Run        // inserted, or its status, error and end time updated
	// Checkpoint is a piece of a running conversation's exact history,
	// written with the step it belongs to; a run's end deletes its pieces.
	Checkpoint *Checkpoint

	// What the layers above attach for the commit, never stored: the
	// Writer hands it to OnCommit as it came, and records read back from
	// the database have none.
	Payload  Payload  // the typed value Event.Content was encoded from
	Prepared Prepared // the record's broadcast body, built before the commit
}

// Payload is the typed value an event's Content was encoded from
// (agent.Event implements it), carried on its record from the producer to
// OnCommit so that the live path never decodes Content.
type Payload interface {
	EventType() string
}

// Prepared is a record's broadcast body that the layer above attaches
// before queuing the record, and finds on it in OnCommit (the hub's
// journal decorator, server/hub/prepare.go). Prepare builds it now unless it
// was built already.
type Prepared interface {
	Prepare()
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
	case r.Checkpoint != nil:
		return r.Checkpoint.ThreadID
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

// RunID is the run the record belongs to; "" for a thread's title call.
func (r Record) RunID() string {
	switch {
	case r.Message != nil:
		return r.Message.RunID
	case r.Event != nil:
		return r.Event.RunID
	case r.Usage != nil:
		return r.Usage.RunID
	case r.Run != nil:
		return r.Run.ID
	case r.Checkpoint != nil:
		return r.Checkpoint.RunID
	}
	return ""
}

// recordRuns lists the distinct runs of recs, in the order they appear.
func recordRuns(recs []Record) []string {
	var runs []string
	seen := map[string]bool{}
	for _, r := range recs {
		if id := r.RunID(); id != "" && !seen[id] {
			seen[id] = true
			runs = append(runs, id)
		}
	}
	return runs
}

// FencedError is a transaction refused because some of its runs are no
// longer this instance's (ErrFenced): the Writer fails their records and
// commits the rest.
type FencedError struct{ Runs []string }

func (e *FencedError) Error() string {
	return fmt.Sprintf("%v: %d runs taken over", ErrFenced, len(e.Runs))
}

func (e *FencedError) Unwrap() error { return ErrFenced }

// ErrWriterClosed is returned for writes submitted after Close.
var ErrWriterClosed = errors.New("store: writer closed")

// ErrPending is returned, with the context's error, by a Write whose
// context ended after its records were queued: the writer keeps them and
// commits them in order when the database takes them (through a storage
// fault too), or, should it close first, logs them as lost. The caller
// stopped waiting; nothing is lost yet.
var ErrPending = errors.New("store: write still queued")

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
	// Queue is how many Enqueued submissions may wait; Enqueue blocks
	// beyond it.
	Queue int
	// Reserve is further room kept for Write, whose callers wait for the
	// commit (a task's end, a tool result, a run's end): during a long
	// storage fault the steps that subagents Enqueue fill Queue, and these
	// records must still get in to be kept and retried (default 1024).
	Reserve int
	// MaxBatch caps the records committed in one transaction.
	MaxBatch int
	// Backoff lists the waits between attempts of a failing batch; its
	// length bounds the retries of a batch whose records fail. A storage
	// fault (full disk, locked database) is retried without bound, waiting
	// the last Backoff between attempts.
	Backoff []time.Duration
	// Fence, when set (PostgreSQL's instances), is the lease this
	// instance writes under: each transaction checks that every run it
	// writes is still that lease's, and refuses the records of those that
	// another instance has taken over (ErrFenced, docs/DESIGN.md §14).
	Fence func() Fence
	// OnFenced, when set, is told the runs whose records the database
	// refused because another instance has taken them over (ErrFenced):
	// this instance has lost its lease. It runs on the writer's
	// goroutine and must not block.
	OnFenced func(runs []string)
	// CloseGrace is how long Close keeps retrying through a storage fault
	// before it fails what is still uncommitted (default 5 s).
	CloseGrace time.Duration
	Logger     *slog.Logger
}

type job struct {
	recs  []Record
	done  chan error // nil when nobody waits
	token bool       // holds one of Queue's places (Enqueue)
}

// Writer is the single writer of the thread log (docs/DESIGN.md §7). It
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
	tokens chan struct{} // Queue's places, taken by Enqueue, freed as the loop takes a job
	done   chan struct{}
	ckpt   chan struct{} // a transaction committed; capacity 1, so signals coalesce
	stmts  *stmtCache

	fault    faultState
	closing  chan struct{} // closed by Close: a storage fault's retries end soon
	giveUpAt time.Time     // set once closing: the end of CloseGrace (writer goroutine only)
}

// WAL checkpoints. SQLite's automatic checkpoint runs inside the COMMIT
// that takes the WAL past wal_autocheckpoint pages (1000), and with
// synchronous=NORMAL that checkpoint fsyncs the WAL and the database file:
// on the 2-core bench machine such a commit took ~4 ms instead of ~0.15 ms,
// once every ~100 transactions, which alone put the task tool's p99
// hand-off (subagent.end committed, then delegate returns) at 4.3 ms
// against a 1 ms bar (BenchmarkTaskHandoff, docs/PERFORMANCE.md). So
// while a Writer is open, checkpoints run beside it: after commits, at
// most once per checkpointEvery, a goroutine runs a PASSIVE checkpoint on
// a reader connection, which takes no lock the writer waits for (p99 fell
// to 0.45 ms). A checkpoint still competes for CPU and disk, so the rare
// commit that overlaps a large one is slower: 10 ms between checkpoints
// halved the worst hand-off but doubled p99, hence 100 ms. The writer
// connection's own automatic checkpoint stays as a backstop at
// backstopCheckpointPages, for a WAL the background cannot keep up with;
// Close restores SQLite's default. The backstop is twice what the Writer
// can write in checkpointEvery at full speed (~9,000 pages in 100 ms on
// the bench machine, ~1,000 small commits): at 10,000 pages the commit
// that crossed it ran the checkpoint inside COMMIT, 30–45 ms for the task
// hand-offs waiting on it; at 20,000 the worst hand-off is 1.5–3 ms.
// Checkpointing every 250 commits instead cut the worst case too but put
// p99 up by a third (interleaved, 2026-12-01).
const (
	checkpointEvery         = 100 * time.Millisecond
	backstopCheckpointPages = 20000 // ~80 MB of WAL
	defaultCheckpointPages  = 1000  // SQLite's default
)

// NewWriter starts a writer; Close stops it.
func (s *Store) NewWriter(opts WriterOptions) *Writer {
	if opts.Queue <= 0 {
		opts.Queue = 8192
	}
	if opts.Reserve <= 0 {
		opts.Reserve = 1024
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
	if opts.CloseGrace <= 0 {
		opts.CloseGrace = 5 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Writer{s: s, opts: opts, log: log, in: make(chan *job, opts.Queue+opts.Reserve), tokens: make(chan struct{}, opts.Queue), done: make(chan struct{}), ckpt: make(chan struct{}, 1), closing: make(chan struct{})}
	w.stmts = &stmtCache{}
	w.stmts.db, w.stmts.err = s.w.DB()
	if w.stmts.err == nil {
		w.stmts.tables, w.stmts.err = newWriterTables(s.w, s.pg)
	}
	if s.pg && w.stmts.err == nil {
		w.stmts.pgQueries()
	}
	w.setAutoCheckpoint(backstopCheckpointPages)
	// Both goroutines start before NewWriter returns, so a caller that
	// snapshots its goroutines afterwards sees them both. PostgreSQL
	// checkpoints on its own: it needs no checkpoint goroutine.
	stop, stopped := make(chan struct{}), make(chan struct{})
	if s.pg {
		close(stopped)
	} else {
		go w.checkpoints(stop, stopped)
	}
	go w.loop(stop, stopped)
	return w
}

// Write commits recs (in one transaction with whatever else is queued) and
// returns once they are committed and handed to OnCommit. The records get
// their Seq set.
func (w *Writer) Write(ctx context.Context, recs ...Record) error {
	return w.WriteWhile(ctx, nil, recs...)
}

// WriteWhile is Write that runs during (if not nil) on the caller's
// goroutine once recs are queued, while the commit goes on.
func (w *Writer) WriteWhile(ctx context.Context, during func(), recs ...Record) error {
	j := &job{recs: recs, done: make(chan error, 1)}
	if err := w.submit(ctx, j); err != nil {
		return err
	}
	if during != nil {
		during()
	}
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
		// The records may still commit; the caller has stopped waiting.
		return fmt.Errorf("%w: %w", ErrPending, ctx.Err())
	}
}

// Enqueue submits recs without waiting for the commit. It blocks only
// while the queue is full, and at most until ctx ends.
func (w *Writer) Enqueue(ctx context.Context, recs ...Record) error {
	return w.submit(ctx, &job{recs: recs, token: true})
}

// Flush returns once everything submitted before it is committed.
func (w *Writer) Flush(ctx context.Context) error { return w.Write(ctx) }

// Fault is the storage fault the writer is retrying through, nil while
// commits succeed. Readiness and new work read it (docs/DESIGN.md §7).
func (w *Writer) Fault() *StorageFault { return w.fault.get() }

// QueueLen is the number of submissions waiting.
func (w *Writer) QueueLen() int { return len(w.in) }

func (w *Writer) submit(ctx context.Context, j *job) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrWriterClosed
	}
	if j.token {
		select {
		case w.tokens <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("store: write queue full: %w", ctx.Err())
		}
	}
	select {
	case w.in <- j:
		return nil
	case <-ctx.Done():
		w.taken(j) // it never was: give its place back
		return fmt.Errorf("store: write queue full: %w", ctx.Err())
	}
}

// taken frees the queue place an Enqueued job held, once the loop takes
// it (or its submission gives up).
func (w *Writer) taken(j *job) *job {
	if j.token {
		<-w.tokens
	}
	return j
}

// Close stops accepting writes, commits what is queued and returns.
func (w *Writer) Close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.in)
		close(w.closing)
	}
	w.mu.Unlock()
	<-w.done
}

// loop commits batches until the queue is closed, then stops the
// checkpoint goroutine.
func (w *Writer) loop(stop, stopped chan struct{}) {
	defer close(w.done)
	defer func() {
		close(stop)
		<-stopped
		w.setAutoCheckpoint(defaultCheckpointPages)
		w.stmts.close()
	}()
	for j := range w.in {
		batch := []*job{w.taken(j)}
		n := len(j.recs)
	gather:
		for n < w.opts.MaxBatch {
			select {
			case more, ok := <-w.in:
				if !ok {
					break gather
				}
				batch = append(batch, w.taken(more))
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
	n := 0
	for _, j := range batch {
		n += len(j.recs)
	}
	recs := make([]Record, 0, n)
	for _, j := range batch {
		recs = append(recs, j.recs...)
	}
	gone, attempts, err := w.tryTx(recs)
	for fe := (*FencedError)(nil); errors.As(err, &fe); {
		// The runs taken over lose their records, never written; the
		// rest of the batch commits without them.
		batch, recs = w.fenced(batch, fe.Runs)
		if len(recs) == 0 {
			gone, err = nil, nil
			break
		}
		var more int
		gone, more, err = w.tryTx(recs)
		attempts += more
	}
	if w.opts.OnBatch != nil {
		w.opts.OnBatch(BatchStats{Records: len(recs), Attempts: attempts, Duration: time.Since(start), Err: err})
	}
	if err == nil {
		w.deliver(batch, recs, gone)
		return
	}
	w.failed(batch, recs, err)
}

// tryTx writes recs in one transaction, trying again with backoff, and
// for as long as a storage fault lasts.
func (w *Writer) tryTx(recs []Record) (gone map[string]bool, attempts int, err error) {
	for attempts = 1; ; attempts++ {
		gone, err = w.tx(recs)
		if err == nil {
			w.recovered()
			return gone, attempts, nil
		}
		if errors.Is(err, ErrFenced) {
			w.recovered() // the database answered
			return nil, attempts, err
		}
		if reason, ok := storageFault(err); ok {
			if w.waitOutFault(reason, err, attempts) {
				continue
			}
			return nil, attempts, err
		}
		if attempts > len(w.opts.Backoff) {
			return nil, attempts, err
		}
		w.log.Warn("store: batch write failed, retrying", "records", len(recs), "attempt", attempts, "err", err)
		time.Sleep(w.opts.Backoff[attempts-1])
	}
}

// fenced fails the jobs with a record of runs (taken over by another
// instance) with ErrFenced, tells OnFenced, and returns the jobs and
// records left.
func (w *Writer) fenced(batch []*job, runs []string) ([]*job, []Record) {
	lost := make(map[string]bool, len(runs))
	for _, id := range runs {
		lost[id] = true
	}
	keep := batch[:0:0]
	var recs []Record
	dropped := 0
	for _, j := range batch {
		if slices.ContainsFunc(j.recs, func(r Record) bool { return lost[r.RunID()] }) {
			dropped += len(j.recs)
			finish(j, fmt.Errorf("store: write: %w", ErrFenced))
			continue
		}
		keep = append(keep, j)
		recs = append(recs, j.recs...)
	}
	w.log.Warn("store: refused the records of runs this instance no longer owns", "runs", len(runs), "records", dropped)
	if w.opts.OnFenced != nil {
		w.opts.OnFenced(runs)
	}
	return keep, recs
}

// failed ends a batch that could not be written: every job fails if
// the writer gave up on a storage fault; otherwise each job is tried on
// its own, so one bad record cannot sink the others.
func (w *Writer) failed(batch []*job, recs []Record, err error) {
	if f := w.fault.get(); f != nil {
		w.log.Error("store: writer closed with records it could not commit; crash recovery closes their runs at the next start",
			"records", len(recs), "reason", f.Reason, "err", err)
		for _, j := range batch {
			finish(j, gaveUp(f))
		}
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
		w.deliver([]*job{j}, slices.Clone(j.recs), gone)
	}
}

// waitOutFault records a storage fault and waits before the next attempt.
// The batch is kept, in order, however long the fault lasts: terminal
// records (subagent ends, tool results, run ends) must reach the database
// without a restart. Only a closing writer gives up, after CloseGrace.
// It reports whether to try again.
func (w *Writer) waitOutFault(reason string, err error, attempts int) bool {
	if w.fault.get() == nil {
		w.log.Error("store: cannot write; keeping the records and retrying until it can", "reason", reason, "err", err)
	}
	w.fault.set(reason, err, w.s.now())
	delay := w.opts.Backoff[min(attempts, len(w.opts.Backoff))-1]
	select {
	case <-w.closing:
		// Closing: further attempts only within the grace.
		if w.giveUpAt.IsZero() {
			w.giveUpAt = time.Now().Add(w.opts.CloseGrace)
		}
		if time.Now().Add(delay).After(w.giveUpAt) {
			return false
		}
		time.Sleep(delay)
		return true
	default:
	}
	select {
	case <-time.After(delay):
	case <-w.closing: // try once more at once; the grace applies from here
	}
	return true
}

// recovered clears a storage fault after a commit.
func (w *Writer) recovered() {
	if f := w.fault.get(); f != nil {
		w.fault.clear()
		w.log.Info("store: writing again", "after", w.s.now().Sub(f.Since).Round(time.Millisecond), "reason_was", f.Reason)
	}
}

func (w *Writer) deliver(batch []*job, recs []Record, gone map[string]bool) {
	// recs, the batch's records in order, is the writer's own slice: it
	// goes to OnCommit as is unless a thread was gone.
	committed := recs
	if len(gone) > 0 {
		committed = make([]Record, 0, len(recs))
		for _, r := range recs {
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

// checkpoints runs a PASSIVE checkpoint after commits, at most once per
// checkpointEvery, until stop is closed; the pause keeps a burst of commits
// from turning into a burst of fsyncs.
func (w *Writer) checkpoints(stop <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	// database/sql, not gorm: the store's read counter is for the app's
	// queries.
	rdb, err := w.s.r.DB()
	if err != nil {
		w.log.Warn("store: no reader connection for checkpoints; only the backstop runs", "err", err)
		<-stop
		return
	}
	for {
		select {
		case <-stop:
			return
		case <-w.ckpt:
		}
		// query_only does not forbid checkpoints, so a reader connection
		// serves and the writer's stays free for commits. The pragma
		// returns a row; reading it to the end resets the statement, which
		// would otherwise hold that connection's read snapshot open.
		var busy, frames, copied int
		if err := rdb.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied); err != nil {
			w.log.Warn("store: checkpoint failed", "err", err)
		}
		select {
		case <-stop:
			return
		case <-time.After(checkpointEvery):
		}
	}
}

// setAutoCheckpoint sets wal_autocheckpoint on the writer connection (one
// connection that is never recycled, so the setting holds).
func (w *Writer) setAutoCheckpoint(pages int) {
	if w.s.pg || w.stmts.err != nil {
		return // nothing can be written anyway; tx reports it
	}
	var set int
	if err := w.stmts.db.QueryRow(fmt.Sprintf("PRAGMA wal_autocheckpoint = %d", pages)).Scan(&set); err != nil {
		w.log.Warn("store: set wal_autocheckpoint", "pages", pages, "err", err)
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
//
// The transaction is written with statements prepared once on the
// writer's connection (sqliteTx, pgTx) rather than with gorm: gorm (PrepareStmt)
// re-prepares every statement in every transaction (a statement it
// prepared inside one is tied to it), and CreateInBatches builds each
// INSERT by reflection. Side by side on the bench machine this (with the
// checkpoints above) took the task hand-off's p50 from 200 µs to 127 µs
// and sustained subagent.step rows from 109k/s to 153k/s, level with a
// bare database/sql insert (BenchmarkTaskHandoff,
// BenchmarkWriterThroughput). The column lists still come from gorm's
// schema, parsed once when the writer starts (insertTable); reading a
// row's values through the field indexes it gives costs ~0.1 µs a row
// more than a hand-written list, against ~6 µs for the row's insert.
func (w *Writer) tx(recs []Record) (gone map[string]bool, err error) {
	if len(recs) == 0 {
		return nil, nil
	}
	now := w.s.now().UTC()
	defer func() {
		if err != nil {
			gone = nil
			unassign(recs)
		}
	}()
	if w.s.pg {
		return w.pgTx(recs, now)
	}
	if gone, err = w.sqliteTx(recs, now); err != nil {
		return nil, err
	}
	select {
	case w.ckpt <- struct{}{}:
	default: // a checkpoint is already due
	}
	return gone, nil
}

// unassign clears the Seq and event ID a failed transaction gave recs, so
// that no caller sees a number the database never kept.
func unassign(recs []Record) {
	for _, r := range recs {
		r.setSeq(0)
		if r.Event != nil {
			r.Event.ID = 0
		}
	}
}

// reserveSeqs returns, for each thread of recs' sequenced records, the
// first number of the block reserved for them; threads that no longer
// exist are reported in gone.
func (w *Writer) reserveSeqs(tx liteTx, recs []Record, now time.Time) (next map[string]int64, gone map[string]bool, err error) {
	// One UPDATE per thread reserves a block of sequence numbers.
	order, counts := seqCounts(recs)
	next = make(map[string]int64, len(order))
	for _, id := range order {
		last, err := tx.queryInt(w.stmts.reserve, counts[id], now, id)
		if errors.Is(err, sql.ErrNoRows) {
			if gone == nil {
				gone = map[string]bool{}
			}
			gone[id] = true
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reserve seq: %w", err)
		}
		next[id] = last - counts[id] + 1
	}
	return next, gone, nil
}

// seqCounts counts recs' sequenced records by thread; order lists the
// threads as they first appear.
func seqCounts(recs []Record) (order []string, counts map[string]int64) {
	counts = map[string]int64{}
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
	return order, counts
}

// logRows are a transaction's rows by table, each in the order the
// records came: sequence order for the message, event and usage rows of
// the multi-row INSERTs.
type logRows struct {
	runs   []*Run
	msgs   []*Message
	events []*RunEvent
	usage  []*UsageEntry
	ckpts  []*Checkpoint
	// ended are the runs whose end this transaction writes: their
	// checkpoints are deleted after the rows are in.
	ended []string
}

// placeRecords gives each record of a live thread its Seq (from next) and
// its creation time, and collects the rows by table.
func placeRecords(recs []Record, next map[string]int64, gone map[string]bool, now time.Time) logRows {
	var rows logRows
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
			rows.msgs = append(rows.msgs, r.Message)
		case r.Event != nil:
			if r.Event.CreatedAt.IsZero() {
				r.Event.CreatedAt = now
			}
			rows.events = append(rows.events, r.Event)
		case r.Usage != nil:
			if r.Usage.CreatedAt.IsZero() {
				r.Usage.CreatedAt = now
			}
			rows.usage = append(rows.usage, r.Usage)
		case r.Run != nil:
			rows.runs = append(rows.runs, r.Run)
			if r.Run.Status != RunRunning {
				rows.ended = append(rows.ended, r.Run.ID)
			}
		case r.Checkpoint != nil:
			if r.Checkpoint.CreatedAt.IsZero() {
				r.Checkpoint.CreatedAt = now
			}
			rows.ckpts = append(rows.ckpts, r.Checkpoint)
		}
	}
	return rows
}

// insertLog inserts rows in tx and sets each event's ID.
func (w *Writer) insertLog(tx liteTx, rows logRows) error {
	tables := w.stmts.tables
	if err := insertRows(w.stmts, tx, tables.messages, rows.msgs); err != nil {
		return fmt.Errorf("insert messages: %w", err)
	}
	if err := w.insertEvents(tx, rows.events); err != nil {
		return fmt.Errorf("insert events: %w", err)
	}
	if err := insertRows(w.stmts, tx, tables.usage, rows.usage); err != nil {
		return fmt.Errorf("insert usage: %w", err)
	}
	if err := insertRows(w.stmts, tx, tables.checkpoints, rows.ckpts); err != nil {
		return fmt.Errorf("insert checkpoints: %w", err)
	}
	for _, id := range rows.ended {
		if _, err := tx.exec(w.stmts.dropCheckpoints, []any{id}); err != nil {
			return fmt.Errorf("delete checkpoints: %w", err)
		}
	}
	return nil
}

// insertEvents inserts events and sets their IDs. On SQLite one INSERT
// takes consecutive AUTOINCREMENT ids (the writer holds the only write
// lock), so the last id gives them all. (PostgreSQL: pgTx.)
func (w *Writer) insertEvents(tx liteTx, events []*RunEvent) error {
	t := w.stmts.tables.events
	return eachChunk(len(events), func(lo, n int) error {
		chunk := events[lo : lo+n]
		args := rowArgs(w.stmts, t, chunk)
		defer w.stmts.doneArgs()
		res, err := tx.exec(w.stmts.inserts[insertKey{t.into, n}], args)
		if err != nil {
			return err
		}
		last, err := res.LastInsertId()
		if err != nil {
			return err
		}
		for i, e := range chunk {
			e.ID = last - int64(len(chunk)-1-i)
		}
		return nil
	})
}

const reserveSeqSQL = "UPDATE threads SET last_seq = last_seq + ?, updated_at = ? WHERE id = ? RETURNING last_seq"

// insertTable is a table the Writer inserts into by hand. Its columns are
// read from the model's GORM schema when the writer starts, never listed
// here: a field added to a model is written like the others, where a
// hand-written list beside the GORM tags would drop it silently.
type insertTable struct {
	into     string  // "table (columns)"
	fields   [][]int // each column's struct field index, in column order
	conflict string  // appended to the INSERT
	pg       bool    // PostgreSQL: $n placeholders, text made storable (pgText)
}

// writerTables are the tables the Writer inserts into.
type writerTables struct {
	messages, events, usage, runs, checkpoints insertTable
}

func newWriterTables(db *gorm.DB, pg bool) (writerTables, error) {
	var (
		t    writerTables
		errs []error
	)
	table := func(model any, conflict string) insertTable {
		it, err := newInsertTable(db, model, conflict)
		it.pg = pg
		errs = append(errs, err)
		return it
	}
	t.messages = table(&Message{}, "")
	t.events = table(&RunEvent{}, "")
	if pg {
		t.events.conflict = " RETURNING id, thread_id, seq" // insertEvents
	}
	// A usage row is inserted once per call id; a repeat is ignored.
	t.usage = table(&UsageEntry{}, " ON CONFLICT DO NOTHING")
	// A run row is inserted, or its status, error and end time updated.
	t.runs = table(&Run{}, " ON CONFLICT (id) DO UPDATE SET status = excluded.status, error = excluded.error, ended_at = excluded.ended_at")
	t.checkpoints = table(&Checkpoint{}, "")
	return t, errors.Join(errs...)
}

// newInsertTable lists model's columns from its GORM schema: every field
// GORM would create, except an auto-increment key, which the database
// assigns (tx reads it back).
func newInsertTable(db *gorm.DB, model any, conflict string) (insertTable, error) {
	st := &gorm.Statement{DB: db}
	if err := st.Parse(model); err != nil {
		return insertTable{}, fmt.Errorf("schema of %T: %w", model, err)
	}
	t := insertTable{conflict: conflict}
	var cols []string
	for _, f := range st.Schema.Fields {
		if f.DBName == "" || !f.Creatable || f.AutoIncrement {
			continue
		}
		cols = append(cols, f.DBName)
		t.fields = append(t.fields, f.StructField.Index)
	}
	t.into = st.Schema.Table + " (" + strings.Join(cols, ", ") + ")"
	return t, nil
}

// appendRow appends the column values of row, a pointer to the model.
//
// Each value is read through a pointer to its field and boxed by its own
// type rather than by reflect's Interface, which copies every value to
// the heap (a task's hand-off writes ~50 columns, and these copies were a
// quarter of its allocations; BenchmarkTaskHandoff, docs/PERFORMANCE.md):
// an empty string, a small integer and a bool box without allocating, a
// string or time equal to the one the previous row of args holds in the
// same column (a batch's thread, run, category, creation time) reuses
// that box, and a JSON document is handed over as its own bytes.
// SQLite is given a time as the text the driver would bind for it.
func (t insertTable) appendRow(args []any, row any) []any {
	v := reflect.ValueOf(row).Elem()
	prev := len(args) - len(t.fields)
	for k, i := range t.fields {
		var above any
		if prev >= 0 {
			above = args[prev+k]
		}
		args = append(args, t.value(v.FieldByIndex(i), above))
	}
	return args
}

// value is the driver's value of field f (addressable); above is a value
// it may reuse when equal.
func (t insertTable) value(f reflect.Value, above any) any {
	switch p := f.Addr().Interface().(type) {
	case *string:
		a := above
		if s, ok := above.(string); !ok || s != *p {
			a = *p
		}
		if t.pg {
			return pgText(a)
		}
		return a
	case *int64:
		return *p
	case *bool:
		return *p
	case *time.Time:
		if t.pg {
			return *p
		}
		// The text go-sqlite3 would bind for the time, made here so that
		// the rows of a commit, which share its time, share one value.
		var buf [64]byte
		b := p.AppendFormat(buf[:0], sqlite3.SQLiteTimestampFormats[0])
		if s, ok := above.(string); ok && s == string(b) {
			return above
		}
		return string(b)
	case *JSON:
		if t.pg || len(*p) == 0 {
			return *p // JSON.Value: NULL, or the document as text
		}
		// The text JSON.Value gives, without copying: the driver copies
		// it while binding, before Exec returns, and a record's bytes are
		// not changed once it is submitted.
		return unsafe.String(&(*p)[0], len(*p))
	}
	a := f.Interface()
	if t.pg {
		a = pgText(a)
	}
	return a
}

// appendRows appends the column values of every row.
func appendRows[T any](t insertTable, args []any, rows []T) []any {
	for _, r := range rows {
		args = t.appendRow(args, r)
	}
	return args
}

// maxInsertRows caps the rows of one INSERT. It is a power of two and every
// INSERT has a power-of-two number of rows, so any batch is written with
// at most log2(maxInsertRows)+1 distinct statements per table, each
// prepared once.
const maxInsertRows = 256

func (t insertTable) query(rows int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(t.fields)), ", ") + ")"
	q := "INSERT INTO " + t.into + " VALUES " + strings.TrimSuffix(strings.Repeat(one+", ", rows), ", ") + t.conflict
	if t.pg {
		q = rebind(q)
	}
	return q
}

// eachChunk calls f for consecutive chunks of n items, each of a
// power-of-two length up to maxInsertRows, from lo.
func eachChunk(n int, f func(lo, n int) error) error {
	for lo := 0; lo < n; {
		size := 1 << (bits.Len(uint(min(n-lo, maxInsertRows))) - 1)
		if err := f(lo, size); err != nil {
			return err
		}
		lo += size
	}
	return nil
}

// insertRows writes rows (pointers to t's model) with multi-row INSERTs
// in tx.
func insertRows[T any](stmts *stmtCache, tx liteTx, t insertTable, rows []T) error {
	return eachChunk(len(rows), func(lo, n int) error {
		args := rowArgs(stmts, t, rows[lo:lo+n])
		defer stmts.doneArgs()
		_, err := tx.exec(stmts.inserts[insertKey{t.into, n}], args)
		return err
	})
}

// rowArgs returns the column values of rows for one INSERT into t, in
// the cache's buffer (doneArgs empties it). Commits are small (a task's
// hand-off commits one or two rows per table), so the row above the
// first, whose boxed values appendRow reuses, is the last row t was given
// in an earlier INSERT, kept for this one.
func rowArgs[T any](c *stmtCache, t insertTable, rows []T) []any {
	if c.last == nil {
		c.last = map[string][]any{}
	}
	seed := c.last[t.into]
	c.args = appendRows(t, append(c.args[:0], seed...), rows)
	c.last[t.into] = append(seed[:0], c.args[len(c.args)-len(t.fields):]...)
	return c.args[len(seed):]
}

// doneArgs empties the buffer rowArgs filled once its INSERT has run, so
// that it keeps no row alive.
func (c *stmtCache) doneArgs() {
	clear(c.args)
	c.args = c.args[:0]
}

// stmtCache holds the Writer's SQLite statements (pgTx has pgx cache its
// own), prepared on the driver connection of its *sql.DB (sqliteTx) and
// reused by every transaction on that one writer connection. They are all
// prepared before the first transaction, never during one. Only the
// writer's goroutine uses the cache.
type stmtCache struct {
	db      *sql.DB
	tables  writerTables
	err     error               // from getting db or the tables; every transaction fails with it
	conn    *sqlite3.SQLiteConn // the connection the statements are prepared on
	all     []driver.Stmt
	reserve driver.Stmt
	// dropCheckpoints deletes an ended run's checkpoints.
	dropCheckpoints driver.Stmt
	inserts         map[insertKey]driver.Stmt
	named           []driver.NamedValue // one statement's values, reused
	args            []any               // one INSERT's values (rowArgs), reused
	last            map[string][]any    // by table: the last row inserted (rowArgs)

	// PostgreSQL (pgTx): the statements' text.
	pgReserve         string
	pgInserts         map[insertKey]string
	pgDropCheckpoints string
}

type insertKey struct {
	into string
	rows int
}

// ready prepares every statement tx may use on conn, once per
// connection: the pool gives the writer the same one until it fails.
func (c *stmtCache) ready(conn *sqlite3.SQLiteConn) error {
	if c.err != nil {
		return fmt.Errorf("writer set-up: %w", c.err)
	}
	if c.all != nil && c.conn == conn {
		return nil
	}
	c.close()
	var errs []error
	prepare := func(q string) driver.Stmt {
		st, err := conn.Prepare(q)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		c.all = append(c.all, st)
		return st
	}
	c.reserve = prepare(reserveSeqSQL)
	c.dropCheckpoints = prepare(deleteCheckpointsSQL)
	c.inserts = map[insertKey]driver.Stmt{}
	for _, t := range []insertTable{c.tables.messages, c.tables.events, c.tables.usage, c.tables.checkpoints} {
		for n := 1; n <= maxInsertRows; n *= 2 {
			c.inserts[insertKey{t.into, n}] = prepare(t.query(n))
		}
	}
	// Runs are written one at a time, in order with the log.
	c.inserts[insertKey{c.tables.runs.into, 1}] = prepare(c.tables.runs.query(1))
	if err := errors.Join(errs...); err != nil {
		c.close() // a later transaction tries again
		return fmt.Errorf("prepare: %w", err)
	}
	c.conn = conn
	return nil
}

func (c *stmtCache) close() {
	for _, st := range c.all {
		_ = st.Close()
	}
	c.all, c.conn = nil, nil
}
