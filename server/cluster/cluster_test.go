package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"herd/agent"
	"herd/agent/demo"
	"herd/agent/event"
	"herd/internal/pgtest"
	"herd/models"
	"herd/server"
	"herd/server/hub"
	"herd/server/render"
)

// clusterNode is one instance of a cluster in this process: its hub, its
// writer announcing through the cluster, a runtime and a stream endpoint.
type clusterNode struct {
	hub     *hub.Hub
	writer  *models.Writer
	rt      *agent.Runtime
	cluster *Cluster
	http    *httptest.Server
}

func newClusterNode(t *testing.T, dsn string, store *models.Store, id string) *clusterNode {
	return newClusterNodeRenewing(t, dsn, store, id, 3*time.Second)
}

func newClusterNodeRenewing(t *testing.T, dsn string, store *models.Store, id string, renew time.Duration) *clusterNode {
	t.Helper()
	return newClusterNodeWith(t, store, Options{InstanceID: id, Lease: 10 * time.Second, Renew: renew})
}

func newClusterNodeWith(t *testing.T, store *models.Store, o Options) *clusterNode {
	t.Helper()
	if o.Store == nil {
		o.Store = store
	}
	// The settings read the token switch through the cluster's store, so
	// a test can fail those reads (failingReads).
	settings, err := server.NewSettings(context.Background(), o.Store.(server.SettingStore), true)
	if err != nil {
		t.Fatal(err)
	}
	n := &clusterNode{hub: hub.New(store, render.NewMarkdown(), hub.Options{TokenUsage: settings.TokenUsage})}
	o.Hub, o.Settings = n.hub, settings
	n.cluster, err = New(o)
	if err != nil {
		t.Fatal(err)
	}
	n.writer = store.NewWriter(models.WriterOptions{OnCommit: n.cluster.OnCommit, Fence: n.cluster.Fence, OnFenced: n.cluster.Fenced})
	cfg := agent.ModelConfig{Name: "demo-fast", Provider: "demo", Model: "demo-fast"}
	n.rt, err = agent.New(agent.Options{Models: []*agent.Model{{Config: cfg, Provider: demo.New(cfg)}}, WorkspaceRoot: t.TempDir(),
		Journal: n.hub.Preparing(n.writer), History: store, Publisher: n.cluster, Claims: store, Lease: n.cluster.Fence})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cluster.Start(context.Background(), "127.0.0.1:0", Handlers{Runs: n.rt, Sockets: noSockets{}, Deletes: noDeletes{}}); err != nil {
		t.Fatal(err)
	}
	up := websocket.Upgrader{}
	n.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The socket outlives the handler (Hub.Serve returns once it is
		// connected): it is served with a context of its own.
		_ = n.hub.Serve(context.Background(), func() (*websocket.Conn, error) { return up.Upgrade(w, r, nil) }, r.URL.Query().Get("thread"), hub.Cursor{}, func() {})
	}))
	t.Cleanup(n.close)
	return n
}

// runStartRecord is a record to commit on a thread: a run.start event.
func runStartRecord(threadID string) models.Record {
	return models.Record{Event: &models.RunEvent{ThreadID: threadID, EventType: "run.start", Category: "run", Content: models.JSON(`{"run_id":"r","model_name":"m"}`)}}
}

// writeStarts commits count run.start events on the thread, one write each.
func (n *clusterNode) writeStarts(t *testing.T, threadID string, count int) {
	t.Helper()
	for range count {
		if err := n.writer.Write(context.Background(), runStartRecord(threadID)); err != nil {
			t.Fatal(err)
		}
	}
}

func (n *clusterNode) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = n.rt.Shutdown(ctx)
	_ = n.hub.Close(ctx)
	n.http.Close()
	n.writer.Close()
	n.cluster.Close()
}

