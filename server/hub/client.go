package hub

// This file holds the client and the raw RFC 6455 frame writer
// (appendTextHeader, flush) together on purpose: the client writes the
// frames the hub encoded straight on the socket, under gorilla, so the
// header encoding and the only code that writes frames must be read and
// changed as one (frames.go's wireFrame builds what flush writes).

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// client is one WebSocket connection subscribed to one thread.
//
// An idle client holds no goroutine but its read loop and no buffer: what
// the hub offers it is noted in todo, and the first offer starts a drain
// goroutine that writes everything noted, then ends once todo is empty.
// Only the drain writes frames on the socket, so frames keep their order
// and the seq rules below need no lock.
type client struct {
	h        *Hub
	threadID string
	conn     *websocket.Conn
	// raw is the socket under gorilla and under any listener wrapper:
	// frames go out as they are encoded, several in one writev.
	raw net.Conn
	// ctx ends with the socket's credential (sockets.go) or the server.
	ctx context.Context

	mu       sync.Mutex
	todo     work
	draining bool // a drain goroutine is running
	dead     bool // the socket is closing: nothing more is drained
	spare    []*frame
	drains   sync.WaitGroup

	// Owned by the running drain.
	last  int64 // the last seq written
	first bool  // the first catch-up checks the client's cursor
	// stale: the client's seqs are another history's (Cursor); its first
	// catch-up is a resync.
	stale bool
	out   net.Buffers
	size  int // bytes in out
}

// work is what the drain has to do, in this order: answer a ping, catch
// up from the database, write the frames, say farewell, ping.
type work struct {
	pong     *string
	catchUp  bool // the client just joined, or fell behind
	frames   []*frame
	farewell bool   // the hub is closing
	ping     *frame // a keepalive is due: this frame, then a ping
}

func (w *work) empty() bool {
	return w.pong == nil && !w.catchUp && len(w.frames) == 0 && !w.farewell && w.ping == nil
}

func newClient(ctx context.Context, h *Hub, conn *websocket.Conn, threadID string, from Cursor) *client {
	raw := conn.NetConn()
	if u, ok := raw.(interface{ NetConn() net.Conn }); ok {
		raw = u.NetConn()
	}
	// A client with nothing yet (seq 0) has nothing stale to replace.
	stale := from.Seq > 0 && from.Generation != "" && h.opts.Generation != "" && from.Generation != h.opts.Generation
	return &client{ctx: ctx, h: h, threadID: threadID, conn: conn, raw: raw, last: from.Seq, first: true, stale: stale, todo: work{catchUp: true}}
}

// offer queues frames without ever blocking the publisher. A client that
// has more than SendBuffer frames waiting has fallen behind: the new ones
// are dropped, and it reads what it missed from the database, where every
// persisted frame is committed before it is offered.
func (c *client) offer(fs ...*frame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return
	}
	w := &c.todo
	if len(w.frames)+len(fs) > c.h.opts.SendBuffer {
		w.catchUp = true
	} else {
		if w.frames == nil {
			w.frames, c.spare = c.spare, nil
		}
		w.frames = append(w.frames, fs...)
	}
	c.startLocked()
}

// post notes other work (a ping, a pong, a farewell) and starts a drain
// unless one runs.
func (c *client) post(note func(*work)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return
	}
	note(&c.todo)
	c.startLocked()
}

// startLocked starts a drain if there is work and none runs; c.mu is held.
func (c *client) startLocked() {
	if !c.draining && !c.todo.empty() {
		c.draining = true
		c.drains.Add(1)
		go c.drain()
	}
}

