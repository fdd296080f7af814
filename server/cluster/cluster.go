// Package cluster joins the herd instances serving one PostgreSQL
// database (docs/DESIGN.md §14): it owns their leases and failover, the
// fan-out of what each commits and streams to the others' clients, the
// routing of control (Stop, a card's cancel) to the instance running the
// work, and the sealed notices, of typed kinds, they send each other on
// one NOTIFY channel. It reaches this instance's hub, runtime, sockets,
// deletes and settings only through the interfaces declared here, and
// the database only through models.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"herd/agent"
	"herd/agent/event"
	"herd/models"
)

// A Cluster sits between this instance's parts and the others': it wraps
// the Writer's OnCommit and the runtime's Publisher, handing everything
// to the local hub as before and announcing it on one NOTIFY channel; a
// dedicated connection (models.Listener) LISTENs on that channel and
// feeds what the other instances announce into the same hub entry
// points. A notification carries only what fits (PostgreSQL caps a
// payload at 8000 bytes): for committed records the thread and the seq
// range, which the receiver reads back from the database, so a frame is
// still committed before any instance broadcasts it; for ephemeral
// frames (streamed text, progress, settings) the frame itself. The same
// channel carries control addressed to the instance executing a run
// (Stop, a card's cancel) and the end of sessions and tokens, whose
// sockets may be open on any instance. Every notice is sealed with the
// database's channel key (channel.go): any login can LISTEN and NOTIFY,
// only herd's role can read the key.

// Store is what a Cluster reads and leases; models.Store implements it.
type Store interface {
	agent.ResumeStore
	InRanges(ctx context.Context, rs []models.SeqRange) ([]models.Record, error)
	ActiveRun(ctx context.Context, threadID string) (*models.Run, error)
	Run(ctx context.Context, threadID, id string) (*models.Run, error)
	RegisterInstance(ctx context.Context, id, addr string, lease time.Duration) (epoch int64, err error)
	RenewLease(ctx context.Context, id string, epoch int64, lease time.Duration) error
	RetireInstance(ctx context.Context, id string) error
	TakeOrphanRuns(ctx context.Context, me string, epoch int64, settle time.Duration) ([]models.Run, error)
	Notify(ctx context.Context, channel, payload string) error
	ChannelKeys(ctx context.Context) (models.ChannelKeys, error)
	ChannelKeyReaders(ctx context.Context) ([]string, error)
	// The channel's own connections.
	Schema(ctx context.Context) (string, error)
	Listen(ctx context.Context, channel string) (*models.Listener, error)
	NewNotifier(channel string) *models.Notifier
}

// Hub is this instance's live clients; *hub.Hub implements it.
type Hub interface {
	// OnCommit sends committed records to the clients of their threads.
	OnCommit(recs []models.Record)
	// Publish sends an ephemeral frame to a thread's clients (to every
	// client for a thread-less frame).
	Publish(threadID, runID string, f event.Frame)
	// Watched reports whether any client here watches the thread.
	Watched(threadID string) bool
	// CatchUp has every client read what it missed from the database.
	CatchUp()
}

// Settings are this instance's settings; *server.Settings implements it.
type Settings interface {
	// Reload reads the token switch from the database, applies it, and
	// reports what it is and whether it changed here.
	Reload(ctx context.Context) (on, changed bool, err error)
}

// Options builds a Cluster.
type Options struct {
	InstanceID string
	Store      Store
	Hub        Hub
	Settings   Settings
	// Lease is how long an instance lives without renewing; it renews
	// every Renew.
	Lease, Renew time.Duration
	// ListenIdle is how long the listener waits for a notice before it
	// checks that its connection is alive (default 15 s).
	ListenIdle time.Duration
	Logger     *slog.Logger
	// OnRefused counts a notice refused on the channel, by reason
	// (RefusalReasons).
	OnRefused func(reason string)
	// AfterOutage says the instance started after waiting for the
	// database: the others may have been cut off too, so it judges no
	// lease for a lease's time (renew).
	AfterOutage bool
}

// Handlers are this instance's parts that act on the other instances'
// notices, given to Start.
type Handlers struct {
	Runs    Runs
	Sockets Sockets
	Deletes Deletes
	// Console, when set, is reread with the settings (Settings.Reload).
	Console Console
}

