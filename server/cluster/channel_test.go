package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"herd/agent/event"
	"herd/internal/pgtest"
	"herd/models"
	"herd/server/hub"
)

// testChannel is a channel on keys, its clocks at now (both machines'
// and the database's), listening since an hour ago.
func testChannel(t testing.TB, keys models.ChannelKeys, now *time.Time) *channel {
	t.Helper()
	ch := newChannel(func() time.Time { return *now })
	keys.Now = *now
	if err := ch.setKeys(keys, 10*time.Second, *now, *now); err != nil {
		t.Fatal(err)
	}
	ch.since = now.Add(-time.Hour)
	return ch
}

func sealOne(t testing.TB, ch *channel, n notice) string {
	t.Helper()
	e := encoders.Get().(*noticeEncoder)
	defer encoders.Put(e)
	p, err := ch.seal(e, &n)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestChannelOpensOnlyWhatHerdSealed: a notice sealed by another instance
// opens once, as it was sent; altered, sealed with another key or with a
// key the database does not hold, in the clear, not a notice at all, sent
// again, sent over a minute ago or before the receiver listened, it is
// refused, each for its reason.
func TestChannelOpensOnlyWhatHerdSealed(t *testing.T) {
	now := time.Now()
	a, b := testChannel(t, testKeys(1), &now), testChannel(t, testKeys(1), &now)
	stranger := testChannel(t, testKeys(2), &now)
	want := notice{Kind: kindFrame, Thread: "0190c5b2-7a8e-7d41-9c55-0123456789ab", Run: "r", Type: hub.FrameAIDelta, Data: json.RawMessage(`{"message_id":"m","text":"secret <b>text</b>"}`)}
	sent := sealOne(t, a, want)
	var got notice
	if r := b.open(sent, &got); r != "" || string(got.Data) != string(want.Data) || got.Thread != want.Thread {
		t.Fatalf("open: %q, %+v; want %+v", r, got, want)
	}
	if raw, _ := base64.RawStdEncoding.DecodeString(sent); strings.Contains(string(raw), "secret") || strings.Contains(string(raw), want.Thread) {
		t.Errorf("payload %s shows the notice: %q", sent, raw)
	}

	raw, _ := base64.RawStdEncoding.DecodeString(sealOne(t, a, want))
	flip := func(i int) string {
		c := append([]byte(nil), raw...)
		c[i] ^= 1
		return base64.RawStdEncoding.EncodeToString(c)
	}
	cases := []struct {
		name, payload, want string
	}{
		{"sent again", sent, refusedReplayed},
		{"a bit of its text changed", flip(len(raw) - 20), refusedForged},
		{"its tag changed", flip(len(raw) - 1), refusedForged},
		{"its sender changed", flip(0), refusedForged},
		{"its counter changed", flip(senderLen + 9), refusedForged},
		{"its time changed", flip(senderLen + 17), refusedForged},
		{"another key", sealOne(t, stranger, want), refusedForged},
		{"in the clear", `{"k":"d","t":"th","x":"hi"}`, refusedPlaintext},
		{"not base64", strings.Repeat("!", 100), refusedMalformed},
		{"too short", "AAAA", refusedMalformed},
		{"too long", strings.Repeat("A", 8000), refusedMalformed},
		{"empty", "", refusedMalformed},
	}
	stale := testChannel(t, testKeys(1), &now)
	stale.offset.Store(int64(-2 * time.Minute)) // its clock two minutes behind
	cases = append(cases, struct{ name, payload, want string }{"sent two minutes ago", sealOne(t, stale, want), refusedStale})
	early := sealOne(t, a, want)
	other := testKeys(1)
	other.Keys[0].ID = 9
	cases = append(cases, struct{ name, payload, want string }{"a key id not in the table", sealOne(t, testChannel(t, other, &now), want), refusedUnknownKey})
	for _, tc := range cases {
		var n notice
		if r := b.open(tc.payload, &n); r != tc.want {
			t.Errorf("%s: refused %q, want %q", tc.name, r, tc.want)
		}
	}
	b.since = now.Add(time.Second)
	if r := b.open(early, &got); r != refusedStale {
		t.Errorf("sent before the receiver listened: refused %q, want %q", r, refusedStale)
	}
}

// TestReplayWindow: each counter is taken once; one that comes late
// (a delete's notice on a pool connection, overtaken by the sender's
// batches) is taken while within the window, refused once out of it.
func TestReplayWindow(t *testing.T) {
	var w replayWindow
	take := func(c uint64) bool {
		if !w.fresh(c) {
			return false
		}
		w.mark(c)
		return true
	}
	steps := []struct {
		c    uint64
		want bool
	}{
		{0, false}, {5, true}, {5, false}, {3, true}, {3, false}, {4, true}, {6, true},
		{5 + replayWindowBits, true}, {5, false}, {7, true}, {6, false},
		{10 * replayWindowBits, true}, {7 + replayWindowBits, false}, {10*replayWindowBits - 1, true},
		{10*replayWindowBits - replayWindowBits + 1, true}, {10*replayWindowBits - replayWindowBits, false},
	}
	for i, s := range steps {
		if got := take(s.c); got != s.want {
			t.Errorf("step %d: counter %d taken %v, want %v", i, s.c, got, s.want)
		}
	}
}

// TestChannelKeyRotation: with a second key added, an instance goes on
// sealing with the first until the new one is older than the grace
// (every instance has read it by then), and opens both meanwhile; once
// the first is removed, notices sealed with it are refused.
func TestChannelKeyRotation(t *testing.T) {
	now := time.Now()
	a, b := testChannel(t, testKeys(1), &now), testChannel(t, testKeys(1), &now)
	both := testKeys(1)
	both.Keys = append(both.Keys, models.ChannelKey{ID: 2, Key: testKeys(2).Keys[0].Key, Age: time.Second})
	for _, ch := range []*channel{a, b} {
		if err := ch.setKeys(both, 10*time.Second, now, now); err != nil {
			t.Fatal(err)
		}
	}
	if a.keys.Load().sealID != 1 {
		t.Fatalf("sealing with key %d while the new one is a second old", a.keys.Load().sealID)
	}
	old := sealOne(t, a, notice{Kind: kindCommit, Thread: "t", First: 1, Last: 1})
	both.Keys[1].Age = time.Minute
	if err := a.setKeys(both, 10*time.Second, now, now); err != nil || a.keys.Load().sealID != 2 {
		t.Fatalf("after the grace: sealing with key %d (%v), want 2", a.keys.Load().sealID, err)
	}
	var n notice
	if r := b.open(sealOne(t, a, notice{Kind: kindCommit, Thread: "t", First: 2, Last: 2}), &n); r != "" {
		t.Fatalf("the new key's notice refused: %s", r)
	}
	if err := b.setKeys(models.ChannelKeys{Keys: both.Keys[1:], Now: now}, 10*time.Second, now, now); err != nil {
		t.Fatal(err)
	}
	if r := b.open(old, &n); r != refusedUnknownKey {
		t.Errorf("a notice sealed with the removed key: refused %q, want %q", r, refusedUnknownKey)
	}
}

// BenchmarkNoticeSealOpen: one streamed-text notice sealed by one
// instance and opened by another, as each delta is; "clear" is the same
// notice encoded and decoded as it went before it was sealed.
func BenchmarkNoticeSealOpen(b *testing.B) {
	now := time.Now()
	sender, receiver := testChannel(b, testKeys(1), &now), testChannel(b, testKeys(1), &now)
	data, _ := event.Marshal(event.Delta{MessageID: "0190c5b2-7a8e-7d41-9c55-0123456789ad", Text: strings.Repeat("streamed words ", 20)})
	n := notice{Kind: kindFrame, Thread: "0190c5b2-7a8e-7d41-9c55-0123456789ab", Run: "0190c5b2-7a8e-7d41-9c55-0123456789ac", Type: hub.FrameAIDelta, Data: data}
	e := encoders.Get().(*noticeEncoder)
	defer encoders.Put(e)
	b.Run("sealed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, err := sender.seal(e, &n)
			if err != nil {
				b.Fatal(err)
			}
			var got notice
			if r := receiver.open(p, &got); r != "" {
				b.Fatal(r)
			}
		}
	})
	b.Run("clear", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			js, err := e.Encode(nil, n, 0)
			if err != nil {
				b.Fatal(err)
			}
			p := string(js)
			var got notice
			if err := json.Unmarshal([]byte(p), &got); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestClusterRefusesKindsHerdDoesNotSend: another login NOTIFYs notices
// sealed with the channel's key (as a newer herd would, or whoever stole
// the key) whose kind or frame type this herd does not send: an ai_html
// frame with a link in it, streamed text in a kind of its own (as herd
// sent it before event.Frame), a broadcast other than the settings, a
// kind unknown. B refuses and counts each; its client of the thread gets none,
// and A's next notice reaches it first. The login cannot read the key.
func TestClusterRefusesKindsHerdDoesNotSend(t *testing.T) {
	dsn, store, th := clusterThread(t)
	ctx := context.Background()
	refused := make(chan string, 16)
	a := newClusterNode(t, dsn, store, "a")
	b := newClusterNodeWith(t, store, Options{InstanceID: "b", Lease: 10 * time.Second, Renew: 3 * time.Second, OnRefused: func(r string) { refused <- r }})
	conn := b.watch(t, th.ID)
	stranger, err := pgx.Connect(ctx, pgtest.Stranger(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close(ctx)
	var key []byte
	err = stranger.QueryRow(ctx, "SELECT key FROM channel_keys").Scan(&key)
	if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "42501" {
		t.Errorf("another login reading the channel key: %v, %x; want permission denied (42501)", err, key)
	}

	forged := a.cluster.encode([]notice{
		{Kind: kindFrame, Thread: th.ID, Type: hub.FrameAIHTML, Data: json.RawMessage(`{"message_id":"m","html":"<a href=\"https://evil.example/login\">Sign in again</a>"}`)},
		{Kind: "d", Thread: th.ID, Run: "r", ID: "m", Text: "forged"}, // the streamed text of a herd before event.Frame
		{Kind: kindFrame, Type: "reload"},
		{Kind: "zz", Thread: th.ID},
	})
	for _, p := range forged {
		if _, err := stranger.Exec(ctx, "SELECT pg_notify($1, $2)", a.cluster.channel, p); err != nil {
			t.Fatal(err)
		}
	}
	// B takes the channel's notices in order: A's delta comes after.
	a.cluster.Publish(th.ID, "r", event.Delta{MessageID: "m", Text: "from A"})
	for {
		f, err := readFrame(conn, 10*time.Second)
		if err != nil {
			t.Fatalf("no delta from A on B: %v", err)
		}
		if f.Type == hub.FramePing {
			continue
		}
		// B renders A's delta too: its ai_html may come first, and is
		// A's as well.
		fromA := (f.Type == hub.FrameAIDelta || f.Type == hub.FrameAIHTML) && strings.Contains(string(f.Data), "from A")
		if !fromA {
			t.Fatalf("B's client got %s %s before A's delta", f.Type, f.Data)
		}
		if f.Type == hub.FrameAIDelta {
			break
		}
	}
	for range forged {
		select {
		case r := <-refused:
			if r != refusedNotAllowed {
				t.Errorf("refused as %q, want %q", r, refusedNotAllowed)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("B did not refuse every notice")
		}
	}
}

// TestClusterKeyRotation: the rotation docs/OPERATIONS.md gives, with
// the instances running: a second key is added (here one made a lease
// ago, so the instances seal with it at their next renewal), the first
// removed; B's client gets every record A commits throughout.
func TestClusterKeyRotation(t *testing.T) {
	dsn, store, th := clusterThread(t)
	ctx := context.Background()
	a := newClusterNodeRenewing(t, dsn, store, "a", 100*time.Millisecond)
	b := newClusterNodeRenewing(t, dsn, store, "b", 100*time.Millisecond)
	conn := b.watch(t, th.ID)
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	seq := int64(0)
	commit := func(step string) {
		t.Helper()
		a.writeStarts(t, th.ID, 1)
		seq++
		if seqs, err := collect(conn, seq, 10*time.Second); err != nil {
			t.Fatalf("%s: B's client got %v: %v", step, seqs, err)
		}
	}
	commit("before")
	if _, err := admin.Exec(ctx, "INSERT INTO channel_keys (id, key, created_at) SELECT max(id) + 1, gen_random_uuid()::text::bytea, now() - interval '1 hour' FROM channel_keys"); err == nil {
		t.Fatal("a key of the wrong length was taken")
	}
	key := make([]byte, models.ChannelKeyLen)
	_, _ = rand.Read(key)
	if _, err := admin.Exec(ctx, "INSERT INTO channel_keys (id, key, created_at) SELECT max(id) + 1, decode($1, 'hex'), now() - interval '1 hour' FROM channel_keys", hex.EncodeToString(key)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both instances seal with key 2", func() bool {
		return a.cluster.ch.keys.Load().sealID == 2 && b.cluster.ch.keys.Load().sealID == 2
	})
	commit("with key 2")
	if _, err := admin.Exec(ctx, "DELETE FROM channel_keys WHERE id < (SELECT max(id) FROM channel_keys)"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both instances forget key 1", func() bool {
		return len(a.cluster.ch.keys.Load().keys) == 1 && len(b.cluster.ch.keys.Load().keys) == 1
	})
	commit("after key 1 went")
}

// TestClusterWarnsOfKeyReaders: an instance says at start which other
// login roles can read the channel key.
func TestClusterWarnsOfKeyReaders(t *testing.T) {
	dsn, store := clusterStore(t)
	reader := pgtest.Stranger(t, dsn)
	cc, err := pgx.ParseConfig(reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.ChannelKeyReaders(context.Background()); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(context.Background(), "GRANT SELECT ON channel_keys TO "+cc.User); err != nil {
		t.Fatal(err)
	}
	var log syncLog
	newClusterNodeWith(t, store, Options{InstanceID: "a", Lease: 10 * time.Second, Renew: 3 * time.Second, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if !strings.Contains(log.String(), "other roles can read the channel key") || !strings.Contains(log.String(), cc.User) {
		t.Errorf("log at start:\n%s\nwant a warning naming %s", log.String(), cc.User)
	}
}

// syncLog is a log the instances write while the test reads it.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