func (n *clusterNode) watch(t *testing.T, threadID string) *websocket.Conn {
	t.Helper()
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(n.http.URL, "http")+"/?thread="+threadID, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	t.Cleanup(func() { conn.Close() })
	waitClients(t, n.hub, 1)
	return conn
}

// TestClusterCatchUpAfterReconnect: records committed on A reach B's
// client live; while B's listener is cut off the notices are lost, yet
// once it listens again the client has every record, in seq order, once,
// without any further commit to reveal the gap. Both instances stop with
// no goroutine left (goleak in TestMain).
// clusterStore opens a store on a schema of its own for a cluster test;
// it closes after the test's instances.
func clusterStore(t *testing.T) (string, *models.Store) {
	t.Helper()
	dsn := pgtest.DSN(t)
	store, err := models.OpenPostgres(dsn, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return dsn, store
}

// clusterThread is clusterStore with a thread of user u1 in it.
func clusterThread(t *testing.T) (string, *models.Store, *models.Thread) {
	t.Helper()
	dsn, store := clusterStore(t)
	th, err := store.CreateThread(context.Background(), "u1", "t")
	if err != nil {
		t.Fatal(err)
	}
	return dsn, store, th
}

func TestClusterCatchUpAfterReconnect(t *testing.T) {
	dsn, store, th := clusterThread(t)
	ctx := context.Background()
	a := newClusterNode(t, dsn, store, "a")
	b := newClusterNode(t, dsn, store, "b")
	conn := b.watch(t, th.ID)
	a.writeStarts(t, th.ID, 5)
	seqs, err := collect(conn, 5, 10*time.Second)
	if err != nil {
		t.Fatalf("live from A: %v after %v", err, seqs)
	}
	// Cut B's listener (PostgreSQL ends its session) and commit on A at
	// once, while B reconnects.
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var cut int
	if err := admin.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()", models.ListenerName).Scan(&cut); err != nil || cut < 2 {
		t.Fatalf("cut %d listeners, %v; want A's and B's", cut, err)
	}
	a.writeStarts(t, th.ID, 5)
	more, err := collect(conn, 10, 15*time.Second)
	if err != nil {
		t.Fatalf("after the reconnect: %v after %v", err, more)
	}
	seqs = append(seqs, more...)
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("B's client got %v; want 1..10 once each", seqs)
		}
	}
}