// Console is what the admin console stores (models, …); *server.Server
// implements it. A change is announced as a settings change: the reader
// reads the stored entries again and applies them, the database, not
// the notice, saying what they are (docs/DESIGN.md §14).
type Console interface {
	ReloadConsole(ctx context.Context) error
}

// Runs is this instance's runtime: the runs the cluster stops for other
// instances, and its failover of dead instances' runs. *agent.Runtime
// implements it.
type Runs interface {
	ActiveRun(threadID string) (string, bool)
	Cancel(threadID, runID string) error
	CancelTask(threadID, taskID string) error
	Wait(ctx context.Context, threadID string) error
	// Continue resumes (or, with runs.resume off, closes) the runs of
	// a lost instance this instance took over.
	Continue(ctx context.Context, st agent.ResumeStore, runs []models.Run, cause string) (resumed, closed int, err error)
	// Abandon stops this instance's runs without writing: its lease was
	// taken over, and the runs with it.
	Abandon(ctx context.Context) int
}

// Sockets are this instance's open sockets; *server.Server implements it.
type Sockets interface {
	// CloseSockets closes, with code and text, the sockets another
	// instance ended: those of the credentials creds, or of user userID.
	CloseSockets(code int, text, userID string, creds []string)
	// RecheckSockets closes those whose credential ended, or whose user's
	// role changed, while the listener was away.
	RecheckSockets()
}

// Deletes are this instance's timers of thread deletes;
// *server.Server implements it.
type Deletes interface {
	// ScheduleDelete purges thread id at at, here.
	ScheduleDelete(id string, at time.Time)
	// UnscheduleDelete forgets id's purge here.
	UnscheduleDelete(id string)
	// ResumeDeletes schedules every pending delete.
	ResumeDeletes(ctx context.Context) error
}

// Cluster connects this instance to the others serving its database.
// Build it with New before the runtime and the server (they are
// handed its wrappers), Start it with their handlers once they exist and
// Close it after the Writer.
type Cluster struct {
	o       Options
	log     *slog.Logger
	channel string
	ch      *channel // seals and opens the notices
	// refused and refusedLogged keep the log to a line a minute however
	// many notices are refused; the listener's.
	refused       int
	refusedLogged time.Time
	// lapses log what fails while the database is away once per change
	// (lapses).
	lapses lapses

	// h acts on the other instances' notices here; given to Start.
	h Handlers

	out    chan notice
	kick   chan struct{} // a commit notice was dropped (missed)
	mu     sync.Mutex
	closed bool
	missed map[string][2]int64 // thread → the seqs whose notices were dropped
	// held are control notices (Stop, a card's cancel, sockets to close,
	// settings) the queue had no room for or a send failed on: they go
	// with the next batch, never dropped, sealed when they go (a notice
	// held through an outage would be too old for its receivers).
	held []notice

	waitMu  sync.Mutex
	waiters map[string][]chan struct{} // thread → Wait calls

	// threadMu guards last, pending and order.
	threadMu sync.Mutex
	// last is the last seq read back per watched thread.
	last map[string]int64
	// pending holds the notices of each thread waiting for the reader
	// (readBack), order the threads in the order their first came; wake
	// tells the reader.
	pending map[string][]notice
	order   []string
	wake    chan struct{}
	// reread has the reader read the settings and pending deletes again:
	// the listener reconnected, their notices may be lost.
	reread atomic.Bool
	// rereadSettings has the reader read the token switch: another
	// instance changed it.
	rereadSettings atomic.Bool
	// unclosed are runs taken over whose closing failed; renew only
	// (Start's sweep runs before it).
	unclosed []models.Run
	// titles are the threads other instances are naming.
	titles remoteTitles

	// epoch is the lease's (models.Instance.Epoch); 0 while rejoining
	// after it was lost. addr is what the instance registers with.
	epoch     atomic.Int64
	rejoining atomic.Bool
	addr      string
	// fenced wakes the renewer at once: the database refused a write of
	// a run taken over (Fenced).
	fenced chan struct{}
	// settledAt is when this instance may judge the others' leases, a
	// lease after its own renewals resumed; the renewer's.
	settledAt time.Time

	stop    context.CancelFunc
	wg      sync.WaitGroup
	started bool
}

