package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"herd/models"
)

// defaultUndoWindow is how long a deleted thread can be brought back.
const defaultUndoWindow = 10 * time.Second

// purger removes deleted threads for good once their undo window is over:
// a timer per thread, so nothing polls. A server that stops with deletions
// pending leaves them in the database (threads.delete_at) for the next one
// (Server.ResumeDeletes).
type purger struct {
	store  *models.Store
	now    func() time.Time
	log    *slog.Logger
	remove func(threadID string) // the thread's workspace, once it is gone
	// relay tells the other instances of a delete scheduled here, or
	// undone (a zero at), so that each purges it on time even if this one
	// is gone by then (Cluster.RelayPurge); nil on one instance.
	relay func(id string, at time.Time)

	mu     sync.Mutex
	timers map[string]*time.Timer
	closed bool
	wg     sync.WaitGroup // purges in progress
}

func newPurger(store *models.Store, now func() time.Time, log *slog.Logger, remove func(string), relay func(string, time.Time)) *purger {
	return &purger{store: store, now: now, log: log, remove: remove, relay: relay, timers: map[string]*time.Timer{}}
}

// schedule purges thread id at at (at once when at has passed), here
// and on the other instances.
func (p *purger) schedule(id string, at time.Time) {
	p.set(id, at)
	if p.relay != nil {
		p.relay(id, at)
	}
}

// set purges thread id at at, here.
func (p *purger) set(id string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if old := p.timers[id]; old != nil {
		old.Stop()
	}
	p.timers[id] = time.AfterFunc(at.Sub(p.now()), func() { p.fire(id) })
}

// cancel forgets id's purge, here and on the other instances: the owner
// undid the delete. The database decides the race with a timer that has
// already fired (PurgeThread).
func (p *purger) cancel(id string) {
	p.unset(id)
	if p.relay != nil {
		p.relay(id, time.Time{})
	}
}

// unset forgets id's purge here.
func (p *purger) unset(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.timers[id]; t != nil {
		t.Stop()
		delete(p.timers, id)
	}
}

func (p *purger) fire(id string) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	delete(p.timers, id)
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var early *models.NotDueError
	switch err := p.store.PurgeThread(ctx, id, p.now()); {
	case errors.As(err, &early):
		// Scheduled by an instance whose clock is ahead of this one's.
		p.set(id, early.At)
	case err == nil:
		p.log.Info("a deleted thread was removed for good", "thread", id)
		p.remove(id)
	case errors.Is(err, models.ErrNotFound):
		// Restored in the meantime, or another instance removes it.
		p.log.Debug("a deleted thread's purge found nothing to remove here", "thread", id, "err", err)
	default:
		// Still marked: the next server start tries again.
		p.log.Error("a deleted thread was not removed", "thread", id, "err", err)
	}
}

// close stops every pending timer and waits for purges in progress.
func (p *purger) close() {
	p.mu.Lock()
	p.closed = true
	for id, t := range p.timers {
		t.Stop()
		delete(p.timers, id)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// ResumeDeletes schedules the deletions a previous server left pending.
func (s *Server) ResumeDeletes(ctx context.Context) error {
	ts, err := s.store.ScheduledDeletes(ctx)
	if err != nil {
		return err
	}
	for _, t := range ts {
		s.purger.set(t.ID, *t.DeleteAt)
	}
	return nil
}

// Close stops the server's own background work (pending purges stay in
// the database). Call it after the HTTP server has stopped.
func (s *Server) Close() {
	s.titles.Close()
	s.purger.close()
}
