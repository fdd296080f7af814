package cluster

import (
	"context"
	"errors"
	"slices"
	"time"

	"herd/agent"
	"herd/models"
)

// lookupTimeout bounds the database read behind a control request.
const lookupTimeout = 5 * time.Second

// remoteRun is the thread's running run when another instance executes
// it; nil when there is none or this instance does (then the runtime
// knows it, and a row it does not know is one a failed write left).
func (c *Cluster) remoteRun(threadID string) *models.Run {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	r, err := c.o.Store.ActiveRun(ctx, threadID)
	if err != nil {
		if !errors.Is(err, models.ErrNotFound) {
			c.log.Warn("cluster: look up the active run", "thread", threadID, "err", err)
		}
		return nil
	}
	if r.InstanceID == c.o.InstanceID {
		return nil
	}
	return r
}

// ActiveRun is the thread's running run on any instance.
func (c *Cluster) ActiveRun(threadID string) (string, bool) {
	if id, ok := c.h.Runs.ActiveRun(threadID); ok {
		return id, true
	}
	if r := c.remoteRun(threadID); r != nil {
		return r.ID, true
	}
	return "", false
}

// Cancel stops run runID here, or tells the instance executing it.
func (c *Cluster) Cancel(threadID, runID string) error {
	err := c.h.Runs.Cancel(threadID, runID)
	if !errors.Is(err, agent.ErrNoActiveRun) {
		return err
	}
	r := c.remoteRun(threadID)
	if r == nil || r.ID != runID {
		return err
	}
	c.announce(notice{Kind: kindStop, To: r.InstanceID, Thread: threadID, Run: runID})
	return nil
}

// CancelTask cancels a card here, or tells the instance executing its
// run.
func (c *Cluster) CancelTask(threadID, taskID string) error {
	err := c.h.Runs.CancelTask(threadID, taskID)
	if !errors.Is(err, agent.ErrNoTask) {
		return err
	}
	r := c.remoteRun(threadID)
	if r == nil || !c.taskOpen(threadID, r.ID, taskID) {
		return err
	}
	c.announce(notice{Kind: kindCancel, To: r.InstanceID, Thread: threadID, Run: r.ID, ID: taskID})
	return nil
}

// taskOpen reports whether task taskID of run runID has started (or
// queued) and not ended, as its events say: a card that is not there, or
// is over, answers 404 as on the instance running it.
func (c *Cluster) taskOpen(threadID, runID, taskID string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	evs, _, err := c.o.Store.Events(ctx, threadID, models.EventFilter{RunID: runID, TaskID: taskID})
	if err != nil {
		c.log.Warn("cluster: look up a task", "thread", threadID, "task", taskID, "err", err)
		return false
	}
	end := agent.TaskEnd{}.EventType()
	return len(evs) > 0 && !slices.ContainsFunc(evs, func(e models.RunEvent) bool { return e.EventType == end })
}

// control acts on a Stop or a card's cancel addressed to this instance.
func (c *Cluster) control(n notice) {
	var err error
	switch n.Kind {
	case kindStop:
		err = c.h.Runs.Cancel(n.Thread, n.Run)
	case kindCancel:
		err = c.h.Runs.CancelTask(n.Thread, n.ID)
	}
	if err != nil {
		c.log.Info("cluster: control for work that has ended", "kind", n.Kind, "thread", n.Thread, "run", n.Run, "err", err)
	}
}

// Wait blocks until the thread has no running run on any instance, or ctx
// ends. Another instance's run is known to end from its notices.
func (c *Cluster) Wait(ctx context.Context, threadID string) error {
	if err := c.h.Runs.Wait(ctx, threadID); err != nil {
		return err
	}
	for {
		woken := c.addWaiter(threadID)
		r := c.remoteRun(threadID)
		if r == nil {
			c.dropWaiter(threadID, woken)
			return nil
		}
		select {
		case <-woken:
		case <-ctx.Done():
			c.dropWaiter(threadID, woken)
			return ctx.Err()
		}
	}
}

func (c *Cluster) addWaiter(threadID string) chan struct{} {
	ch := make(chan struct{})
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	c.waiters[threadID] = append(c.waiters[threadID], ch)
	return ch
}