// notice is one notification on the channel, sealed (channel.seal).
// Fields are short: a payload must stay under PostgreSQL's 8000 bytes.
type notice struct {
	Kind   string          `json:"k"`
	Thread string          `json:"t,omitempty"`
	Run    string          `json:"u,omitempty"`
	ID     string          `json:"m,omitempty"` // message id, task id
	Text   string          `json:"x,omitempty"`
	First  int64           `json:"a,omitempty"`
	Last   int64           `json:"b,omitempty"`
	Type   string          `json:"y,omitempty"` // a frame's type (event.Frame)
	Data   json.RawMessage `json:"d,omitempty"` // the frame's JSON
	// frame is the frame of a kindFrame notice: encoded into Type and
	// Data when sealed (encode), decoded from them when received (handle).
	frame event.Frame
	To    string       `json:"o,omitempty"` // control's instance
	Close *socketClose `json:"s,omitempty"`
}

// Notice kinds.
const (
	kindCommit  = "c"   // records Thread First..Last committed
	kindFrame   = "f"   // an ephemeral frame (event.Frame): Type and Data
	kindTitle   = "n"   // a thread's title call began (Last 1) or ended
	kindPurge   = "del" // a thread's delete is due at First (Unix µs), or undone (0)
	kindStop    = "stop"
	kindCancel  = "task"
	kindSockets = "sock"
)

// maxNoticeBytes bounds the encoded data of one notice (a frame's,
// a broadcast's): a notice's JSON is at most maxPlain (5,950 bytes), which
// sealed and in base64 is NOTIFY's longest payload, and this leaves 550
// bytes for the rest of the notice (its kind, three ids, a frame type).
const maxNoticeBytes = 5400

// maxNoticeText bounds the text of one notice, in bytes before encoding;
// longer streamed text is split (deltas are appended, so nothing is
// lost), longer progress cut. JSON writes a control character, or a byte
// of invalid UTF-8, in six bytes, so text this long fits maxNoticeBytes
// whatever it holds, with room for the frame's keys and id around it
// (TestNoticeTextFitsEscaped).
const maxNoticeText = (maxNoticeBytes - frameRoom) / 6

// frameRoom is what a frame's JSON holds besides its text or lines: its
// keys and a task's, call's or message's id.
const frameRoom = 200

// listenWait bounds how long Start waits for the first LISTEN.
const listenWait = 30 * time.Second

// outQueue is how many notices may wait for the sender.
const outQueue = 8192

// New prepares the cluster; nothing connects before Start.
func New(o Options) (*Cluster, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ListenIdle <= 0 {
		o.ListenIdle = 15 * time.Second
	}
	log := o.Logger.With("instance", o.InstanceID)
	return &Cluster{
		o: o, log: log, lapses: newLapses(log), ch: newChannel(time.Now),
		out: make(chan notice, outQueue), kick: make(chan struct{}, 1), missed: map[string][2]int64{},
		waiters: map[string][]chan struct{}{}, last: map[string]int64{}, pending: map[string][]notice{}, wake: make(chan struct{}, 1),
		fenced: make(chan struct{}, 1),
	}, nil
}

// ID is this instance's id.
func (c *Cluster) ID() string { return c.o.InstanceID }

// Fence is the lease this instance writes under (the Writer's and the
// runtime's Lease): a zero epoch before Start and while rejoining, which
// refuses every write of a run.
func (c *Cluster) Fence() models.Fence {
	return models.Fence{Instance: c.o.InstanceID, Epoch: c.epoch.Load()}
}

// Rejoining reports whether this instance has lost its lease and not
// yet registered again: it takes no runs meanwhile (readiness is 503).
func (c *Cluster) Rejoining() bool { return c.rejoining.Load() }

// Fenced is the Writer's OnFenced: the database refused records of runs
// another instance has taken over, so this instance's lease is gone; the
// renewer looks at once. It never blocks.
func (c *Cluster) Fenced(runs []string) {
	select {
	case c.fenced <- struct{}{}:
	default:
	}
}

