package models

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

func notFound(err error, what string) error {
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fmt.Errorf("store: %s: %w", what, ErrNotFound)
	}
	return fmt.Errorf("store: %s: %w", what, err)
}

// take reads the one row q selects, or ErrNotFound; what names the row in
// the error.
func take[T any](q *gorm.DB, what string) (*T, error) {
	var row T
	if err := q.Take(&row).Error; err != nil {
		return nil, notFound(err, what)
	}
	return &row, nil
}

// list reads every row q selects; what names the rows in the error.
func list[T any](q *gorm.DB, what string) ([]T, error) {
	var rows []T
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: list %s: %w", what, err)
	}
	return rows, nil
}

// affected is the error of res, a change made by what to one row that
// must exist: ErrNotFound when it changed none.
func affected(res *gorm.DB, what string) error {
	if res.Error != nil {
		return fmt.Errorf("store: %s: %w", what, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("store: %s: %w", what, ErrNotFound)
	}
	return nil
}

// CreateThread creates a thread owned by userID.
func (s *Store) CreateThread(ctx context.Context, userID, title string) (*Thread, error) {
	t := &Thread{ID: uuid.NewString(), UserID: userID, Title: title}
	if err := s.w.WithContext(ctx).Create(t).Error; err != nil {
		return nil, fmt.Errorf("store: create thread: %w", err)
	}
	return t, nil
}

// Thread returns the thread id if userID owns it. Admins see only their
// own threads too: a thread is private to its owner.
func (s *Store) Thread(ctx context.Context, userID, id string) (*Thread, error) {
	return take[Thread](s.r.WithContext(ctx).Where("id = ? AND user_id = ? AND delete_at IS NULL", id, userID), "thread")
}

// Threads lists userID's threads, most recently active first.
func (s *Store) Threads(ctx context.Context, userID string) ([]Thread, error) {
	return list[Thread](s.r.WithContext(ctx).Where("user_id = ?", userID).Order("updated_at DESC, id"), "threads")
}

// SearchThreads lists up to limit of userID's threads whose title
// contains q (any case), most recently active first.
func (s *Store) SearchThreads(ctx context.Context, userID, q string, limit int) ([]Thread, error) {
	pattern := "%" + strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(strings.ToLower(q)) + "%"
	return list[Thread](s.r.WithContext(ctx).
		Where(`user_id = ? AND delete_at IS NULL AND LOWER(title) LIKE ? ESCAPE '\'`, userID, pattern).
		Order("updated_at DESC, id").Limit(limit), "threads")
}

// ThreadCursor is the position of a thread in its owner's list: a page
// of threads after it starts with the next less recently active one.
type ThreadCursor struct {
	UpdatedAt time.Time
	ID        string
}

// ThreadsPage returns up to limit of userID's threads after cursor (nil:
// from the most recently active), in the order of Threads, and whether
// more follow. The position is a key, not an offset, so threads created
// while a user pages never shift the pages after the first.
func (s *Store) ThreadsPage(ctx context.Context, userID string, after *ThreadCursor, limit int) ([]Thread, bool, error) {
	q := s.r.WithContext(ctx).Where("user_id = ? AND delete_at IS NULL", userID)
	if after != nil {
		// Times are stored in UTC (gormConfig's NowFunc, the Writer), so
		// the bound binds as the same text the rows hold.
		at := after.UpdatedAt.UTC()
		q = q.Where("updated_at < ? OR (updated_at = ? AND id > ?)", at, at, after.ID)
	}
	ts, err := list[Thread](q.Order("updated_at DESC, id").Limit(limit+1), "threads")
	if err != nil {
		return nil, false, err
	}
	if len(ts) > limit {
		return ts[:limit], true, nil
	}
	return ts, false, nil
}

// RenameThread sets the title of userID's thread id.
func (s *Store) RenameThread(ctx context.Context, userID, id, title string) (*Thread, error) {
	res := s.w.WithContext(ctx).Model(&Thread{}).Where("id = ? AND user_id = ?", id, userID).
		Updates(map[string]any{"title": title, "updated_at": s.now().UTC()})
	if err := affected(res, "rename thread"); err != nil {
		return nil, err
	}
	return s.threadW(ctx, userID, id)
}

// threadW reads through the writer so a caller sees its own write at once.
func (s *Store) threadW(ctx context.Context, userID, id string) (*Thread, error) {
	return take[Thread](s.w.WithContext(ctx).Where("id = ? AND user_id = ?", id, userID), "thread")
}

// ScheduleThreadDelete deletes userID's thread id from their view now and
// for good at at (PurgeThread), unless RestoreThread comes first.
func (s *Store) ScheduleThreadDelete(ctx context.Context, userID, id string, at time.Time) error {
	return affected(s.w.WithContext(ctx).Model(&Thread{}).Where("id = ? AND user_id = ? AND delete_at IS NULL", id, userID).
		Update("delete_at", at.UTC()), "delete thread")
}

// RestoreThread undoes ScheduleThreadDelete while the thread is still
// there; ErrNotFound once it is gone (or was never deleted).
func (s *Store) RestoreThread(ctx context.Context, userID, id string) (*Thread, error) {
	err := affected(s.w.WithContext(ctx).Model(&Thread{}).Where("id = ? AND user_id = ? AND delete_at IS NOT NULL", id, userID).
		Update("delete_at", nil), "restore thread")
	if err != nil {
		return nil, err
	}
	return s.Thread(ctx, userID, id)
}

// ScheduledDeletes lists the threads waiting to be removed for good, for
// a server that starts to finish what the last one scheduled.
func (s *Store) ScheduledDeletes(ctx context.Context) ([]Thread, error) {
	return list[Thread](s.r.WithContext(ctx).Where("delete_at IS NOT NULL").Order("delete_at"), "threads")
}

// PurgeThread removes a thread whose deletion is due, with everything
// recorded in it but its usage ledger rows; a NotDueError when it is not due yet, ErrNotFound when
// it was restored, is already gone, or another instance is removing it.
// Its owner's undo and the purge cannot both win.
//
// On PostgreSQL every instance schedules every pending delete, so they
// all try at once: the first to take the thread's advisory lock claims
// the purge and the others give up at once, rather than wait on the
// thread's row while it deletes the thread's records and then find
// nothing (which is what the delete alone would make of them: it too
// removes the thread once, and the lock only spares the wait). It runs
// on the direct pool: on PostgreSQL every instance's attempt would
// otherwise queue on its Writer's one connection, ahead of the commits.
func (s *Store) PurgeThread(ctx context.Context, id string, now time.Time) error {
	return s.direct(ctx).Transaction(func(tx *gorm.DB) error {
		if s.pg {
			var claimed bool
			if err := tx.Raw("SELECT pg_try_advisory_xact_lock(hashtext(? || current_schema()))", "herd purge "+id).Scan(&claimed).Error; err != nil {
				return fmt.Errorf("store: claim a thread's purge: %w", err)
			}
			if !claimed {
				return fmt.Errorf("store: purge thread: another instance is removing it: %w", ErrNotFound)
			}
		}
		err := deleteThreadTx(tx, id, "delete_at IS NOT NULL AND delete_at <= ?", now.UTC())
		if errors.Is(err, ErrNotFound) {
			return notDue(tx, id, now, err)
		}
		return err
	})
}

// NotDueError is PurgeThread's answer for a delete that is not due by the
// caller's clock: another instance, whose clock is ahead, scheduled it.
type NotDueError struct{ At time.Time }

func (e *NotDueError) Error() string {
	return "store: purge thread: not due until " + e.At.Format(time.RFC3339Nano)
}

// notDue is a NotDueError when thread id is still to be deleted after
// now, else err.
func notDue(tx *gorm.DB, id string, now time.Time, err error) error {
	var t Thread
	if tx.Select("delete_at").Where("id = ? AND delete_at IS NOT NULL", id).Take(&t).Error == nil && t.DeleteAt.After(now) {
		return &NotDueError{At: *t.DeleteAt}
	}
	return err
}

// DeleteThread deletes userID's thread id and everything recorded in it
// but its usage ledger rows.
// Callers stop the thread's run first; records the Writer still holds for
// it are dropped with ErrNotFound.
func (s *Store) DeleteThread(ctx context.Context, userID, id string) error {
	return s.deleteThread(ctx, id, "user_id = ?", userID)
}

// deleteThread deletes thread id, if it also matches cond, and everything
// recorded in it but its ledger rows, in one transaction.
func (s *Store) deleteThread(ctx context.Context, id, cond string, args ...any) error {
	return s.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return deleteThreadTx(tx, id, cond, args...)
	})
}