// TestClusterLeaseTakenOverRejoins: an instance whose lease another
// took over (with its runs) writes nothing more of them, however its
// writes race the takeover: the database refuses them (ErrFenced), which
// wakes its renewer at once; it rejoins under a new epoch and stays up,
// and takes new runs again.
func TestClusterLeaseTakenOverRejoins(t *testing.T) {
	dsn, store, th := clusterThread(t)
	ctx := context.Background()
	// A renewal a minute away: only the fenced write can wake it.
	n := newClusterNodeRenewing(t, dsn, store, "doomed", time.Minute)
	old := n.cluster.Fence()
	if old.Epoch == 0 {
		t.Fatal("no epoch after Start")
	}
	run := &models.Run{ID: "r1", ThreadID: th.ID, UserID: "u1", Status: models.RunRunning, ModelName: "m", StartedAt: time.Now(), InstanceID: old.Instance, LeaseEpoch: old.Epoch}
	if err := store.ClaimRun(ctx, run, 0); err != nil {
		t.Fatal(err)
	}
	ev := func() models.Record {
		return models.Record{Event: &models.RunEvent{ThreadID: th.ID, RunID: "r1", EventType: "run.start", Category: "run", Content: models.JSON(`{"run_id":"r1","model_name":"m"}`)}}
	}
	if err := n.writer.Write(ctx, ev()); err != nil {
		t.Fatal(err)
	}
	// doomed's lease runs out and a survivor takes its run over.
	if err := store.RenewLease(ctx, "doomed", old.Epoch, -time.Second); err != nil {
		t.Fatal(err)
	}
	se, err := store.RegisterInstance(ctx, "survivor", "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if runs, err := store.TakeOrphanRuns(ctx, "survivor", se, 0); err != nil || len(runs) != 1 {
		t.Fatalf("takeover: %v, %v", runs, err)
	}
	if err := n.writer.Write(ctx, ev()); !errors.Is(err, models.ErrFenced) {
		t.Fatalf("a write of a run taken over: %v, want ErrFenced", err)
	}
	waitFor(t, "the rejoin", func() bool { return n.cluster.Fence().Epoch > old.Epoch && !n.cluster.Rejoining() })
	if seq, err := store.LastSeq(ctx, th.ID); err != nil || seq != 1 {
		t.Errorf("last seq %d, %v; want 1: nothing written after the takeover", seq, err)
	}
	r, err := store.Run(ctx, th.ID, "r1")
	if err != nil || r.InstanceID != "survivor" {
		t.Errorf("the run after the rejoin: %+v, %v; want the survivor's still", r, err)
	}
	// Back in service: a new run is claimed under the new lease.
	th2, err := store.CreateThread(ctx, "u1", "t2")
	if err != nil {
		t.Fatal(err)
	}
	f := n.cluster.Fence()
	if err := store.ClaimRun(ctx, &models.Run{ID: "r2", ThreadID: th2.ID, UserID: "u1", Status: models.RunRunning, ModelName: "m", StartedAt: time.Now(), InstanceID: f.Instance, LeaseEpoch: f.Epoch}, 0); err != nil {
		t.Errorf("a claim after the rejoin: %v", err)
	}
	if err := store.ClaimRun(ctx, &models.Run{ID: "r3", ThreadID: th2.ID + "x", UserID: "u1", Status: models.RunRunning, ModelName: "m", StartedAt: time.Now(), InstanceID: old.Instance, LeaseEpoch: old.Epoch}, 0); !errors.Is(err, models.ErrFenced) {
		t.Errorf("a claim under the old epoch: %v, want ErrFenced", err)
	}
}

// TestClusterThreadsInOrder: many threads written on A at once, each a
// commit and then a streamed delta, round after round. B reads the
// commits back together (one query for every thread waiting), yet each of
// its clients gets its thread's records once, in seq order, and every
// delta after the records committed before it and before those after.
func TestClusterThreadsInOrder(t *testing.T) {
	dsn, store := clusterStore(t)
	ctx := context.Background()
	a := newClusterNode(t, dsn, store, "a")
	b := newClusterNode(t, dsn, store, "b")
	const threads, rounds = 12, 8
	ids := make([]string, threads)
	conns := make([]*websocket.Conn, threads)
	for i := range ids {
		th, err := store.CreateThread(ctx, "u1", fmt.Sprint("t", i))
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = th.ID
		conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(b.http.URL, "http")+"/?thread="+th.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		t.Cleanup(func() { conn.Close() })
		conns[i] = conn
	}
	waitClients(t, b.hub, threads)
	// Each client's first catch-up from the database is over once it has
	// a record written after it joined: a catch-up still running when the
	// rounds begin would read their records before a delta between them.
	for i, id := range ids {
		a.writeStarts(t, id, 1)
		if seqs, err := collect(conns[i], 1, 10*time.Second); err != nil {
			t.Fatalf("B's client of thread %d: %v after %v", i, err, seqs)
		}
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			for r := 1; r <= rounds; r++ {
				ev := func() models.Record {
					return runStartRecord(id)
				}
				if err := a.writer.Write(ctx, ev(), ev()); err != nil {
					t.Error(err)
					return
				}
				a.cluster.Publish(id, "r", event.Delta{MessageID: "m", Text: fmt.Sprint("d", r)})
			}
		})
	}
	wg.Wait()
	var want []string
	for r := 1; r <= rounds; r++ {
		want = append(want, fmt.Sprint(2*r), fmt.Sprint(2*r+1), fmt.Sprint("d", r))
	}
	for i, conn := range conns {
		got, err := collectInOrder(conn, len(want), 30*time.Second)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("B's client of thread %d got %v (%v); want %v", i, got, err, want)
		}
	}
}

