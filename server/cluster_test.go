package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"herd/agent"
	"herd/agent/demo"
	"herd/internal/pgtest"
	"herd/models"
)

// clusterNode is one instance of a cluster in this process: its hub, its
// writer announcing through the cluster, a runtime and a stream endpoint.
type clusterNode struct {
	hub     *Hub
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
	settings, err := NewSettings(context.Background(), store, true)
	if err != nil {
		t.Fatal(err)
	}
	n := &clusterNode{hub: NewHub(store, NewMarkdown(), HubOptions{TokenUsage: settings.TokenUsage})}
	n.cluster, err = NewCluster(ClusterOptions{DSN: dsn, InstanceID: id, Store: store, Hub: n.hub, Settings: settings, Lease: 10 * time.Second, Renew: renew})
	if err != nil {
		t.Fatal(err)
	}
	settings.Notify(n.cluster)
	n.writer = store.NewWriter(models.WriterOptions{OnCommit: n.cluster.OnCommit})
	cfg := agent.ModelConfig{Name: "demo-fast", Provider: "demo", Model: "demo-fast"}
	n.rt, err = agent.New(agent.Options{Models: []*agent.Model{{Config: cfg, Provider: demo.New(cfg)}}, WorkspaceRoot: t.TempDir(),
		Journal: n.hub.Preparing(n.writer), History: store, Publisher: n.cluster, Claims: store, InstanceID: id})
	if err != nil {
		t.Fatal(err)
	}
	n.cluster.Attach(n.rt)
	n.cluster.sockets = newSockets()
	if err := n.cluster.Start(context.Background(), "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	up := websocket.Upgrader{}
	n.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The socket outlives the handler (Hub.Serve returns once it is
		// connected): it is served with a context of its own.
		_ = n.hub.Serve(context.Background(), func() (*websocket.Conn, error) { return up.Upgrade(w, r, nil) }, r.URL.Query().Get("thread"), 0, func() {})
	}))
	t.Cleanup(n.close)
	return n
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
func TestClusterCatchUpAfterReconnect(t *testing.T) {
	dsn := pgtest.DSN(t)
	store, err := models.OpenPostgres(dsn, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	th, err := store.CreateThread(ctx, "u1", "t")
	if err != nil {
		t.Fatal(err)
	}
	a := newClusterNode(t, dsn, store, "a")
	b := newClusterNode(t, dsn, store, "b")
	conn := b.watch(t, th.ID)
	write := func(n int) {
		t.Helper()
		for range n {
			ev := &models.RunEvent{ThreadID: th.ID, EventType: "run.start", Category: "run", Content: models.JSON(`{"run_id":"r","model_name":"m"}`)}
			if err := a.writer.Write(ctx, models.Record{Event: ev}); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(5)
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
	if err := admin.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()", listenerName).Scan(&cut); err != nil || cut < 2 {
		t.Fatalf("cut %d listeners, %v; want A's and B's", cut, err)
	}
	write(5)
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

// TestSocketsRevalidate: after a listener reconnects, the sockets whose
// credential ended meanwhile (a sign-out on another instance whose word
// was lost) are closed, and those whose user's role changed (an API
// token outlives a promotion), and only those; a credential the database
// cannot check now keeps its sockets (an outage is not a sign-out).
func TestSocketsRevalidate(t *testing.T) {
	r := newSockets()
	open := func(role, cred string) context.Context {
		ctx, _, done := r.track(context.Background(), "u1", role, cred, nil, func() bool { return true })
		t.Cleanup(done)
		return ctx
	}
	live := open("user", sessionCredential("a"))
	gone := open("user", sessionCredential("b"))
	promoted := open("user", tokenCredential("t"))
	promotedLater := open("admin", tokenCredential("t"))
	unknown := open("user", sessionCredential("c"))
	r.revalidate(func(userID, cred string) (string, error) {
		switch {
		case userID != "u1":
			return "", errCredentialGone
		case cred == sessionCredential("a"):
			return "user", nil
		case cred == tokenCredential("t"):
			return "admin", nil
		case cred == sessionCredential("c"):
			return "", errors.New("connection refused")
		}
		return "", errCredentialGone
	})
	for name, ctx := range map[string]context.Context{"live session": live, "opened after the promotion": promotedLater, "unverifiable": unknown} {
		if ctx.Err() != nil {
			t.Errorf("the %s socket was closed", name)
		}
	}
	for name, ctx := range map[string]context.Context{"ended session": gone, "promoted user's token": promoted} {
		if ctx.Err() == nil {
			t.Errorf("the %s socket stayed open", name)
		}
	}
}

// TestClusterLeaseLost: an instance that finds its lease gone when it
// renews (the others declared it dead and closed its runs) says so on
// Lost, for main to stop it.
func TestClusterLeaseLost(t *testing.T) {
	dsn := pgtest.DSN(t)
	store, err := models.OpenPostgres(dsn, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	n := newClusterNodeRenewing(t, dsn, store, "doomed", 100*time.Millisecond)
	if err := store.RetireInstance(context.Background(), "doomed"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-n.cluster.Lost():
		if !errors.Is(err, models.ErrLeaseLost) {
			t.Errorf("Lost: %v, want ErrLeaseLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the instance never noticed its lease was gone")
	}
}
