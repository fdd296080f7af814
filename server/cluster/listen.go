package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"herd/agent/event"
	"herd/internal/lapse"
	"herd/models"
)

// The receiving side: one dedicated connection LISTENs for the other
// instances' notices and feeds them into the local hub, in the order
// they were sent.

// lapses are the failures that repeat while the database is away, each
// logged once when it begins, counted while it lasts and logged once when
// it ends (lapse.Lapse): per attempt, an outage of a few seconds filled
// the log with hundreds of lines (issue 24).
type lapses struct {
	listen, readBack, settings, console, deletes, send, renew *lapse.Lapse
}

func newLapses(log *slog.Logger) lapses {
	return lapses{
		listen:   lapse.New(log, "cluster: lost the listener connection; reconnecting"),
		readBack: lapse.New(log, "cluster: could not read back committed records; trying again"),
		settings: lapse.New(log, "cluster: could not read the token switch; trying again"),
		console:  lapse.New(log, "cluster: could not read the admin console's settings; trying again"),
		deletes:  lapse.New(log, "cluster: could not read the pending deletes; trying again"),
		send:     lapse.New(log, "cluster: could not send notices; commit and control notices are sent again"),
		renew:    lapse.New(log, "cluster: cannot renew the lease; retrying every second (the runs go on: no instance takes them while the lease is not taken over)"),
	}
}

// listen keeps a connection listening until ctx ends, reconnecting after
// a failure. ready is closed once the first LISTEN is in place. A lost
// connection is logged once, not every attempt to reconnect, and so is
// listening again.
func (c *Cluster) listen(ctx context.Context, ready chan<- struct{}) {
	backoff := 100 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		conn, err := c.o.Store.Listen(ctx, c.channel)
		if err == nil {
			if first {
				// Notices sent before now were not for this instance.
				c.ch.since = c.ch.dbNow()
				close(ready)
				first = false
			} else {
				if !c.lapses.listen.End("cluster: listening again; watched threads catch up") {
					c.log.Info("cluster: listening again; watched threads catch up")
				}
				c.catchUp(ctx)
			}
			backoff = 100 * time.Millisecond
			err = c.receive(ctx, conn)
			conn.Close()
		}
		if ctx.Err() != nil {
			return
		}
		c.lapses.listen.Fail(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// receive handles notices until the connection fails or ctx ends. A
// connection quiet for ListenIdle is pinged: one the network dropped
// without a reset (a NAT or a proxy forgetting it, a host gone) would
// otherwise look alive until TCP keepalive gives up, minutes of lost
// notices; a failed ping reconnects, and the reconnect catches up.
func (c *Cluster) receive(ctx context.Context, conn *models.Listener) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, c.o.ListenIdle)
		payload, err := conn.Wait(wctx)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			if err := pingListener(ctx, conn); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		// The listener hears its own instance's notices too, a third of
		// all with three instances: it tells them by their sender without
		// opening them.
		if strings.HasPrefix(payload, c.ch.own) {
			continue
		}
		var nt notice
		if reason := c.ch.open(payload, &nt); reason != "" {
			c.refuse(reason)
			continue
		}
		c.handle(nt)
	}
}

// pingListener checks that the listener's connection still answers.
func pingListener(ctx context.Context, conn *models.Listener) error {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := conn.Ping(pctx); err != nil {
		return fmt.Errorf("listener quiet and not answering: %w", err)
	}
	return nil
}

// handle acts on another instance's notice. Only the kinds herd sends
// are taken, and of frames only the types of event's closed set
// (receivedFrame): a frame reaches pages as herd would send it.
func (c *Cluster) handle(n notice) {
	switch n.Kind {
	case kindFrame:
		c.receivedFrame(n)
	case kindCommit, kindTitle:
		// A title call's end too: after the frames it sent went to the
		// hub, so a page rendered between them and its socket is told to
		// ask for the title.
		c.toThread(n)
	case kindPurge:
		c.purged(n)
	case kindStop, kindCancel:
		if n.To == c.o.InstanceID {
			c.control(n)
		}
	case kindSockets:
		if n.Close != nil {
			c.h.Sockets.CloseSockets(n.Close.Code, n.Close.Text, n.Close.UserID, n.Close.Creds)
		}
	default:
		c.refuse(refusedNotAllowed)
	}
}