// collectInOrder reads n frames that are records (their seq) or deltas
// (their text), skipping the rest.
func collectInOrder(conn *websocket.Conn, n int, timeout time.Duration) ([]string, error) {
	var got []string
	deadline := time.Now().Add(timeout)
	for len(got) < n {
		f, err := readFrame(conn, time.Until(deadline))
		if err != nil {
			return got, err
		}
		switch {
		case f.Seq != nil:
			got = append(got, fmt.Sprint(*f.Seq))
		case f.Type == hub.FrameAIDelta:
			var d struct{ Text string }
			if err := json.Unmarshal(f.Data, &d); err != nil {
				return got, err
			}
			got = append(got, d.Text)
		}
	}
	return got, nil
}

// TestNoticeTextFitsEscaped: streamed text split and merged as the sender
// does stays under NOTIFY's 8,000 bytes once encoded and sealed, even
// when every byte is one JSON writes in six (a control character, invalid
// UTF-8). Cut by raw bytes alone, one such notice failed the sender's
// whole batch; so does text cut as it was before notices were sealed
// (1,000 bytes: 6,000 escaped, 8,270 sealed).
func TestNoticeTextFitsEscaped(t *testing.T) {
	c := offlineCluster(t)
	for _, text := range []string{strings.Repeat("\x01", 3*maxNoticeBytes), strings.Repeat("\xff", 3*maxNoticeBytes), strings.Repeat("\n\"", 3*maxNoticeBytes)} {
		var b batch
		b.reset()
		for rest := text; rest != ""; {
			part := cutUTF8(rest, maxNoticeText)
			rest = rest[len(part):]
			b.add(notice{Kind: kindFrame, Thread: "0190c5b2-7a8e-7d41-9c55-0123456789ab", Run: "0190c5b2-7a8e-7d41-9c55-0123456789ac", frame: event.Delta{MessageID: "0190c5b2-7a8e-7d41-9c55-0123456789ad", Text: part}})
		}
		payloads := c.encode(b.ns)
		if len(payloads) != len(b.ns) {
			t.Fatalf("%d of %d notices sealed", len(payloads), len(b.ns))
		}
		for i, p := range payloads {
			if len(p) >= 8000 {
				t.Fatalf("a notice of %d bytes of text is a payload of %d bytes, past NOTIFY's 8,000", len(b.ns[i].Text), len(p))
			}
		}
	}
}