func (c *Cluster) dropWaiter(threadID string, ch chan struct{}) {
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	ws := c.waiters[threadID]
	for i, w := range ws {
		if w == ch {
			c.waiters[threadID] = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(c.waiters[threadID]) == 0 {
		delete(c.waiters, threadID)
	}
}

// wakeWaiters tells the Wait calls of a thread that something of it
// committed elsewhere: they look again.
func (c *Cluster) wakeWaiters(threadID string) {
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	c.wakeWaitersLocked(threadID)
}

func (c *Cluster) wakeWaitersLocked(threadID string) {
	for _, ch := range c.waiters[threadID] {
		close(ch)
	}
	delete(c.waiters, threadID)
}

// Leases (docs/DESIGN.md §14).

// register takes a new lease, and fences every write of a run by it.
func (c *Cluster) register(ctx context.Context) error {
	epoch, err := c.o.Store.RegisterInstance(ctx, c.o.InstanceID, c.addr, c.o.Lease)
	if err != nil {
		return err
	}
	c.epoch.Store(epoch)
	return nil
}

// renewRetry is how soon a renewal that failed is tried again.
const renewRetry = time.Second

// renew renews this instance's lease every Renew (sooner after a failure
// or a fenced write) and then takes over the runs of instances whose
// lease has run out. A lease another instance took over is rejoined.
func (c *Cluster) renew(ctx context.Context) {
	t := time.NewTimer(c.o.Renew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.fenced:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		t.Reset(c.renewOnce(ctx))
	}
}

// renewOnce renews the lease once and says when to renew next.
func (c *Cluster) renewOnce(ctx context.Context) time.Duration {
	rctx, cancel := context.WithTimeout(ctx, c.o.Renew)
	err := c.o.Store.RenewLease(rctx, c.o.InstanceID, c.epoch.Load(), c.o.Lease)
	cancel()
	switch {
	case errors.Is(err, models.ErrLeaseLost):
		c.rejoin(ctx)
		return c.o.Renew
	case err != nil:
		c.lapses.renew.Fail(err)
		return min(renewRetry, c.o.Renew)
	}
	if c.lapses.renew.End("cluster: lease renewed again") {
		// The others may have been cut off as long: each gets a lease
		// to renew before this instance judges it.
		c.settledAt = time.Now().Add(c.o.Lease)
	}
	if err := c.loadKeys(ctx); err != nil {
		c.log.Warn("cluster: read the channel keys again; keeping those read before", "err", err)
	}
	if !time.Now().Before(c.settledAt) {
		c.sweep(ctx)
	}
	return c.o.Renew
}

// abandonWait bounds how long a rejoin waits for the abandoned runs to
// stop; their writes are refused meanwhile whatever they do.
const abandonWait = 10 * time.Second

// rejoin follows a lease another instance took over, with this
// instance's runs: it stops writing at once (a zero fence refuses every
// write of a run), stops those runs without writing, and registers
// again with a new epoch, retrying until the database answers. The
// instance stays up throughout; it takes no runs until it is back.
func (c *Cluster) rejoin(ctx context.Context) {
	c.rejoining.Store(true)
	defer c.rejoining.Store(false)
	c.epoch.Store(0)
	c.log.Error("cluster: another instance took over this instance's lease and its runs; stopping them here without writing, and rejoining")
	actx, cancel := context.WithTimeout(ctx, abandonWait)
	n := c.h.Runs.Abandon(actx)
	cancel()
	for wait := renewRetry; ; wait = min(2*wait, c.o.Renew) {
		rctx, cancel := context.WithTimeout(ctx, c.o.Renew)
		err := c.register(rctx)
		cancel()
		if err == nil {
			break
		}
		c.log.Warn("cluster: rejoin: register again", "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
	c.settledAt = time.Now().Add(c.o.Lease)
	c.unclosed = nil // taken with the lease
	c.log.Info("cluster: rejoined with a new lease", "runs_abandoned", n)
}

// sweep closes the runs of dead instances that this instance takes over.
func (c *Cluster) sweep(ctx context.Context) {
	runs, err := c.o.Store.TakeOrphanRuns(ctx, c.o.InstanceID, c.epoch.Load(), c.o.Lease)
	if err != nil {
		c.log.Warn("cluster: look for runs of lost instances", "err", err)
	}
	// Runs taken earlier that could not be closed are in this instance's
	// name now: no other instance takes them while it lives.
	runs = append(c.unclosed, runs...)
	c.unclosed = nil
	if len(runs) == 0 {
		return
	}
	resumed, closed, err := c.h.Runs.Continue(ctx, c.o.Store, runs, agent.ResumeFailover)
	if n := resumed + closed; err != nil {
		c.unclosed = runs[n:]
		c.log.Error("cluster: take over runs of a lost instance; trying again at the next renewal", "done", n, "of", len(runs), "err", err)
		return
	}
	c.log.Warn("cluster: took over the runs of lost instances", "resumed", resumed, "closed", closed)
}

// RelayPurge tells the other instances that thread id's delete is due at
// at, or was undone (a zero at): each schedules its purge, so a delete
// is purged on time even when the instance that took it is gone, and the
// first instance to claim it removes it (models.Store.PurgeThread). The
// notice is sent before the request answers, not queued: an instance
// killed just after a delete has told the others. Should the database
// not take it now, it is queued (and held) like any other.
func (c *Cluster) RelayPurge(id string, at time.Time) {
	var us int64
	if !at.IsZero() {
		us = at.UnixMicro() // the database's precision: not a moment early
	}
	n := notice{Kind: kindPurge, Thread: id, First: us}
	if c.channel != "" {
		ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
		defer cancel()
		e := encoders.Get().(*noticeEncoder)
		payload, err := c.ch.seal(e, &n)
		encoders.Put(e)
		if err == nil {
			if err = c.o.Store.Notify(ctx, c.channel, payload); err == nil {
				return
			}
		}
		c.log.Warn("cluster: tell the other instances of a delete; queued", "thread", id, "err", err)
	}
	c.announce(n)
}

// purged schedules or forgets another instance's delete here.
func (c *Cluster) purged(n notice) {
	if n.First > 0 {
		c.h.Deletes.ScheduleDelete(n.Thread, time.UnixMicro(n.First))
		return
	}
	c.h.Deletes.UnscheduleDelete(n.Thread)
}