// receivedFrame decodes another instance's frame through event's closed
// set and queues it for its thread's pages. The settings frame names the
// change only: the reader reads the setting from the database
// (broadcasted).
func (c *Cluster) receivedFrame(n notice) {
	f, err := event.Decode(n.Type, n.Data)
	if err != nil {
		c.refuse(refusedNotAllowed)
		return
	}
	if _, ok := f.(event.Settings); ok {
		c.broadcasted()
		return
	}
	if n.Thread == "" {
		c.refuse(refusedNotAllowed)
		return
	}
	n.frame, n.Data = f, nil
	c.toThread(n)
}

// toThread queues a thread's notice for the reader (readBack).
func (c *Cluster) toThread(n notice) {
	c.threadMu.Lock()
	if len(c.pending[n.Thread]) == 0 {
		c.order = append(c.order, n.Thread)
	}
	c.pending[n.Thread] = append(c.pending[n.Thread], n)
	c.threadMu.Unlock()
	c.wakeReader()
}

// readBack hands the threads' notices to the local hub until ctx ends,
// each thread's in the order they came. It takes every notice waiting at
// once and reads back the records their commits announced in one query
// for all threads (Store.InRanges): while it reads, the next notices
// gather for the next read. A Since per thread, even with a reader per
// thread, queued behind the read pool's connections at four round trips
// each and left p99 at 684 ms under make load-cluster
// (docs/PERFORMANCE.md, Several instances).
//
// It also reads the settings and the pending deletes again after the
// listener reconnected (reread), the notices of their changes being lost,
// and the token switch when another instance changed it
// (rereadSettings).
//
// A read that fails is tried again with the next read, and at the latest
// when its timer fires (readRetry): a thread that goes quiet after a
// failed read would otherwise leave its clients behind until its next
// commit, and a missed token switch would wait for the next.
func (c *Cluster) readBack(ctx context.Context) {
	var retry readRetry
	defer retry.stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		case <-retry.due():
		}
		c.threadMu.Lock()
		order, pending := c.order, c.pending
		c.order, c.pending = nil, map[string][]notice{}
		c.threadMu.Unlock()
		order = retry.into(order, pending)
		failed := c.deliver(ctx, order, pending)
		want := retry.again
		if c.reread.Swap(false) {
			want = rereads{settings: true, deletes: true}
		}
		if c.rereadSettings.Swap(false) {
			want.settings = true
		}
		retry.after(failed, c.readAgain(ctx, want))
	}
}

// readRetry holds what the reader must read again, the ranges whose read
// back failed and whether the settings and pending deletes are still to
// be read, and the timer, owned by the reader, that has them read: after
// 200 ms, doubling up to 5 s while reads keep failing.
type readRetry struct {
	failed  map[string]models.SeqRange
	again   rereads
	timer   *time.Timer
	backoff time.Duration
}

// rereads are what the reader reads from the database rather than from
// notices: the token switch, the pending deletes.
type rereads struct{ settings, deletes bool }

const (
	retryFirst = 200 * time.Millisecond
	retryMax   = 5 * time.Second
)

// due fires when what failed is to be read again; nil (never) when
// nothing did.
func (r *readRetry) due() <-chan time.Time {
	if r.timer == nil || (len(r.failed) == 0 && r.again == rereads{}) {
		return nil
	}
	return r.timer.C
}

// into adds the failed ranges to the notices to deliver, as commit
// notices before each thread's new ones (they are older), and returns
// the threads' order.
func (r *readRetry) into(order []string, pending map[string][]notice) []string {
	for th, rg := range r.failed {
		if len(pending[th]) == 0 {
			order = append(order, th)
		}
		pending[th] = append([]notice{{Kind: kindCommit, Thread: th, First: rg.After + 1, Last: rg.Upto}}, pending[th]...)
	}
	r.failed = nil
	return order
}

