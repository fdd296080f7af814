package hub

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"herd/agent/event"
	"herd/internal/lapse"
	"herd/models"
	"herd/server/render"
)

// Replayer reads a thread's persisted records after a seq, and its last
// seq; models.Store implements it.
type Replayer interface {
	Since(ctx context.Context, threadID string, after int64, limit int) ([]models.Record, error)
	LastSeq(ctx context.Context, threadID string) (int64, error)
}

// Options tunes a Hub.
type Options struct {
	SendBuffer   int           // frames a client may lag before it is cut
	PingInterval time.Duration // docs/API.md: 30 s
	WriteTimeout time.Duration
	ReadLimit    int64 // bytes of one client frame
	ReplayPage   int
	Logger       *slog.Logger
	// OnDrop is told when a client that stopped reading is cut.
	OnDrop func()
	// TokenUsage is the token gate (server.Settings.TokenUsage): whether token
	// figures may reach any client, admins included. It is read as each
	// frame is written, so a toggle applies to the next frame of every
	// client; nil keeps them from everyone.
	TokenUsage func() bool
	// Generation is the database's restore generation
	// (models.Store.RestoreGeneration): a client that resumes with
	// another one is told to reload (Cursor). "" checks none.
	Generation string
}

// Hub fans committed records and ephemeral frames out to the WebSocket
// clients of each thread. Publishing never blocks: a client whose queue
// is full falls back to reading the database, and one that stops reading
// is cut by the write deadline.
type Hub struct {
	opts  Options
	log   *slog.Logger
	store Replayer
	// reads logs the clients' failed reads of the database once per
	// lapse, not once per client (an outage fails every client's, and
	// each reconnects to fail again).
	reads  *lapse.Lapse
	md     *render.Markdown
	live   *liveText
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
	closing chan struct{}
	shards  []chan []item
	// shardsDone counts the shards, the ping loop and the live renderer.
	shardsDone sync.WaitGroup
}

// New returns a hub replaying from store.
func New(store Replayer, md *render.Markdown, o Options) *Hub {
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
	h := &Hub{opts: o, log: o.Logger, store: store, md: md, reads: lapse.New(o.Logger, "hub: could not read a thread's records for its clients; their sockets close and reconnect"), subs: map[string]map[*client]struct{}{}, closing: make(chan struct{})}
	h.live = newLiveText(md, h.sendFrame, h.watched)
	h.shardsDone.Add(1)
	go func() { defer h.shardsDone.Done(); h.live.run(h.closing) }()
	h.shards = make([]chan []item, max(runtime.GOMAXPROCS(0), 1))
	for k := range h.shards {
		h.shards[k] = make(chan []item, 1024)
		h.shardsDone.Add(1)
		go h.runShard(h.shards[k])
	}
	h.shardsDone.Add(1)
	go h.pingLoop()
	return h
}

// Generation is the restore generation pages carry and send back with
// their cursor (Cursor, docs/API.md).
func (h *Hub) Generation() string { return h.opts.Generation }

// Clients is the number of connected clients.
func (h *Hub) Clients() int64 { return h.count.Load() }

// OnCommit broadcasts committed records; it is the Writer's OnCommit. It
// only hands them to the thread's shard: encoding and fan-out happen off
// the writer's goroutine, so the next commit does not wait for them.
func (h *Hub) OnCommit(recs []models.Record) {
	h.live.committed(recs)
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

// Publish sends an ephemeral frame (agent.Publisher) to the thread's
// live clients through its shard, behind the records committed before
// it; nothing when nobody watches the thread. A Settings frame goes to
// every client of every thread instead.
//
// A Delta's text is also rendered as it grows (live.go): ai_html frames
// carry it as the page shows it.
func (h *Hub) Publish(threadID, runID string, f event.Frame) {
	switch f := f.(type) {
	case event.Settings:
		h.broadcast(f)
		return
	case event.Delta:
		h.live.append(threadID, runID, f.MessageID, f.Text, f.Reset)
	}
	if !h.watched(threadID) { // before encoding: a token of an unwatched thread costs nothing
		return
	}
	if u, ok := f.(event.TitleUsage); ok {
		h.sendFrame(threadID, usageTitleFrame(threadID, u.Call))
		return
	}
	h.sendFrame(threadID, ephemeral(f.FrameType(), threadID, runID, f))
}

// sendFrame sends a ready ephemeral frame through the thread's shard.
func (h *Hub) sendFrame(threadID string, f *frame) {
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
			h.publishItems(items)
		}
	}
}

// publishItems encodes items and offers each thread's frames to its
// clients together: one offer per client and commit, not per frame.
func (h *Hub) publishItems(items []item) {
	var fs []*frame
	for i, it := range items {
		f := it.frame
		if f == nil {
			var err error
			if f, err = h.recordFrame(it.rec); err != nil {
				h.log.Error("hub: encode frame", "thread", it.threadID, "seq", it.rec.Seq(), "err", err)
			}
		}
		if f != nil {
			fs = append(fs, f)
		}
		if len(fs) > 0 && (i == len(items)-1 || items[i+1].threadID != it.threadID) {
			h.publish(it.threadID, fs)
			fs = nil
		}
	}
}