// drain does the noted work until there is none; a failed write, or a
// farewell, closes the socket.
func (c *client) drain() {
	defer c.drains.Done()
	for {
		c.mu.Lock()
		w := c.todo
		c.todo = work{}
		if c.dead || w.empty() {
			c.draining = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if !c.do(w) {
			c.hangUp()
			return
		}
		if cap(w.frames) <= 64 {
			clear(w.frames)
			c.mu.Lock()
			c.spare = w.frames[:0]
			c.mu.Unlock()
		}
	}
}

// hangUp closes the socket; nothing is drained after it.
func (c *client) hangUp() {
	c.mu.Lock()
	c.dead = true
	c.todo = work{}
	c.mu.Unlock()
	_ = c.conn.Close()
}

// do writes one batch of work, and reports whether the socket stays open.
func (c *client) do(w work) bool {
	if w.pong != nil && c.conn.WriteControl(websocket.PongMessage, []byte(*w.pong), c.deadline()) != nil {
		return false
	}
	if w.catchUp && !c.catchUp() {
		return false
	}
	for fs := w.frames; len(fs) > 0; {
		var gap, ok bool
		if fs, gap, ok = c.queue(fs); !ok || !c.flush() {
			return false
		}
		if gap && !c.catchUp() {
			return false
		}
	}
	if w.farewell {
		c.farewell()
		return false
	}
	if w.ping != nil {
		return c.add(w.ping) && c.flush() &&
			c.conn.WriteControl(websocket.PingMessage, nil, c.deadline()) == nil
	}
	return true
}

func (c *client) deadline() time.Time { return time.Now().Add(c.h.opts.WriteTimeout) }

// queue adds frames to the next write under the seq rules, in order: a
// persisted frame already sent is skipped, and one after a gap ends the
// batch and asks for a catch-up from the database, which holds it and the
// records missing before it. It returns the frames after the gap.
func (c *client) queue(fs []*frame) (rest []*frame, gap, ok bool) {
	for i, f := range fs {
		switch {
		case f.seq > 0 && f.seq <= c.last: // already sent
		case f.seq > c.last+1:
			return fs[i+1:], true, true
		default:
			if f.seq > 0 {
				c.last = f.seq
			}
			if !c.add(f) {
				return nil, false, false
			}
		}
	}
	return nil, false, true
}

// catchUp writes every persisted record after the last seq written. The
// first one checks the client's cursor too: a stale one (another restore
// generation) gets a resync and no record, since the records after its
// seq continue a history it does not have.
func (c *client) catchUp() bool {
	if c.first && c.stale {
		c.first = false
		last, ok := c.threadEnd()
		if ok {
			c.h.log.Info("hub: client cursor from before a restore; resync", "thread", c.threadID, "cursor", c.last, "last_seq", last)
			ok = c.resync(last)
		}
		return ok
	}
	prev := c.last
	last, ok := c.replay(prev)
	c.last = last
	if ok && c.first && last == prev && prev > 0 {
		ok = c.checkCursor(last)
	}
	c.first = false
	return ok
}

// farewell delivers what the client has not seen yet — the terminal
// frames a shutdown produced — then closes with going-away.
func (c *client) farewell() {
	if last, ok := c.replay(c.last); ok {
		c.last = last
		_ = c.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), time.Now().Add(time.Second))
	}
}

// replay writes every persisted record after seq after, page by page,
// until the database has none left, and returns the last seq written.
func (c *client) replay(after int64) (int64, bool) {
	for {
		recs, err := c.h.store.Since(c.ctx, c.threadID, after, c.h.opts.ReplayPage)
		if err != nil {
			if c.ctx.Err() == nil {
				c.h.reads.Fail(err, "thread", c.threadID)
			}
			return after, false
		}
		c.h.reads.End("hub: reading threads' records for their clients again")
		for _, r := range recs {
			f, err := c.h.recordFrame(r)
			if err != nil {
				c.h.log.Error("hub: encode replay frame", "thread", c.threadID, "seq", r.Seq(), "err", err)
			} else if !c.add(f) {
				return after, false
			}
			after = r.Seq()
		}
		if !c.flush() {
			return after, false
		}
		if len(recs) < c.h.opts.ReplayPage {
			return after, true
		}
	}
}

// checkCursor never trusts a client's cursor blindly: one past the
// thread's last seq (a restored backup, for a client that sends no
// generation) would make the client drop every record up to it. Such a
// client gets a resync. It runs only when the first replay found nothing
// newer than the cursor.
func (c *client) checkCursor(cursor int64) bool {
	last, ok := c.threadEnd()
	if !ok || cursor <= last {
		return ok
	}
	c.h.log.Info("hub: client cursor past the thread's end; resync", "thread", c.threadID, "cursor", cursor, "last_seq", last)
	return c.resync(last)
}

// threadEnd reads the thread's last seq.
func (c *client) threadEnd() (int64, bool) {
	last, err := c.h.store.LastSeq(c.ctx, c.threadID)
	if err != nil {
		if c.ctx.Err() == nil {
			c.h.reads.Fail(err, "thread", c.threadID)
		}
		return 0, false
	}
	return last, true
}

