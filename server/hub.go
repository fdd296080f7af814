package server

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"herd/agent"
	"herd/models"
)

// Replayer reads a thread's persisted records after a seq, and its last
// seq; models.Store implements it.
type Replayer interface {
	Since(ctx context.Context, threadID string, after int64, limit int) ([]models.Record, error)
	LastSeq(ctx context.Context, threadID string) (int64, error)
}

// HubOptions tunes a Hub.
type HubOptions struct {
	SendBuffer   int           // frames a client may lag before it is cut
	PingInterval time.Duration // docs/API.md: 30 s
	WriteTimeout time.Duration
	ReadLimit    int64 // bytes of one client frame
	ReplayPage   int
	Logger       *slog.Logger
	// OnDrop is told when a client that stopped reading is cut.
	OnDrop func()
	// TokenUsage is the token gate (Settings.TokenUsage): whether token
	// figures may reach any client, admins included. It is read as each
	// frame is written, so a toggle applies to the next frame of every
	// client; nil keeps them from everyone.
	TokenUsage func() bool
}

// Hub fans committed records and ephemeral frames out to the WebSocket
// clients of each thread. Publishing never blocks: a client whose queue
// is full falls back to reading the database, and one that stops reading
// is cut by the write deadline.
type Hub struct {
	opts   HubOptions
	log    *slog.Logger
	store  Replayer
	md     *Markdown
	mu     sync.RWMutex
	subs   map[string]map[*client]struct{}
	closed bool // Close has begun: no client joins
	cut    bool // Close ran out of time: no client subscribes
	// wg counts the clients of Serve from before their handshake, so
	// Close waits for every client that was told it is connected.
	wg    sync.WaitGroup
	count atomic.Int64
	// closing is closed by Close: each client delivers what it has, then
	// says going-away, and the shards stop.
	closing    chan struct{}
	shards     []chan []item
	shardsDone sync.WaitGroup
}

// NewHub returns a hub replaying from store.
func NewHub(store Replayer, md *Markdown, o HubOptions) *Hub {
	if o.SendBuffer <= 0 {
		o.SendBuffer = 512
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 30 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.ReadLimit <= 0 {
		o.ReadLimit = 4096
	}
	if o.ReplayPage <= 0 {
		o.ReplayPage = 500
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.TokenUsage == nil {
		o.TokenUsage = func() bool { return false }
	}
	h := &Hub{opts: o, log: o.Logger, store: store, md: md, subs: map[string]map[*client]struct{}{}, closing: make(chan struct{})}
	h.shards = make([]chan []item, max(runtime.GOMAXPROCS(0), 1))
	for k := range h.shards {
		h.shards[k] = make(chan []item, 1024)
		h.shardsDone.Add(1)
		go h.runShard(h.shards[k])
	}
	return h
}

// Clients is the number of connected clients.
func (h *Hub) Clients() int64 { return h.count.Load() }

// OnCommit broadcasts committed records; it is the Writer's OnCommit. It
// only hands them to the thread's shard: encoding and fan-out happen off
// the writer's goroutine, so the next commit does not wait for them.
func (h *Hub) OnCommit(recs []models.Record) {
	var per map[int][]item
	for _, r := range recs {
		if r.Message == nil && r.Event == nil {
			continue
		}
		id := r.ThreadID()
		if !h.watched(id) {
			continue
		}
		if per == nil {
			per = map[int][]item{}
		}
		k := h.shardOf(id)
		per[k] = append(per[k], item{threadID: id, rec: r})
	}
	for k, items := range per {
		h.toShard(k, items)
	}
}

// Delta streams text of an AI message being written (agent.Publisher). It
// goes through the thread's shard, behind the records committed before it.
func (h *Hub) Delta(threadID, runID, messageID, text string) {
	h.stream(FrameAIDelta, threadID, runID, "message_id", messageID, text)
}

// Reasoning streams the model's reasoning for an AI message being written
// (agent.Publisher), apart from its text: the page shows it in the
// message's collapsed Thinking block.
func (h *Hub) Reasoning(threadID, runID, messageID, text string) {
	h.stream(FrameAIReasoning, threadID, runID, "message_id", messageID, text)
}

// Progress implements agent.ProgressPublisher: a running tool's progress
// on task taskID's card, sent only to the thread's live clients.
func (h *Hub) Progress(threadID, runID, taskID, text string) {
	h.stream(FrameTaskProgress, threadID, runID, "task_id", taskID, text)
}

// stream sends an ephemeral frame {key: id, text} to the thread's live
// clients through its shard, behind the records committed before it;
// nothing when nobody watches the thread.
func (h *Hub) stream(typ, threadID, runID, key, id, text string) {
	if !h.watched(threadID) {
		return
	}
	f := ephemeral(typ, threadID, runID, map[string]string{key: id, "text": text})
	h.toShard(h.shardOf(threadID), []item{{threadID: threadID, frame: f}})
}

// item is one frame to publish: a committed record to encode, or a ready
// ephemeral frame.
type item struct {
	threadID string
	rec      models.Record
	frame    *frame
}

// Shards encode and publish frames. A thread always maps to the same
// shard, so its frames stay in order; several shards use every core.
func (h *Hub) shardOf(threadID string) int {
	x := fnv.New32a()
	_, _ = x.Write([]byte(threadID))
	return int(x.Sum32() % uint32(len(h.shards)))
}

func (h *Hub) toShard(k int, items []item) {
	select {
	case h.shards[k] <- items:
	case <-h.closing:
	}
}

func (h *Hub) runShard(in <-chan []item) {
	defer h.shardsDone.Done()
	for {
		select {
		case <-h.closing:
			return
		case items := <-in:
			for _, it := range items {
				f := it.frame
				if f == nil {
					var err error
					if f, err = h.recordFrame(it.rec); err != nil {
						h.log.Error("hub: encode frame", "thread", it.threadID, "seq", it.rec.Seq(), "err", err)
						continue
					}
				}
				h.publish(it.threadID, f)
			}
		}
	}
}

// Broadcast sends an ephemeral frame to every client of every thread.
func (h *Hub) Broadcast(typ string, data any) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for threadID, cs := range h.subs {
		f := ephemeral(typ, threadID, "", data)
		for c := range cs {
			c.offer(f)
		}
	}
}

func (h *Hub) watched(threadID string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs[threadID]) > 0
}