// after notes a delivery's failed ranges and the rereads that failed:
// the timer is armed with the next backoff, or the backoff starts over
// when every read succeeded.
func (r *readRetry) after(failed map[string]models.SeqRange, again rereads) {
	r.failed, r.again = failed, again
	if len(failed) == 0 && again == (rereads{}) {
		r.backoff = 0
		r.stop()
		return
	}
	r.backoff = min(max(2*r.backoff, retryFirst), retryMax)
	if r.timer == nil {
		r.timer = time.NewTimer(r.backoff)
		return
	}
	r.timer.Reset(r.backoff)
}

func (r *readRetry) stop() {
	if r.timer != nil {
		r.timer.Stop()
	}
}

// deliver hands the notices of threads to the hub: the ephemeral ones of
// threads without commits at once, then, once their records are read
// back, each thread's notices in order, a commit's records where its
// notice was. It returns the ranges whose read failed, for readBack to
// read again: their ephemeral frames have gone out, their records not.
func (c *Cluster) deliver(ctx context.Context, threads []string, pending map[string][]notice) map[string]models.SeqRange {
	var ranges []models.SeqRange
	for _, th := range threads {
		ns := pending[th]
		if r, ok := c.toRead(th, ns); ok {
			ranges = append(ranges, r)
		} else if !slices.ContainsFunc(ns, isCommit) {
			c.streamAll(ns, nil)
			delete(pending, th)
		}
	}
	recs, failed := c.readRanges(ctx, ranges)
	for _, th := range threads {
		if ns, ok := pending[th]; ok {
			c.streamAll(ns, recs[th])
		}
	}
	var again map[string]models.SeqRange
	for _, r := range ranges {
		if !failed[r.ThreadID] {
			c.setLast(r.ThreadID, r.Upto)
			continue
		}
		// The last seq read stays where it was: the next read of the
		// thread starts there.
		if again == nil {
			again = map[string]models.SeqRange{}
		}
		again[r.ThreadID] = r
	}
	return again
}

func isCommit(n notice) bool { return n.Kind == kindCommit }

// toRead is the range of thread's records its notices announce that this
// instance has not read back yet, from the last seq it read for the
// thread, so a notice that was lost is made up for by the next; false
// when there is nothing to read, or nobody here watches the thread.
func (c *Cluster) toRead(thread string, ns []notice) (models.SeqRange, bool) {
	first, upto := int64(-1), int64(0)
	for _, n := range ns {
		if n.Kind == kindCommit {
			if first < 0 || n.First < first {
				first = n.First
			}
			upto = max(upto, n.Last)
		}
	}
	if first < 0 {
		return models.SeqRange{}, false
	}
	c.wakeWaiters(thread)
	if !c.o.Hub.Watched(thread) {
		c.setLast(thread, -1)
		return models.SeqRange{}, false
	}
	after := first - 1
	c.threadMu.Lock()
	l, ok := c.last[thread]
	c.threadMu.Unlock()
	if ok {
		after = l
	}
	if after >= upto {
		return models.SeqRange{}, false
	}
	return models.SeqRange{ThreadID: thread, After: after, Upto: upto}, true
}

// readBackRows bounds the records one read-back query may return (a
// range's length bounds its rows: seqs have no gaps).
const readBackRows = 2000

// readRanges reads ranges back, in queries of at most readBackRows rows,
// and returns each thread's records in seq order, and the threads whose
// read failed.
func (c *Cluster) readRanges(ctx context.Context, ranges []models.SeqRange) (map[string][]models.Record, map[string]bool) {
	recs := map[string][]models.Record{}
	var failed map[string]bool
	for len(ranges) > 0 {
		var q []models.SeqRange
		q, ranges = nextQuery(ranges, readBackRows)
		got, err := c.o.Store.InRanges(ctx, q)
		if err != nil {
			c.lapses.readBack.Fail(err, "threads", len(q))
			if failed == nil {
				failed = map[string]bool{}
			}
			for _, r := range q {
				failed[r.ThreadID] = true
			}
			continue
		}
		c.lapses.readBack.End("cluster: reading back committed records again")
		for _, r := range got {
			id := r.ThreadID()
			recs[id] = append(recs[id], r)
		}
	}
	return recs, failed
}

