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
	h := c.o.Hub
	switch n.Kind {
	case kindCommit:
		c.committed(ctx, n)
	case kindDelta:
		h.Delta(n.Thread, n.Run, n.ID, n.Text)
	case kindReasoning:
		h.Reasoning(n.Thread, n.Run, n.ID, n.Text)
	case kindProgress:
		h.Progress(n.Thread, n.Run, n.ID, n.Text)
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

// committed reads a thread's records announced by another instance back
// from the database and hands them to the hub, once for all of this
// instance's clients of the thread. It reads from the last seq it read
// for the thread, so a notice that was lost is made up for by the next.
func (c *Cluster) committed(ctx context.Context, n notice) {
	c.wakeWaiters(n.Thread)
	if !c.o.Hub.watched(n.Thread) {
		delete(c.last, n.Thread)
		return
	}
	after := n.First - 1
	if l, ok := c.last[n.Thread]; ok {
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
			delete(c.last, n.Thread)
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
	c.last[n.Thread] = after
}

// catchUp runs after the listener reconnected: notices sent meanwhile
// are lost, so every client of a watched thread reads what it missed
// from the database, from its own last seq (the hub's catch-up), the
// settings are read again, and every socket's credential is checked.
func (c *Cluster) catchUp(ctx context.Context) {
	clear(c.last)
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
	if on, err := c.o.Store.Setting(ctx, settingTokenUsage); err == nil {
		c.o.Settings.adopt(on == "true")
	}
	if c.liveCredential != nil {
		c.sockets.revalidate(c.liveCredential)
	}
}

// broadcasted applies another instance's settings change here, then tells
// this instance's pages.
func (c *Cluster) broadcasted(n notice) {
	if n.Type == FrameSettings {
		var s map[string]bool
		if err := json.Unmarshal(n.Data, &s); err == nil {
			if on, ok := s[settingTokenUsage]; ok {
				c.o.Settings.adopt(on)
			}
		}
	}
	c.o.Hub.Broadcast(n.Type, n.Data)
}