// deleteThreadTx is deleteThread inside tx.
func deleteThreadTx(tx *gorm.DB, id, cond string, args ...any) error {
	if err := affected(tx.Where("id = ?", id).Where(cond, args...).Delete(&Thread{}), "delete thread"); err != nil {
		return err
	}
	// The ledger stays: it bills the calls the thread made, for budgets
	// and the admin's accounting (docs/DESIGN.md §6).
	for _, m := range []any{&Message{}, &RunEvent{}, &Run{}, &Checkpoint{}} {
		if err := tx.Where("thread_id = ?", id).Delete(m).Error; err != nil {
			return fmt.Errorf("store: delete thread records: %w", err)
		}
	}
	return nil
}

// Messages returns the thread's messages in sequence order.
func (s *Store) Messages(ctx context.Context, threadID string) ([]Message, error) {
	return list[Message](s.r.WithContext(ctx).Where("thread_id = ?", threadID).Order("seq"), "messages")
}

// MessagesBefore returns a page of the thread's messages with seq <
// before (0: the newest page), in sequence order, and whether older
// messages exist. A page holds up to limit human and AI messages, each
// with its tool results: it starts at a human or AI message, never at a
// tool result, so a call and its results are always on one page and the
// cards of a page are whole. The seq of its first message is the next
// page's before; inserts only ever add seqs above it.
func (s *Store) MessagesBefore(ctx context.Context, threadID string, before int64, limit int) ([]Message, bool, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	var bounds []int64
	err := s.r.WithContext(ctx).Model(&Message{}).
		Where("thread_id = ? AND seq < ? AND type <> ?", threadID, before, "tool").
		Order("seq DESC").Offset(limit-1).Limit(2).Pluck("seq", &bounds).Error
	if err != nil {
		return nil, false, fmt.Errorf("store: message page: %w", err)
	}
	from := int64(0) // fewer than limit: the page reaches the start
	if len(bounds) > 0 {
		from = bounds[0]
	}
	ms, err := list[Message](s.r.WithContext(ctx).Where("thread_id = ? AND seq >= ? AND seq < ?", threadID, from, before).Order("seq"), "messages")
	if err != nil {
		return nil, false, err
	}
	return ms, len(bounds) > 1, nil
}