// nextQuery takes from ranges the first ones that add up to at most rows
// records, cutting a longer first range in two.
func nextQuery(ranges []models.SeqRange, rows int64) (q, rest []models.SeqRange) {
	for i, r := range ranges {
		n := r.Upto - r.After
		if n <= rows {
			q, rows = append(q, r), rows-n
			continue
		}
		if i == 0 || rows > 0 {
			head := r
			head.Upto = r.After + rows
			tail := r
			tail.After = head.Upto
			return append(q, head), append([]models.SeqRange{tail}, ranges[i+1:]...)
		}
		return q, ranges[i:]
	}
	return q, nil
}

// streamAll hands a thread's notices to the hub in order: each commit's
// records from recs (read back in seq order), the ephemeral frames as
// they are.
func (c *Cluster) streamAll(ns []notice, recs []models.Record) {
	for _, n := range ns {
		if n.Kind != kindCommit {
			c.streamed(n)
			continue
		}
		k := 0
		for k < len(recs) && recs[k].Seq() <= n.Last {
			k++
		}
		if k > 0 {
			c.o.Hub.OnCommit(recs[:k])
			recs = recs[k:]
		}
	}
	if len(recs) > 0 {
		c.o.Hub.OnCommit(recs)
	}
}

// streamed hands another instance's ephemeral frame to the local hub, or
// notes that it began or ended naming a thread.
func (c *Cluster) streamed(n notice) {
	switch n.Kind {
	case kindFrame:
		c.o.Hub.Publish(n.Thread, n.Run, n.frame)
	case kindTitle:
		c.titles.set(n.Thread, n.Last == 1, time.Now())
	}
}

// setLast notes the last seq read back for thread; -1 forgets it.
func (c *Cluster) setLast(thread string, seq int64) {
	c.threadMu.Lock()
	defer c.threadMu.Unlock()
	if seq < 0 {
		delete(c.last, thread)
	} else {
		c.last[thread] = seq
	}
}

// catchUp runs after the listener reconnected: notices sent meanwhile
// are lost, so every client of a watched thread reads what it missed
// from the database, from its own last seq (the hub's catch-up), the
// settings are read again, and every socket's credential is checked.
func (c *Cluster) catchUp(ctx context.Context) {
	c.threadMu.Lock()
	clear(c.last)
	c.threadMu.Unlock()
	c.o.Hub.CatchUp()
	c.waitMu.Lock()
	for thread := range c.waiters {
		c.wakeWaitersLocked(thread)
	}
	c.waitMu.Unlock()
	// The token switch and deletes announced meanwhile are read by the
	// reader, which tries again until it can.
	c.reread.Store(true)
	c.wakeReader()
	c.h.Sockets.RecheckSockets()
}

// readAgain reads what want names and returns what could not be read:
// the token switch (the pages hear of a change from here), after another
// instance changed it or the listener was away, and the pending deletes
// (a delete announced while the listener was away is purged here too).
func (c *Cluster) readAgain(ctx context.Context, want rereads) (failed rereads) {
	if want.settings {
		if on, changed, err := c.o.Settings.Reload(ctx); err != nil {
			c.lapses.settings.Fail(err)
			failed.settings = true
		} else {
			c.lapses.settings.End("cluster: read the token switch again")
			if changed {
				c.o.Hub.Publish("", "", event.Settings{TokenUsage: on})
			}
		}
		if c.h.Console != nil {
			if err := c.h.Console.ReloadConsole(ctx); err != nil {
				c.lapses.console.Fail(err)
				failed.settings = true
			} else {
				c.lapses.console.End("cluster: read the admin console's settings again")
			}
		}
	}
	if want.deletes {
		if err := c.h.Deletes.ResumeDeletes(ctx); err != nil {
			c.lapses.deletes.Fail(err)
			failed.deletes = true
		} else {
			c.lapses.deletes.End("cluster: read the pending deletes again")
		}
	}
	return failed
}

// broadcasted has the reader read the token switch another instance
// changed: the database, not the notice, says what it is now, so a late
// or repeated notice cannot turn it back.
func (c *Cluster) broadcasted() {
	c.rereadSettings.Store(true)
	c.wakeReader()
}