// Start registers the instance, listening at addr, closes the runs of
// dead instances (a restart's own included: its old lease has run out or
// soon will), and starts listening, sending and renewing; h acts on what
// the other instances announce.
func (c *Cluster) Start(ctx context.Context, addr string, h Handlers) error {
	if h.Runs == nil || h.Sockets == nil || h.Deletes == nil {
		return errors.New("cluster: Start needs the runtime, the sockets and the deletes")
	}
	c.h = h
	schema, err := c.o.Store.Schema(ctx)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	c.channel = channelName(schema)
	if err := c.loadKeys(ctx); err != nil {
		return err
	}
	c.checkKeyReaders(ctx)
	c.addr = addr
	if err := c.register(ctx); err != nil {
		return err
	}
	// Judging the others' leases needs no wait now, unless the database
	// was out until now (its own restart is waited out by
	// TakeOrphanRuns).
	c.settledAt = time.Now()
	if c.o.AfterOutage {
		c.settledAt = c.settledAt.Add(c.o.Lease)
	}
	c.sweep(ctx)
	lctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	ready := make(chan struct{})
	c.wg.Go(func() { c.listen(lctx, ready) })
	c.wg.Go(func() { c.readBack(lctx) })
	c.wg.Go(func() { c.send(lctx) })
	c.wg.Go(func() { c.renew(lctx) })
	c.started = true
	select {
	case <-ready:
	case <-time.After(listenWait):
		return fmt.Errorf("cluster: could not LISTEN on the database within %v (the log says why)", listenWait)
	case <-ctx.Done():
		return ctx.Err()
	}
	c.log.Info("cluster: instance registered", "addr", addr, "lease", c.o.Lease, "renew", c.o.Renew)
	return nil
}

// Close stops announcing, sends what is queued, stops listening and
// renewing, and removes the instance's row: call it after the runtime's
// runs ended and the Writer closed.
func (c *Cluster) Close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	closed := c.closed
	c.closed = true
	c.mu.Unlock()
	if closed || !c.started {
		return
	}
	close(c.out) // the sender drains it, then stops
	c.stop()
	c.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.o.Store.RetireInstance(ctx, c.o.InstanceID); err != nil {
		c.log.Warn("cluster: retire instance", "err", err)
	}
}