// EventFilter selects events of one thread.
type EventFilter struct {
	TaskID     string
	RunID      string
	EventTypes []string
	Category   string
	AfterSeq   int64
	Limit      int // ≤ 0 means no limit
}

// Events returns the thread's events matching f in sequence order, and
// whether more match beyond Limit.
func (s *Store) Events(ctx context.Context, threadID string, f EventFilter) ([]RunEvent, bool, error) {
	q := s.r.WithContext(ctx).Where("thread_id = ? AND seq > ?", threadID, f.AfterSeq)
	if f.TaskID != "" {
		q = q.Where("task_id = ?", f.TaskID)
	}
	if f.RunID != "" {
		q = q.Where("run_id = ?", f.RunID)
	}
	if len(f.EventTypes) > 0 {
		q = q.Where("event_type IN ?", f.EventTypes)
	}
	if f.Category != "" {
		q = q.Where("category = ?", f.Category)
	}
	q = q.Order("seq")
	if f.Limit > 0 {
		q = q.Limit(f.Limit + 1)
	}
	es, err := list[RunEvent](q, "events")
	if err != nil {
		return nil, false, err
	}
	more := f.Limit > 0 && len(es) > f.Limit
	if more {
		es = es[:f.Limit]
	}
	return es, more, nil
}