// TestNoticeBatchMerges: the sender merges what waits for it only where
// nothing is lost and no thread's order changes.
func TestNoticeBatchMerges(t *testing.T) {
	d := func(th, msg, text string) notice {
		return notice{Kind: kindFrame, Thread: th, Run: "r", frame: event.Delta{MessageID: msg, Text: text}}
	}
	c := func(th string, first, last int64) notice {
		return notice{Kind: kindCommit, Thread: th, First: first, Last: last}
	}
	p := func(th, task, text string) notice {
		return notice{Kind: kindFrame, Thread: th, Run: "r", frame: event.TaskProgress{TaskID: task, Text: text}}
	}
	reset := func(th, msg, text string) notice {
		return notice{Kind: kindFrame, Thread: th, Run: "r", frame: event.Delta{MessageID: msg, Text: text, Reset: true}}
	}
	long := strings.Repeat("x", maxNoticeText-1)
	cases := []struct {
		name string
		in   []notice
		want []notice
	}{
		{"deltas of a message join", []notice{d("t", "m", "a"), d("t", "m", "b")}, []notice{d("t", "m", "ab")}},
		{"a commit between stays between", []notice{d("t", "m", "a"), c("t", 1, 1), d("t", "m", "b")},
			[]notice{d("t", "m", "a"), c("t", 1, 1), d("t", "m", "b")}},
		{"other threads do not separate", []notice{d("t", "m", "a"), d("u", "m", "x"), d("t", "m", "b")},
			[]notice{d("t", "m", "ab"), d("u", "m", "x")}},
		{"other messages do", []notice{d("t", "m", "a"), d("t", "n", "x"), d("t", "m", "b")},
			[]notice{d("t", "m", "a"), d("t", "n", "x"), d("t", "m", "b")}},
		{"text that would not fit stays apart", []notice{d("t", "m", long), d("t", "m", "ab")}, []notice{d("t", "m", long), d("t", "m", "ab")}},
		{"a reset joins what follows it", []notice{reset("t", "m", "a"), d("t", "m", "b")}, []notice{reset("t", "m", "ab")}},
		{"never what came before it", []notice{d("t", "m", "a"), reset("t", "m", "ab")}, []notice{d("t", "m", "a"), reset("t", "m", "ab")}},
		{"commits join", []notice{c("t", 1, 3), c("t", 4, 4), c("u", 2, 2)}, []notice{c("t", 1, 4), c("u", 2, 2)}},
		{"progress replaces", []notice{p("t", "k", "1/3"), p("t", "k", "2/3")}, []notice{p("t", "k", "2/3")}},
		{"nothing moves across a broadcast", []notice{d("t", "m", "a"), {Kind: kindFrame, frame: event.Settings{}}, d("t", "m", "b")},
			[]notice{d("t", "m", "a"), {Kind: kindFrame, frame: event.Settings{}}, d("t", "m", "b")}},
		{"a thread's frame separates its own notices only", []notice{d("t", "m", "a"), d("u", "m", "x"), {Kind: kindFrame, Thread: "t", frame: event.ToolLog{}}, d("t", "m", "b"), d("u", "m", "y")},
			[]notice{d("t", "m", "a"), d("u", "m", "xy"), {Kind: kindFrame, Thread: "t", frame: event.ToolLog{}}, d("t", "m", "b")}},
	}
	for _, tc := range cases {
		var b batch
		b.reset()
		for _, n := range tc.in {
			b.add(n)
		}
		if !slices.EqualFunc(b.ns, tc.want, func(x, y notice) bool {
			return x.Kind == y.Kind && x.Thread == y.Thread && reflect.DeepEqual(x.frame, y.frame) && x.First == y.First && x.Last == y.Last
		}) {
			t.Errorf("%s: got %+v, want %+v", tc.name, b.ns, tc.want)
		}
	}
}

// TestOwnNoticesKnownByPrefix: the listener skips its own notices by
// their first bytes; every kind starts so, and no other instance's does.
func TestOwnNoticesKnownByPrefix(t *testing.T) {
	a, b := offlineCluster(t), offlineCluster(t)
	for _, n := range []notice{{Kind: kindCommit, Thread: "t", First: 1, Last: 2}, {Kind: kindFrame, frame: event.Settings{}}, {Kind: kindFrame, frame: event.Delta{Text: strings.Repeat("x", maxNoticeText)}}} {
		p := a.encode([]notice{n})[0]
		if !strings.HasPrefix(p, a.ch.own) || strings.HasPrefix(p, b.ch.own) {
			t.Errorf("notice %s; own prefix %s, another's %s", p, a.ch.own, b.ch.own)
		}
	}
}

