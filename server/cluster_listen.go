package server

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
)

// The receiving side: one dedicated connection LISTENs for the other
// instances' notices and feeds them into the local hub, in the order
// they were sent.

// listen keeps a connection listening until ctx ends, reconnecting after
// a failure. ready is closed once the first LISTEN is in place.
func (c *Cluster) listen(ctx context.Context, ready chan<- struct{}) {
	backoff := 100 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		conn, err := c.subscribe(ctx)
		if err == nil {
			if first {
				close(ready)
				first = false
			} else {
				c.log.Info("cluster: listening again; watched threads catch up")
				c.catchUp(ctx)
			}
			backoff = 100 * time.Millisecond
			err = c.receive(ctx, conn)
			_ = conn.Close(context.Background())
		}
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("cluster: listener lost its connection; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// listenerName is the listener connection's application_name, so an
// operator (or a test) can tell it from the pools in pg_stat_activity.
const listenerName = "herd listener"

func (c *Cluster) subscribe(ctx context.Context) (*pgx.Conn, error) {
	cc := c.cc.Copy()
	cc.RuntimeParams["application_name"] = listenerName
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{c.channel}.Sanitize()); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// receive handles notices until the connection fails or ctx ends.
func (c *Cluster) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var nt notice
		if err := json.Unmarshal([]byte(n.Payload), &nt); err != nil {
			c.log.Warn("cluster: unreadable notice", "err", err)
			continue
		}
		if nt.From == c.o.InstanceID {
			continue
		}
		c.handle(ctx, nt)
	}
}

func (c *Cluster) handle(ctx context.Context, n notice) {
	switch n.Kind {
	case kindCommit, kindDelta, kindReasoning, kindProgress:
		c.toThread(ctx, n)
	case kindBroadcast:
		c.broadcasted(n)
	case kindStop, kindCancel:
		if n.To == c.o.InstanceID {
			c.control(n)
		}
	case kindSockets:
		if n.Close != nil {
			c.sockets.apply(*n.Close)
		}
	}
}

// toThread hands a thread's notice to that thread's reader, and starts
// one unless it runs. Threads are read back side by side, each thread's
// notices in the order they came, and the commits of a thread that wait
// together are read back in one query: one read at a time for every
// thread of every instance fell seconds behind under load (make
// load-cluster).
func (c *Cluster) toThread(ctx context.Context, n notice) {
	c.threadMu.Lock()
	defer c.threadMu.Unlock()
	waiting, running := c.reading[n.Thread]
	c.reading[n.Thread] = append(waiting, n)
	if !running {
		c.wg.Go(func() { c.readThread(ctx, n.Thread) })
	}
}

// readThread handles thread's notices until none waits.
func (c *Cluster) readThread(ctx context.Context, thread string) {
	for {
		c.threadMu.Lock()
		batch := c.reading[thread]
		if len(batch) == 0 {
			delete(c.reading, thread)
			c.threadMu.Unlock()
			return
		}
		c.reading[thread] = batch[:0:0]
		c.threadMu.Unlock()
		for i := 0; i < len(batch); i++ {
			n := batch[i]
			if n.Kind != kindCommit {
				c.streamed(n)
				continue
			}
			for i+1 < len(batch) && batch[i+1].Kind == kindCommit {
				i++
				n.First, n.Last = min(n.First, batch[i].First), max(n.Last, batch[i].Last)
			}
			c.committed(ctx, n)
		}
	}
}

// streamed hands another instance's ephemeral text to the local hub.
func (c *Cluster) streamed(n notice) {
	h := c.o.Hub
	switch n.Kind {
	case kindDelta:
		h.Delta(n.Thread, n.Run, n.ID, n.Text)
	case kindReasoning:
		h.Reasoning(n.Thread, n.Run, n.ID, n.Text)
	case kindProgress:
		h.Progress(n.Thread, n.Run, n.ID, n.Text)
	}
}

// committed reads a thread's records announced by another instance back
// from the database and hands them to the hub, once for all of this
// instance's clients of the thread. It reads from the last seq it read
// for the thread, so a notice that was lost is made up for by the next.
func (c *Cluster) committed(ctx context.Context, n notice) {
	c.wakeWaiters(n.Thread)
	if !c.o.Hub.watched(n.Thread) {
		c.setLast(n.Thread, -1)
		return
	}
	after := n.First - 1
	c.threadMu.Lock()
	l, ok := c.last[n.Thread]
	c.threadMu.Unlock()
	if ok {
		if l >= n.Last {
			return
		}
		after = l
	}
	const page = 500
	for {
		recs, err := c.o.Store.Since(ctx, n.Thread, after, page)
		if err != nil {
			// The clients find the gap at the next frame and read it
			// themselves.
			c.log.Warn("cluster: read back committed records", "thread", n.Thread, "err", err)
			c.setLast(n.Thread, -1)
			return
		}
		if len(recs) > 0 {
			c.o.Hub.OnCommit(recs)
			after = recs[len(recs)-1].Seq()
		}
		if len(recs) < page {
			break
		}
	}
	c.setLast(n.Thread, after)
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
	h := c.o.Hub
	h.mu.RLock()
	for _, cs := range h.subs {
		for cl := range cs {
			cl.post(func(w *work) { w.catchUp = true })
		}
	}
	h.mu.RUnlock()
	c.waitMu.Lock()
	for thread := range c.waiters {
		c.wakeWaitersLocked(thread)
	}
	c.waitMu.Unlock()
	// The token switch's frame may have been lost too: the pages hear of a
	// change from here.
	if on, err := c.o.Store.Setting(ctx, settingTokenUsage); err != nil {
		c.log.Warn("cluster: read the token switch after reconnecting", "err", err)
	} else if c.o.Settings.adopt(on == "true") {
		c.o.Hub.Broadcast(FrameSettings, map[string]bool{settingTokenUsage: on == "true"})
	}
	if c.credentialRole != nil {
		c.sockets.revalidate(c.credentialRole)
	}
}

// broadcasted applies another instance's settings change here, then tells
// this instance's pages.
func (c *Cluster) broadcasted(n notice) {
	if n.Type == FrameSettings {
		var s map[string]bool
		if err := json.Unmarshal(n.Data, &s); err == nil {
			if on, ok := s[settingTokenUsage]; ok {
				_ = c.o.Settings.adopt(on)
			}
		}
	}
	c.o.Hub.Broadcast(n.Type, n.Data)
}
