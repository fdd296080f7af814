// Package purge removes deleted threads for good once their undo window
// is over: a timer per thread, so nothing polls, here and, through a
// relay, on the other instances. It owns the timers; the store is reached
// through the interface declared here.
package purge

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"herd/models"
)

// Purger removes deleted threads for good once their undo window is
// over. A server that stops with deletions pending leaves them in the
// database (threads.delete_at) for the next one (Resume).
type Purger struct {
	store  Store
	now    func() time.Time
	log    *slog.Logger
	remove func(threadID string) // the thread's workspace, once it is gone
	// relay tells the other instances of a delete scheduled here, or
	// undone (a zero at), so that each purges it on time even if this one
	// is gone by then (the cluster's RelayPurge); nil on one instance.
	relay func(id string, at time.Time)

	mu     sync.Mutex
	timers map[string]*time.Timer
	closed bool
	wg     sync.WaitGroup // purges in progress
}

// Store removes a thread whose delete is due and lists the deletes
// pending: models.Store.
type Store interface {
	PurgeThread(ctx context.Context, id string, now time.Time) error
	ScheduledDeletes(ctx context.Context) ([]models.Thread, error)
}

// New returns a Purger: remove is told each thread it removed (its
// workspace goes with it), relay each delete scheduled or undone here
// (nil on one instance).
func New(store Store, now func() time.Time, log *slog.Logger, remove func(threadID string), relay func(id string, at time.Time)) *Purger {
	return &Purger{store: store, now: now, log: log, remove: remove, relay: relay, timers: map[string]*time.Timer{}}
}

// Schedule purges thread id at at (at once when at has passed), here
// and on the other instances.
func (p *Purger) Schedule(id string, at time.Time) {
	p.Set(id, at)
	if p.relay != nil {
		p.relay(id, at)
	}
}

// Set purges thread id at at, here: another instance took its delete,
// and whichever instance claims it first removes it.
func (p *Purger) Set(id string, at time.Time) {
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

// Cancel forgets id's purge, here and on the other instances: the owner
// undid the delete. The database decides the race with a timer that has
// already fired (PurgeThread).
func (p *Purger) Cancel(id string) {
	p.Unset(id)
	if p.relay != nil {
		p.relay(id, time.Time{})
	}
}

// Unset forgets id's purge here.
func (p *Purger) Unset(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.timers[id]; t != nil {
		t.Stop()
		delete(p.timers, id)
	}
}

func (p *Purger) fire(id string) {
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
		p.Set(id, early.At)
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

// Close stops every pending timer and waits for purges in progress.
func (p *Purger) Close() {
	p.mu.Lock()
	p.closed = true
	for id, t := range p.timers {
		t.Stop()
		delete(p.timers, id)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// Resume schedules the deletes a previous server left pending.
func (p *Purger) Resume(ctx context.Context) error {
	ts, err := p.store.ScheduledDeletes(ctx)
	if err != nil {
		return err
	}
	for _, t := range ts {
		p.Set(t.ID, *t.DeleteAt)
	}
	return nil
}