// resyncData is a resync frame's data (docs/API.md): the seq the stream
// goes on from, and the generation to resume with from then on.
type resyncData struct {
	LastSeq    int64  `json:"last_seq"`
	Generation string `json:"restore_generation,omitempty"`
}

// resync tells the client that what it shows is not the thread (the page
// reloads it) and serves it from last on.
func (c *client) resync(last int64) bool {
	c.last = last
	f := ephemeral(FrameResync, c.threadID, "", resyncData{LastSeq: last, Generation: c.h.opts.Generation})
	return c.add(f) && c.flush()
}

// maxWriteBytes bounds one write of queued frames (a single larger frame
// is written whole): at a few hundred bytes a frame, a write carries
// dozens.
const maxWriteBytes = 32 << 10

// add puts f, as this client may see it, behind the frames of the next
// write; it writes them first when they are many.
func (c *client) add(f *frame) bool {
	if c.size >= maxWriteBytes && !c.flush() {
		return false
	}
	b := f.wire(c.h.opts.TokenUsage())
	c.out = append(c.out, b)
	c.size += len(b)
	return true
}

// flush writes the frames added since the last one in one writev on the
// socket, under the write deadline. The frames are shared by every client:
// nothing is copied per client (BenchmarkLiveLatency).
func (c *client) flush() bool {
	if len(c.out) == 0 {
		return true
	}
	_ = c.raw.SetWriteDeadline(c.deadline())
	bufs := c.out // WriteTo consumes its receiver
	_, err := bufs.WriteTo(c.raw)
	clear(c.out)
	c.out, c.size = c.out[:0], 0
	if cap(c.out) > 256 {
		c.out = nil // what an idle client keeps stays small
	}
	if err != nil && isTimeoutErr(err) && c.h.opts.OnDrop != nil {
		c.h.opts.OnDrop()
	}
	return err == nil
}

// clientFrame is the one frame a client may send.
type clientFrame struct {
	Type string `json:"type"`
}

// readLoop reads client frames: pings are allowed, anything else valid is
// ignored (the stream is push-only); an oversized frame closes with 1009
// (gorilla does it on ErrReadLimit), a malformed one with 1003. The
// drain answers pings: it is the only writer of frames, so gorilla must
// not answer from here.
//
// The read side still writes the close frame that ends a connection (a
// bad client frame, a close from the client); that is one whole frame in
// one Write, and Writes on a net.Conn never interleave (internal/poll
// holds the socket's write lock for a whole Write), so it lands between
// two of the drain's writes, never inside one.
func (c *client) readLoop() {
	conn := c.conn
	conn.SetReadLimit(c.h.opts.ReadLimit)
	deadline := func() { _ = conn.SetReadDeadline(time.Now().Add(2*c.h.opts.PingInterval + 15*time.Second)) }
	deadline()
	conn.SetPongHandler(func(string) error { deadline(); return nil })
	conn.SetPingHandler(func(data string) error {
		// Only the newest ping needs an answer (RFC 6455 §5.5.3).
		c.post(func(w *work) { w.pong = &data })
		return nil
	})
	for {
		mt, data, err := conn.ReadMessage()
		if err != nil {
			return
		}
		deadline()
		if err := decodeClientFrame(mt, data); err != nil {
			_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseUnsupportedData, err.Error()), time.Now().Add(time.Second))
			return
		}
	}
}

// decodeClientFrame accepts a text frame holding a JSON object with a
// non-empty string type; anything else is unsupported data.
func decodeClientFrame(messageType int, data []byte) error {
	if messageType != websocket.TextMessage {
		return errors.New("frames must be text")
	}
	var f clientFrame
	if err := json.Unmarshal(data, &f); err != nil || f.Type == "" {
		return errors.New("frames must be JSON objects with a type")
	}
	return nil
}

// appendTextHeader appends the header of one final, unmasked text frame
// of n bytes (RFC 6455 §5.2: a server never masks; the length in the
// fewest bytes, which browsers insist on).
func appendTextHeader(b []byte, n int) []byte {
	const finText = 0x80 | websocket.TextMessage
	switch {
	case n <= 125:
		return append(b, finText, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, finText, 126), uint16(n))
	default:
		return binary.BigEndian.AppendUint64(append(b, finText, 127), uint64(n))
	}
}

func isTimeoutErr(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}