func (h *Hub) publish(threadID string, f *frame) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for c := range h.subs[threadID] {
		c.offer(f)
	}
}

// recordFrame encodes a persisted record in both gate variants.
func (h *Hub) recordFrame(r models.Record) (*frame, error) {
	switch {
	case r.Message != nil:
		m := r.Message
		html := ""
		switch {
		case m.Type != agent.TypeTool:
			html = h.md.Render(m.Content)
		case m.Name == agent.ToolTask:
			// The card shows a task's result as Markdown, like the page.
			if r := agent.TaskResultText(m.Content); r != "" {
				html = h.md.Render(r)
			}
		}
		f := &frame{seq: m.Seq, full: encodeEnvelope(m.Seq, m.CreatedAt, FrameMessage, m.ThreadID, m.RunID, newMessageJSON(m, html, false))}
		if len(m.Usage) > 0 || len(m.AdditionalKwargs) > 0 {
			f.redact = func() []byte {
				return encodeEnvelope(m.Seq, m.CreatedAt, FrameMessage, m.ThreadID, m.RunID, newMessageJSON(m, html, true))
			}
		}
		return f, nil
	case r.Event != nil:
		f, err := eventFrame(r.Event, h.md)
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", r.Event.Seq, err)
		}
		return f, nil
	}
	return nil, errors.New("record is neither a message nor an event")
}

// client is one WebSocket connection subscribed to one thread.
type client struct {
	h        *Hub
	threadID string
	conn     *websocket.Conn
	send     chan *frame
	// wake is signalled when a frame did not fit in send: the client has
	// fallen behind and reads what it missed from the database, where
	// every persisted frame is committed before it is offered.
	wake chan struct{}
	// pong carries the payload of the client's latest ping from the read
	// loop to the write loop, which answers it (see writeLoop).
	pong chan string
	// out holds the frames of one write, encoded (see flush).
	out []byte
}

// offer queues f without ever blocking the publisher.
func (c *client) offer(f *frame) {
	select {
	case c.send <- f:
	default:
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// ErrClosed is Serve's answer once the hub is closing.
var ErrClosed = errors.New("hub: closed")

// Serve runs one WebSocket client of thread threadID until it disconnects,
// is cut, or ctx ends: subscribe first, replay every record with
// seq > afterSeq from the database, then stream live (docs/API.md).
//
// upgrade completes the WebSocket handshake. Serve calls it only once the
// hub has taken the client on, so a client that has been told it is
// connected is one Close waits for and says farewell to. With the
// handshake first, a shutdown that closed the hub in between (the runtime
// stops in about a millisecond) left a client connected before SIGTERM
// with a bare going-away and none of the terminal frames
// (TestCloseDuringHandshake). Once the hub is closing, Serve returns
// ErrClosed without calling upgrade; an upgrade error is returned as is.
func (h *Hub) Serve(ctx context.Context, upgrade func() (*websocket.Conn, error), threadID string, afterSeq int64) error {
	if !h.join() {
		return ErrClosed
	}
	defer h.wg.Done()
	conn, err := upgrade()
	if err != nil {
		return err
	}
	c := &client{h: h, threadID: threadID, conn: conn, send: make(chan *frame, h.opts.SendBuffer), wake: make(chan struct{}, 1), pong: make(chan string, 1)}
	if !h.subscribe(c) {
		_ = conn.Close()
		return nil
	}
	defer h.unsubscribe(c)
	h.count.Add(1)
	defer h.count.Add(-1)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer cancel()
		c.readLoop()
	}()
	c.writeLoop(ctx, afterSeq)
	_ = conn.Close()
	<-readDone
	return nil
}

// join counts a client Close must wait for, unless the hub is closing.
func (h *Hub) join() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.wg.Add(1)
	return true
}