var plainSchema = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,50}$`)

// channelName is the NOTIFY channel of the herds on schema: instances
// (or tests) on other schemas of the database never hear each other.
func channelName(schema string) string {
	if plainSchema.MatchString(schema) {
		return "herd_" + schema
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(schema))
	return fmt.Sprintf("herd_%016x", h.Sum64())
}

// The sending side: wrappers of the local hub that announce.

// OnCommit is the Writer's OnCommit: the local hub gets the records, the
// other instances their threads' seq ranges. It never blocks.
func (c *Cluster) OnCommit(recs []models.Record) {
	c.o.Hub.OnCommit(recs)
	var order []string
	ranges := map[string][2]int64{}
	for _, r := range recs {
		seq := r.Seq()
		if seq == 0 {
			continue
		}
		id := r.ThreadID()
		rg, ok := ranges[id]
		if !ok {
			order = append(order, id)
			rg = [2]int64{seq, seq}
		}
		rg[0], rg[1] = min(rg[0], seq), max(rg[1], seq)
		ranges[id] = rg
	}
	for _, id := range order {
		rg := ranges[id]
		// A Wait here for another instance's run learns of its end from
		// this instance's commits too (a failover this instance ran).
		c.wakeWaiters(id)
		c.announce(notice{Kind: kindCommit, Thread: id, First: rg[0], Last: rg[1]})
	}
}

// Publish implements agent.Publisher: the local hub gets the frame, the
// other instances a notice of it (announceFrame).
func (c *Cluster) Publish(threadID, runID string, f event.Frame) {
	c.o.Hub.Publish(threadID, runID, f)
	c.announceFrame(threadID, runID, f)
}

// socketClose is a close of sockets as it travels between instances
// (Sockets.CloseSockets).
type socketClose struct {
	Code   int      `json:"c"`
	Text   string   `json:"w"`
	UserID string   `json:"u,omitempty"`
	Creds  []string `json:"r,omitempty"`
}

// RelaySockets tells the other instances to close, with code and text,
// the sockets of the credentials creds, or of user userID, in notices
// that fit.
func (c *Cluster) RelaySockets(code int, text, userID string, creds []string) {
	sc := socketClose{Code: code, Text: text, UserID: userID, Creds: creds}
	const perNotice = 64 // credentials are ~72 bytes
	for first := true; first || len(sc.Creds) > 0; first = false {
		part := sc
		if len(sc.Creds) > perNotice {
			part.Creds = sc.Creds[:perNotice]
		}
		sc.Creds = sc.Creds[len(part.Creds):]
		c.announce(notice{Kind: kindSockets, Close: &part})
	}
}

// cutUTF8 is the longest prefix of s of at most n bytes that does not
// split a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// announce queues n for the sender without blocking. When the queue is
// full streamed text and progress are dropped (droppable), a commit
// notice is remembered as missed and sent once there is room (receivers
// read records back from the database, so a late notice loses nothing),
// and the rest is held for the next batch: a Stop, a revoked session's
// close or a new title must not be lost.
func (c *Cluster) announce(n notice) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	select {
	case c.out <- n:
		return
	default:
	}
	switch {
	case n.Kind == kindCommit:
		// Receivers read back no further than a notice's Last.
		rg, ok := c.missed[n.Thread]
		if !ok {
			rg = [2]int64{n.First, n.Last}
		}
		c.missed[n.Thread] = [2]int64{min(rg[0], n.First), max(rg[1], n.Last)}
	case droppable(n):
		return
	default:
		c.holdLocked(n)
	}
	c.kickSender()
}

// droppable reports whether a notice may be lost: streamed text,
// progress and log lines, which what follows supersedes (the committed
// message holds the whole text, the call's step its output). A title, its
// usage, the settings and control are not: nothing would bring them back.
func droppable(n notice) bool {
	switch n.frame.(type) {
	case event.Delta, event.Reasoning, event.TaskProgress, event.ToolProgress, event.ToolLog:
		return n.Kind == kindFrame
	}
	return false
}

// maxHeld bounds the control notices held through a long outage of the
// database; past it the oldest go (their sockets are re-checked and the
// pages catch up when the listeners reconnect).
const maxHeld = 4096

func (c *Cluster) holdLocked(ns ...notice) {
	c.held = append(c.held, ns...)
	if over := len(c.held) - maxHeld; over > 0 {
		c.held = append(c.held[:0], c.held[over:]...)
	}
}

func (c *Cluster) kickSender() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// wakeReader tells the reader there is work: notices to read back, or a
// reread after a reconnect.
func (c *Cluster) wakeReader() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// retryAfter is how long a batch that could not be sent waits to be sent
// again.
const retryAfter = time.Second

// resend keeps what of a batch that could not be sent must not be lost,
// commit and control notices, and has the sender try again shortly.
func (c *Cluster) resend(batch []notice) {
	var keep []notice
	for _, n := range batch {
		if !droppable(n) {
			keep = append(keep, n)
		}
	}
	if len(keep) == 0 {
		return
	}
	c.mu.Lock()
	c.holdLocked(keep...)
	c.mu.Unlock()
	time.AfterFunc(retryAfter, c.kickSender)
}

// sendBatch bounds the notices sent in one statement.
const sendBatch = 256

// send delivers queued notices in order, a batch per statement, until the
// queue is closed and drained. What queued while the previous statement
// ran is merged where that loses nothing (batch.add), so a busy instance
// sends fewer, fuller notices rather than falling further behind.
func (c *Cluster) send(ctx context.Context) {
	nf := c.o.Store.NewNotifier(c.channel)
	defer nf.Close()
	var b batch
	for {
		var (
			n  notice
			ok = true
		)
		select {
		case n, ok = <-c.out:
		case <-c.kick:
			n.Kind = ""
		}
		if !ok {
			// Closing: what is held or missed goes in a last batch.
			b.reset()
			c.notify(ctx, nf, c.addMissed(&b))
			return
		}
		b.reset()
		if n.Kind != "" {
			b.add(n)
		}
	drain:
		for len(b.ns) < sendBatch {
			select {
			case n, ok := <-c.out:
				if !ok {
					break drain
				}
				b.add(n)
			default:
				break drain
			}
		}
		c.notify(ctx, nf, c.addMissed(&b))
	}
}

// batch is the notices of one statement.
type batch struct {
	ns []notice
	// last is the index in ns of each thread's last notice.
	last map[string]int
}

func (b *batch) reset() {
	b.ns = b.ns[:0]
	if b.last == nil {
		b.last = map[string]int{}
	}
	clear(b.last)
}

// add appends n, or merges it into its thread's last notice when nothing
// came between: a commit's range into the commit before it, streamed text
// and card progress as joinFrames says.
func (b *batch) add(n notice) {
	if n.Kind != kindCommit && !joinable(n) {
		// Nothing moves across another kind of notice: of its thread's,
		// when it has one (a thread's frame, a stop), else of any.
		if n.Thread != "" {
			delete(b.last, n.Thread)
		} else {
			clear(b.last)
		}
		b.ns = append(b.ns, n)
		return
	}
	if i, ok := b.last[n.Thread]; ok {
		p := &b.ns[i]
		if p.Kind == n.Kind && p.Run == n.Run {
			if n.Kind == kindCommit {
				p.First, p.Last = min(p.First, n.First), max(p.Last, n.Last)
				return
			}
			if f, ok := joinFrames(p.frame, n.frame); ok {
				p.frame = f
				return
			}
		}
	}
	b.last[n.Thread] = len(b.ns)
	b.ns = append(b.ns, n)
}

// joinable reports whether n is a frame a batch may merge (joinFrames).
func joinable(n notice) bool {
	switch n.frame.(type) {
	case event.Delta, event.Reasoning, event.TaskProgress:
		return n.Kind == kindFrame
	}
	return false
}

// joinFrames merges next into prev: one message's streamed text is
// appended, up to what fits a notice; a card's progress replaces the
// line before it.
func joinFrames(prev, next event.Frame) (event.Frame, bool) {
	switch p := prev.(type) {
	case event.Delta:
		// A Reset starts the text again: it joins what follows it, never
		// what came before it.
		if n, ok := next.(event.Delta); ok && !n.Reset && n.MessageID == p.MessageID && len(p.Text)+len(n.Text) <= maxNoticeText {
			return event.Delta{MessageID: p.MessageID, Text: p.Text + n.Text, Reset: p.Reset}, true
		}
	case event.Reasoning:
		if n, ok := next.(event.Reasoning); ok && n.MessageID == p.MessageID && len(p.Text)+len(n.Text) <= maxNoticeText {
			return event.Reasoning{MessageID: p.MessageID, Text: p.Text + n.Text}, true
		}
	case event.TaskProgress:
		if n, ok := next.(event.TaskProgress); ok && n.TaskID == p.TaskID {
			return n, true
		}
	}
	return nil, false
}

// encode is ns sealed as payloads, their frames encoded (frameData). The JSON has no HTML escaping (as
// json.Marshal would): a frame's data then reaches the other instances'
// clients in the very bytes this instance's get
// (TestClusterThreadFramesReachEveryInstance).
func (c *Cluster) encode(ns []notice) []string {
	out := make([]string, 0, len(ns))
	e := encoders.Get().(*noticeEncoder)
	defer encoders.Put(e)
	for i := range ns {
		if !c.frameData(&ns[i]) {
			continue
		}
		p, err := c.ch.seal(e, &ns[i])
		if err != nil {
			c.log.Error("cluster: seal notice", "kind", ns[i].Kind, "type", ns[i].Type, "err", err)
			continue
		}
		out = append(out, p)
	}
	return out
}

// addMissed adds the commit notices the queue had no room for to b, and
// returns the notices to send: the held control notices first (they were
// dropped before anything in b was queued), then b's.
func (c *Cluster) addMissed(b *batch) []notice {
	c.mu.Lock()
	missed := c.missed
	if len(missed) > 0 {
		c.missed = map[string][2]int64{}
	}
	held := c.held
	c.held = nil
	c.mu.Unlock()
	for thread, rg := range missed {
		b.add(notice{Kind: kindCommit, Thread: thread, First: rg[0], Last: rg[1]})
	}
	if len(held) == 0 {
		return b.ns
	}
	return append(held, b.ns...)
}

// sender sends payloads on the channel in one statement; *models.Notifier
// implements it.
type sender interface {
	Send(ctx context.Context, payloads []string) error
}

// notify seals ns and sends them on nf, which (re)connects as needed;
// one retry on a fresh connection, with the same payloads (should the
// first have gone through after all, the receivers take each once). Of a
// batch that cannot be sent the ephemeral frames are dropped; commit and
// control notices are sent again (resend), sealed anew.
func (c *Cluster) notify(ctx context.Context, nf sender, ns []notice) {
	if len(ns) == 0 {
		return
	}
	batch := c.encode(ns)
	for attempt := 0; attempt < 2; attempt++ {
		// The sender outlives ctx until the queue is drained.
		err := nf.Send(context.WithoutCancel(ctx), batch)
		if err == nil {
			c.lapses.send.End("cluster: sending notices again")
			return
		}
		c.lapses.send.Fail(err, "notices", len(batch))
	}
	c.resend(ns)
}