// offlineCluster is a Cluster that never starts, for what it queues and
// holds; its database refuses connections at once.
func offlineCluster(t *testing.T) *Cluster {
	t.Helper()
	h := hub.New(nil, render.NewMarkdown(), hub.Options{})
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	c, err := New(Options{InstanceID: "me", Hub: h, Lease: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c.channel = "herd_test"
	if err := c.ch.setKeys(testKeys(1), c.o.Lease, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	return c
}

// offlineSender is a database that takes no notice.
type offlineSender struct{}

func (offlineSender) Send(context.Context, []string) error { return errors.New("connection refused") }

// testKeys is a channel with one key, id 1, of bytes all b.
func testKeys(b byte) models.ChannelKeys {
	return models.ChannelKeys{Keys: []models.ChannelKey{{ID: 1, Key: bytes.Repeat([]byte{b}, models.ChannelKeyLen), Age: time.Hour}}, Now: time.Now()}
}

func heldKinds(c *Cluster) map[string]int {
	out := map[string]int{}
	var b batch
	b.reset()
	for _, n := range c.addMissed(&b) {
		out[n.Kind]++
	}
	return out
}

// TestClusterControlSurvivesAFullQueue: with the sender's queue full (a
// burst of streamed text), a Stop, a card's cancel, a revoked session's
// close and a settings change are held for the next batch, not dropped
// as streamed text is.
func TestClusterControlSurvivesAFullQueue(t *testing.T) {
	c := offlineCluster(t)
	for range outQueue {
		c.Publish("t", "r", event.Delta{MessageID: "m", Text: "x"})
	}
	c.Publish("t", "r", event.Delta{MessageID: "m", Text: "dropped"})
	c.announce(notice{Kind: kindStop, To: "other", Thread: "t", Run: "r"})
	c.announce(notice{Kind: kindCancel, To: "other", Thread: "t", Run: "r", ID: "task"})
	c.RelaySockets(4401, "signed out", "", []string{sessionCredential("s")})
	c.Publish("", "", event.Settings{TokenUsage: false})
	got := heldKinds(c)
	want := map[string]int{kindStop: 1, kindCancel: 1, kindSockets: 1, kindFrame: 1}
	if !maps.Equal(got, want) {
		t.Errorf("held past a full queue: %v, want %v", got, want)
	}
}

// TestClusterResendsWhatCouldNotBeSent: a batch the database would not
// take keeps its commit and control notices for another try, which the
// sender is woken for, and drops its streamed text.
func TestClusterResendsWhatCouldNotBeSent(t *testing.T) {
	c := offlineCluster(t)
	batch := []notice{
		{Kind: kindFrame, Thread: "t", frame: event.Delta{Text: "x"}},
		{Kind: kindCommit, Thread: "t", First: 3, Last: 4},
		{Kind: kindStop, To: "other", Thread: "t", Run: "r"},
	}
	c.notify(context.Background(), offlineSender{}, batch)
	select {
	case <-c.kick:
	case <-time.After(10 * time.Second):
		t.Fatal("the sender was not woken to send again")
	}
	got := heldKinds(c)
	if want := map[string]int{kindCommit: 1, kindStop: 1}; !maps.Equal(got, want) {
		t.Errorf("kept to send again: %v, want %v", got, want)
	}
}

// TestClusterWaitWokenByOwnCommits: a Wait for another instance's run
// looks again when this instance commits in the thread (it closed that
// run in a failover), not only when another instance does.
func TestClusterWaitWokenByOwnCommits(t *testing.T) {
	c := offlineCluster(t)
	woken := c.addWaiter("t")
	c.OnCommit([]models.Record{{Event: &models.RunEvent{ThreadID: "t", Seq: 7}}})
	select {
	case <-woken:
	default:
		t.Error("the thread's Wait was not woken by a commit here")
	}
}

// TestClusterListenerNoticesADeadConnection: B reaches PostgreSQL through
// a proxy that, at once, stops forwarding on every connection it holds
// without closing any (a NAT or a proxy that forgot them). B's listener,
// quiet, pings, finds no answer and reconnects; A's commits made while
// B's old connection was dead reach B's client, in order, without any
// help from TCP keepalive (minutes).
func TestClusterListenerNoticesADeadConnection(t *testing.T) {
	dsn, store, th := clusterThread(t)
	px := newFreezingProxy(t, dsn)
	a := newClusterNode(t, dsn, store, "a")
	b := newClusterNodeWith(t, store, Options{InstanceID: "b", Lease: 10 * time.Second, Renew: 3 * time.Second, ListenIdle: 300 * time.Millisecond, Store: px.channelOf(t, store)})
	conn := b.watch(t, th.ID)
	a.writeStarts(t, th.ID, 3)
	seqs, err := collect(conn, 3, 10*time.Second)
	if err != nil {
		t.Fatalf("live from A: %v after %v", err, seqs)
	}
	px.freeze()
	a.writeStarts(t, th.ID, 3)
	more, err := collect(conn, 6, 20*time.Second)
	if err != nil {
		t.Fatalf("after B's connection went dead: %v after %v", err, more)
	}
	seqs = append(seqs, more...)
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("B's client got %v; want 1..6 once each", seqs)
		}
	}
}

// freezingProxy forwards TCP connections to PostgreSQL until freeze:
// then the connections it holds stay open and silent, what they send
// dropped, while new ones are forwarded again.
type freezingProxy struct {
	dsn    string
	mu     sync.Mutex
	frozen map[net.Conn]bool
	conns  []net.Conn
}

func newFreezingProxy(t *testing.T, dsn string) *freezingProxy {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	network, addr := "tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	if strings.HasPrefix(cfg.Host, "/") {
		network, addr = "unix", filepath.Join(cfg.Host, fmt.Sprintf(".s.PGSQL.%d", cfg.Port))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := &freezingProxy{frozen: map[net.Conn]bool{}}
	// The same DSN (its search_path names the test's schema, hence the
	// notices' channel), to the proxy's address.
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Del("host")
		u.Host, u.RawQuery = ln.Addr().String(), q.Encode()
		px.dsn = u.String()
	} else {
		px.dsn = fmt.Sprintf("%s host=127.0.0.1 port=%d", dsn, ln.Addr().(*net.TCPAddr).Port)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		px.mu.Lock()
		for _, c := range px.conns {
			c.Close()
		}
		px.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial(network, addr)
			if err != nil {
				down.Close()
				continue
			}
			px.mu.Lock()
			px.conns = append(px.conns, down, up)
			px.mu.Unlock()
			wg.Go(func() { px.pipe(down, up) })
			wg.Go(func() { px.pipe(up, down) })
		}
	})
	return px
}