// subscribe adds a joined client to its thread, even while the hub closes
// (the client then says farewell), unless Close has already cut the
// clients it waited for too long.
func (h *Hub) subscribe(c *client) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cut {
		return false
	}
	if h.subs[c.threadID] == nil {
		h.subs[c.threadID] = map[*client]struct{}{}
	}
	h.subs[c.threadID][c] = struct{}{}
	return true
}

func (h *Hub) unsubscribe(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[c.threadID], c)
	if len(h.subs[c.threadID]) == 0 {
		delete(h.subs, c.threadID)
	}
}

// Close disconnects every client with a going-away frame and waits (until
// ctx ends) for their goroutines.
func (h *Hub) Close(ctx context.Context) error {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.closing)
	}
	h.mu.Unlock()
	done := make(chan struct{})
	go func() { h.wg.Wait(); h.shardsDone.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		// Clients that could not take their last frames in time are cut,
		// and one still in its handshake will not start.
		h.mu.Lock()
		h.cut = true
		for _, cs := range h.subs {
			for c := range cs {
				_ = c.conn.Close()
			}
		}
		h.mu.Unlock()
		<-done
		return fmt.Errorf("hub: close: %w", ctx.Err())
	}
}

// clientFrame is the one frame a client may send.
type clientFrame struct {
	Type string `json:"type"`
}

// readLoop reads client frames: pings are allowed, anything else valid is
// ignored (the stream is push-only); an oversized frame closes with 1009
// (gorilla does it on ErrReadLimit), a malformed one with 1003.
func (c *client) readLoop() {
	conn := c.conn
	conn.SetReadLimit(c.h.opts.ReadLimit)
	deadline := func() { _ = conn.SetReadDeadline(time.Now().Add(2*c.h.opts.PingInterval + 15*time.Second)) }
	deadline()
	conn.SetPongHandler(func(string) error { deadline(); return nil })
	conn.SetPingHandler(func(data string) error {
		// Only the newest ping needs an answer (RFC 6455 §5.5.3).
		select {
		case <-c.pong:
		default:
		}
		c.pong <- data
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

// writeLoop replays what the client missed, then streams live frames.
// Whenever it falls behind (a frame did not fit in its queue, or a seq is
// missing) it catches up from the database again, so a client never loses
// a persisted frame nor sees one twice. A client that stops reading is
// disconnected by the write deadline; others never wait for it.
//
// It is the only goroutine that writes on the socket while the connection
// lives: frames go out through flush, bypassing gorilla's writer, so it
// also answers the client's pings, which gorilla would answer from the
// read loop. The read side still writes the close frame that ends a
// connection (a bad client frame, a close from the client); that is one
// whole frame in one Write, and Writes on a net.Conn never interleave
// (internal/poll holds the socket's write lock for a whole Write, and
// tls.Conn its output lock), so it lands between two batches, never
// inside one.
func (c *client) writeLoop(ctx context.Context, afterSeq int64) {
	last, catchUp, first := afterSeq, true, true
	ping := time.NewTicker(c.h.opts.PingInterval)
	defer ping.Stop()
	for {
		if catchUp {
			prev := last
			var ok bool
			if last, ok = c.replay(ctx, last); !ok {
				return
			}
			if first && last == prev && prev > 0 {
				if last, ok = c.checkCursor(ctx, last); !ok {
					return
				}
			}
			catchUp, first = false, false
		}
		select {
		case <-ctx.Done():
			return
		case <-c.h.closing:
			c.farewell(ctx, last)
			return
		case <-c.wake:
			catchUp = true
		case f := <-c.send:
			var ok bool
			if last, catchUp, ok = c.writeQueued(f, last); !ok {
				return
			}
		case data := <-c.pong:
			if c.conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(c.h.opts.WriteTimeout)) != nil {
				return
			}
		case <-ping.C:
			if !c.add(ephemeral(FramePing, c.threadID, "", map[string]any{})) || !c.flush() {
				return
			}
			if c.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.h.opts.WriteTimeout)) != nil {
				return
			}
		}
	}
}