// pingLoop asks every client for a keepalive each PingInterval; clients
// hold no timer of their own, and those of a thread share its ping frame.
func (h *Hub) pingLoop() {
	defer h.shardsDone.Done()
	t := time.NewTicker(h.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-h.closing:
			return
		case <-t.C:
			h.mu.RLock()
			for threadID, cs := range h.subs {
				f := ephemeral(FramePing, threadID, "", map[string]any{})
				for c := range cs {
					c.post(func(w *work) { w.ping = f })
				}
			}
			h.mu.RUnlock()
		}
	}
}

// broadcast sends an ephemeral frame to every client of every thread.
func (h *Hub) broadcast(f event.Frame) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for threadID, cs := range h.subs {
		e := ephemeral(f.FrameType(), threadID, "", f)
		for c := range cs {
			c.offer(e)
		}
	}
}

func (h *Hub) watched(threadID string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs[threadID]) > 0
}

// Watched reports whether any client here watches the thread: the
// cluster reads back other instances' records only for those.
func (h *Hub) Watched(threadID string) bool { return h.watched(threadID) }

// CatchUp has every client read what it missed from the database, from
// its own last seq: the cluster's listener was away, and the notices sent
// meanwhile are lost.
func (h *Hub) CatchUp() {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, cs := range h.subs {
		for cl := range cs {
			cl.post(func(w *work) { w.catchUp = true })
		}
	}
}

func (h *Hub) publish(threadID string, fs []*frame) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for c := range h.subs[threadID] {
		c.offer(fs...)
	}
}

// recordFrame encodes a persisted record in both gate variants.
func (h *Hub) recordFrame(r models.Record) (*frame, error) {
	switch {
	case r.Message != nil:
		m := r.Message
		var html messageHTML
		if p, ok := r.Prepared.(*prepared[messageHTML]); ok {
			html = p.get()
		} else {
			html = renderMessage(m, h.md)
		}
		var redact func() []byte
		if messageHasFigures(m) {
			redact = func() []byte {
				return encodeWire(m.Seq, m.CreatedAt, FrameMessage, m.ThreadID, m.RunID, Redaction{Hide: true}.Message(m, string(html)))
			}
		}
		full := encodeWire(m.Seq, m.CreatedAt, FrameMessage, m.ThreadID, m.RunID, Redaction{}.Message(m, string(html)))
		return &frame{seq: m.Seq, full: full, redact: redact}, nil
	case r.Event != nil:
		f, err := eventFrame(r, h.md)
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", r.Event.Seq, err)
		}
		return f, nil
	}
	return nil, errors.New("record is neither a message nor an event")
}

// ErrClosed is Serve's answer once the hub is closing.
var ErrClosed = errors.New("hub: closed")

// Cursor is where a client resumes: the last seq it has, and the restore
// generation of the page that seq came from. A generation other than the
// hub's means the database was restored from a backup since: the seqs the
// client holds may name other records now, so it gets a resync frame
// instead of the records after Seq (docs/DESIGN.md §11). "" is a client
// that sends none, whose seq is trusted as before.
type Cursor struct {
	Seq        int64
	Generation string
}

// Serve takes on one WebSocket client of thread threadID and returns
// once it is connected: subscribed first, then it is sent every record
// with seq > from.Seq from the database (or a resync, Cursor), then live frames (docs/API.md), until
// it disconnects, is cut, or ctx ends. ctx must outlive the request that
// asked for the socket. closed is called once the socket is over, in
// every case, the errors included.
//
// The socket then costs one parked goroutine, its read loop, and no
// buffer but gorilla's small read buffer: frames are written by a drain
// goroutine that runs only while there is something to write
// (docs/PERFORMANCE.md, idle sockets).
//
// upgrade completes the WebSocket handshake. Serve calls it only once the
// hub has taken the client on, so a client that has been told it is
// connected is one Close waits for and says farewell to. With the
// handshake first, a shutdown that closed the hub in between (the runtime
// stops in about a millisecond) left a client connected before SIGTERM
// with a bare going-away and none of the terminal frames
// (TestCloseDuringHandshake). Once the hub is closing, Serve returns
// ErrClosed without calling upgrade; an upgrade error is returned as is.
func (h *Hub) Serve(ctx context.Context, upgrade func() (*websocket.Conn, error), threadID string, from Cursor, closed func()) error {
	if !h.join() {
		closed()
		return ErrClosed
	}
	conn, err := upgrade()
	if err != nil {
		h.wg.Done()
		closed()
		return err
	}
	c := newClient(ctx, h, conn, threadID, from)
	if !h.subscribe(c) {
		_ = conn.Close()
		h.wg.Done()
		closed()
		return nil
	}
	// Answers being written reach the newcomer whole, not as diffs of
	// frames it never had.
	h.live.resend(threadID)
	h.count.Add(1)
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	go func() {
		defer h.wg.Done()
		defer closed()
		defer h.count.Add(-1)
		defer h.unsubscribe(c)
		defer stop()
		c.readLoop()
		c.hangUp()
		c.drains.Wait()
	}()
	c.post(func(*work) {}) // the catch-up from from.Seq
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
	if h.closed {
		c.post(func(w *work) { w.farewell = true })
	}
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

// Close disconnects every client with a going-away frame, after what it
// has not seen yet, and waits (until ctx ends) for their goroutines.
func (h *Hub) Close(ctx context.Context) error {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.closing)
		for _, cs := range h.subs {
			for c := range cs {
				c.post(func(w *work) { w.farewell = true })
			}
		}
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