// Since returns up to limit of the thread's persisted records (messages and
// events) with seq > after, in sequence order: the WebSocket replay.
//
// Both tables are read in one transaction, so from one snapshot: a commit
// between two separate reads could add events past messages the first read
// missed, and the page would skip them (TestSinceReadsOneSnapshot).
func (s *Store) Since(ctx context.Context, threadID string, after int64, limit int) ([]Record, error) {
	var (
		ms []Message
		es []RunEvent
	)
	err := s.r.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("thread_id = ? AND seq > ?", threadID, after).Order("seq").Limit(limit).Find(&ms).Error; err != nil {
			return fmt.Errorf("messages: %w", err)
		}
		if err := tx.Where("thread_id = ? AND seq > ?", threadID, after).Order("seq").Limit(limit).Find(&es).Error; err != nil {
			return fmt.Errorf("events: %w", err)
		}
		return nil
	}, s.snapshotTx())
	if err != nil {
		return nil, fmt.Errorf("store: replay: %w", err)
	}
	out := make([]Record, 0, min(limit, len(ms)+len(es)))
	i, j := 0, 0
	for len(out) < limit && (i < len(ms) || j < len(es)) {
		if j >= len(es) || (i < len(ms) && ms[i].Seq < es[j].Seq) {
			out = append(out, Record{Message: &ms[i]})
			i++
		} else {
			out = append(out, Record{Event: &es[j]})
			j++
		}
	}
	return out, nil
}

// LastSeq returns the thread's last sequence value.
func (s *Store) LastSeq(ctx context.Context, threadID string) (int64, error) {
	t, err := take[Thread](s.r.WithContext(ctx).Select("last_seq").Where("id = ?", threadID), "thread")
	if err != nil {
		return 0, err
	}
	return t.LastSeq, nil
}

// CardEventsBetween returns what the cards of one page of messages are
// rebuilt from besides its messages: the events with from ≤ seq < to (to
// 0: no upper bound), which lie between the page's first message and the
// next page's. It takes two queries whatever the number of cards: every
// queued/start/end row and every task's workspace.changed row in that
// range, and the latest step and the latest
// wait for the model of each task of activeRunID, and of its lead (none
// when it is ""). Steps themselves stay in the database until a card is
// expanded.
func (s *Store) CardEventsBetween(ctx context.Context, threadID, activeRunID string, from, to int64) ([]RunEvent, error) {
	if to <= 0 {
		to = math.MaxInt64
	}
	var es []RunEvent
	err := s.r.WithContext(ctx).
		Where("thread_id = ? AND seq >= ? AND seq < ? AND (event_type IN ? OR (event_type = ? AND task_id <> ''))",
			threadID, from, to, []string{"subagent.queued", "subagent.start", "subagent.end"}, "workspace.changed").
		Order("seq").Find(&es).Error
	if err != nil {
		return nil, fmt.Errorf("store: card events: %w", err)
	}
	if activeRunID == "" {
		return es, nil
	}
	var steps []RunEvent
	err = s.r.WithContext(ctx).
		Where("id IN (?)", s.r.Model(&RunEvent{}).Select("MAX(id)").
			Where("thread_id = ? AND run_id = ? AND event_type IN ? AND seq >= ? AND seq < ?", threadID, activeRunID, []string{"subagent.step", "subagent.wait", "run.wait"}, from, to).
			Group("task_id, event_type")).
		Order("seq").Find(&steps).Error
	if err != nil {
		return nil, fmt.Errorf("store: card steps: %w", err)
	}
	es = append(es, steps...)
	slices.SortFunc(es, func(a, b RunEvent) int { return cmp.Compare(a.Seq, b.Seq) })
	return es, nil
}