// maxWriteBytes bounds one write of queued frames (a single larger frame
// is written whole): at a few hundred bytes a frame, a write carries
// dozens, and what a client keeps between writes stays small.
const maxWriteBytes = 32 << 10

// writeQueued writes f and the frames already queued behind it in one
// write, so a burst costs one syscall per client instead of one per frame
// (BenchmarkLiveLatency; docs/PERFORMANCE.md). Each frame passes the seq
// rules in order: a persisted frame already sent is skipped, and one after
// a gap ends the batch and asks for a catch-up from the database, before
// which nothing queued behind it may be written. It returns the last seq
// written and whether a catch-up is due.
func (c *client) writeQueued(f *frame, last int64) (int64, bool, bool) {
	gap := false
	for {
		switch {
		case f.seq > 0 && f.seq <= last: // already sent
		case f.seq > last+1:
			gap = true // the missing records are in the database
		default:
			if f.seq > 0 {
				last = f.seq
			}
			if !c.add(f) {
				return last, gap, false
			}
		}
		if gap || len(c.out) >= maxWriteBytes {
			break
		}
		var more bool
		select {
		case f, more = <-c.send:
		default:
		}
		if !more {
			break
		}
	}
	return last, gap, c.flush()
}

// farewell delivers what the client has not seen yet — the terminal
// frames a shutdown produced — then closes with going-away.
func (c *client) farewell(ctx context.Context, last int64) {
	if _, ok := c.replay(ctx, last); !ok {
		return
	}
	_ = c.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "server shutting down"), time.Now().Add(time.Second))
}

// replay writes every persisted record after seq after, page by page,
// until the database has none left, and returns the last seq written.
func (c *client) replay(ctx context.Context, after int64) (int64, bool) {
	for {
		recs, err := c.h.store.Since(ctx, c.threadID, after, c.h.opts.ReplayPage)
		if err != nil {
			if ctx.Err() == nil {
				c.h.log.Warn("hub: replay", "thread", c.threadID, "err", err)
			}
			return after, false
		}
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
// thread's last seq (a restored backup) would make the client drop every
// record up to it. Such a client gets a resync frame with the current last
// seq and is served from there; the page reloads the thread. It runs only
// when the first replay found nothing newer than the cursor.
func (c *client) checkCursor(ctx context.Context, cursor int64) (int64, bool) {
	last, err := c.h.store.LastSeq(ctx, c.threadID)
	if err != nil {
		if ctx.Err() == nil {
			c.h.log.Warn("hub: check cursor", "thread", c.threadID, "err", err)
		}
		return cursor, false
	}
	if cursor <= last {
		return cursor, true
	}
	c.h.log.Info("hub: client cursor past the thread's end; resync", "thread", c.threadID, "cursor", cursor, "last_seq", last)
	f := ephemeral(FrameResync, c.threadID, "", map[string]any{"last_seq": last})
	return last, c.add(f) && c.flush()
}

// add encodes f as a WebSocket text frame, as this client may see it,
// behind the frames waiting in out; it flushes first when out is full.
func (c *client) add(f *frame) bool {
	if len(c.out) >= maxWriteBytes && !c.flush() {
		return false
	}
	c.out = appendTextFrame(c.out, f.bytes(c.h.opts.TokenUsage()))
	return true
}

// flush writes out in one Write on the socket, under the write deadline.
func (c *client) flush() bool {
	if len(c.out) == 0 {
		return true
	}
	nc := c.conn.NetConn()
	_ = nc.SetWriteDeadline(time.Now().Add(c.h.opts.WriteTimeout))
	_, err := nc.Write(c.out)
	c.out = c.out[:0]
	if cap(c.out) > 2*maxWriteBytes {
		c.out = nil // a huge frame's buffer need not stay with the client
	}
	if err != nil && isTimeoutErr(err) && c.h.opts.OnDrop != nil {
		c.h.opts.OnDrop()
	}
	return err == nil
}

// appendTextFrame appends payload as one final, unmasked text frame (RFC
// 6455 §5.2: a server never masks).
func appendTextFrame(b, payload []byte) []byte {
	const finText = 0x80 | websocket.TextMessage
	switch n := len(payload); {
	case n <= 125:
		b = append(b, finText, byte(n))
	case n <= 0xffff:
		b = append(b, finText, 126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, finText, 127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return append(b, payload...)
}

func isTimeoutErr(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}