// pipe copies from src to dst until either closes; once src is frozen it
// reads and drops.
func (px *freezingProxy) pipe(src, dst net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		px.mu.Lock()
		frozen := px.frozen[src]
		px.mu.Unlock()
		if frozen {
			continue
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (px *freezingProxy) freeze() {
	px.mu.Lock()
	defer px.mu.Unlock()
	for _, c := range px.conns {
		px.frozen[c] = true
	}
}

// channelOf is store with its channel's connections (the schema's read,
// the listener, the sender) through the proxy, as a herd whose DSN named
// the proxy would have them.
func (px *freezingProxy) channelOf(t *testing.T, store *models.Store) Store {
	t.Helper()
	via, err := models.OpenPostgres(px.dsn, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = via.Close() })
	return proxiedChannel{Store: store, via: via}
}

type proxiedChannel struct {
	*models.Store
	via *models.Store
}

func (p proxiedChannel) Schema(ctx context.Context) (string, error) { return p.via.Schema(ctx) }

func (p proxiedChannel) Listen(ctx context.Context, channel string) (*models.Listener, error) {
	return p.via.Listen(ctx, channel)
}

func (p proxiedChannel) NewNotifier(channel string) *models.Notifier {
	return p.via.NewNotifier(channel)
}

// noSockets is a node without sockets to close.
type noSockets struct{}

func (noSockets) CloseSockets(int, string, string, []string) {}
func (noSockets) RecheckSockets()                            {}

// noDeletes is a node without deletes to schedule.
type noDeletes struct{}

func (noDeletes) ScheduleDelete(string, time.Time)    {}
func (noDeletes) UnscheduleDelete(string)             {}
func (noDeletes) ResumeDeletes(context.Context) error { return nil }
