package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"herd/agent"
	"herd/agent/event"
	"herd/models"
	"herd/server"
	"herd/server/hub"
)

// readRaw reads the next frame that is not a keepalive, as it came.
func readRaw(conn *websocket.Conn, timeout time.Duration) ([]byte, error) {
	deadline := time.Now().Add(timeout)
	for {
		_ = conn.SetReadDeadline(deadline)
		_, b, err := conn.ReadMessage()
		if err != nil {
			return nil, err
		}
		if !bytes.Contains(b, []byte(`"type":"ping"`)) {
			return b, nil
		}
	}
}

// longLogLines are a call's log lines as long as agent keeps them (500
// runes), several notices' worth together.
func longLogLines() []agent.ToolLog {
	var lines []agent.ToolLog
	for i := range 20 {
		lines = append(lines, agent.ToolLog{Level: "info", Text: strings.Repeat(string(rune('a'+i)), 250) + strings.Repeat("é\n", 125)})
	}
	return lines
}

// TestClusterThreadFramesReachEveryInstance: the ephemeral frames of a
// thread made on instance A — a lead's tool progress, a call's log lines,
// the thread's new title and its title call's usage — reach a client of
// the thread on instance B exactly as they reach one on A, byte for byte
// and in the same order; log lines too long for one notice arrive whole,
// in order.
func TestClusterThreadFramesReachEveryInstance(t *testing.T) {
	dsn, store, th := clusterThread(t)
	a := newClusterNode(t, dsn, store, "a")
	b := newClusterNode(t, dsn, store, "b")
	onA, onB := a.watch(t, th.ID), b.watch(t, th.ID)

	lines := longLogLines()
	a.cluster.Publish(th.ID, "r", event.ToolProgress{CallID: "call-1", Text: "step 2 of 4"})
	a.cluster.Publish(th.ID, "r", event.ToolLog{Lines: lines, TaskID: "task-1", CallID: "call-1"})
	a.cluster.Publish(th.ID, "", event.Renamed{Title: "Kyoto <trip> & \"March\""})
	a.cluster.Publish(th.ID, "", event.TitleUsage{Call: models.UsageEntry{CallID: "c1", ThreadID: th.ID, ModelName: "gpt-test", HerdModel: "demo-fast", InputTokens: 70, OutputTokens: 6, TotalTokens: 76}})

	var want [][]byte
	for {
		f, err := readRaw(onA, 10*time.Second)
		if err != nil {
			t.Fatalf("on A after %d frames: %v", len(want), err)
		}
		want = append(want, f)
		if bytes.Contains(f, []byte(`"type":"usage.title"`)) {
			break
		}
	}
	// B's log lines may come in more frames than A's (a notice carries
	// what fits); the page appends them. Everything else is the same.
	var got [][]byte
	for len(logItems(got)) < len(logItems(want)) {
		f, err := readRaw(onB, 10*time.Second)
		if err != nil {
			t.Fatalf("on B after %d frames: %v", len(got), err)
		}
		got = append(got, f)
	}
	if g, w := logItems(got), logItems(want); !slices.Equal(g, w) {
		t.Errorf("on B:\n%s\nwant (as on A):\n%s", strings.Join(g, "\n"), strings.Join(w, "\n"))
	}
	var logged []agent.ToolLog
	for _, f := range want {
		var fr struct {
			Type string
			Data struct{ Lines []agent.ToolLog }
		}
		_ = json.Unmarshal(f, &fr)
		if fr.Type == server.FrameToolLog {
			logged = append(logged, fr.Data.Lines...)
		}
	}
	if len(logged) != len(lines) || logged[0] != lines[0] || logged[len(lines)-1] != lines[len(lines)-1] {
		t.Errorf("tool_log frames carried %d lines, want the %d written, in order", len(logged), len(lines))
	}
	for _, typ := range []string{server.FrameToolProgress, server.FrameToolLog, server.FrameThreadRenamed, hub.FrameTitleUsage} {
		if !bytes.Contains(bytes.Join(want, nil), []byte(`"type":"`+typ+`"`)) {
			t.Errorf("no %s frame reached the clients", typ)
		}
	}
}

// logItems are frames as a page takes them: each frame as it came, but
// a tool_log frame as one item per line, each with the frame's envelope.
func logItems(frames [][]byte) []string {
	var out []string
	for _, f := range frames {
		var fr struct {
			Type string
			Data struct {
				TaskID string `json:"task_id"`
				CallID string `json:"tool_call_id"`
				Lines  []json.RawMessage
			}
		}
		_ = json.Unmarshal(f, &fr)
		if fr.Type != server.FrameToolLog {
			out = append(out, string(f))
			continue
		}
		for _, l := range fr.Data.Lines {
			out = append(out, fr.Data.TaskID+" "+fr.Data.CallID+" "+string(l))
		}
	}
	return out
}

// TestClusterFramesFitANotice: every notice a thread's frames make stays
// under PostgreSQL's 8000 bytes at its largest, sealed: a title of the
// most runes a rename allows, each of them escaped or four bytes wide, a
// ledger row, progress and log lines of control characters, and the
// sockets of 200 sessions to close.
func TestClusterFramesFitANotice(t *testing.T) {
	c := offlineCluster(t)
	wide := strings.Repeat("𝄞", maxTitle)
	ctrl := strings.Repeat("\x01", 500)
	c.Publish("t", "", event.Renamed{Title: wide})
	c.Publish("t", "", event.Renamed{Title: strings.Repeat("\x01", maxTitle)})
	c.Publish("t", "", event.TitleUsage{Call: models.UsageEntry{CallID: strings.Repeat("c", 36), ThreadID: strings.Repeat("t", 36), UserID: strings.Repeat("u", 36), ModelName: strings.Repeat("m", 200), HerdModel: strings.Repeat("h", 200),
		InputTokens: 1 << 62, OutputTokens: 1 << 62, TotalTokens: 1 << 62, CacheReadTokens: 1 << 62}})
	c.Publish("t", "r", event.ToolProgress{CallID: "call", Text: strings.Repeat(ctrl, 40)})
	var lines []agent.ToolLog
	for range 50 {
		lines = append(lines, agent.ToolLog{Level: strings.Repeat("\x01", 16), Text: ctrl})
	}
	c.Publish("t", "r", event.ToolLog{Lines: lines, TaskID: "task", CallID: "call"})
	var creds []string
	for i := range 200 {
		creds = append(creds, sessionCredential(fmt.Sprintf("%064x", i)))
	}
	c.RelaySockets(4401, "your account was changed; sign in again", "", creds)
	close(c.out)
	n, logged := 0, 0
	for nt := range c.out {
		n++
		raw := c.encode([]notice{nt})
		if len(raw) != 1 || len(raw[0]) >= 8000 {
			t.Fatalf("a %s %T notice sealed in %v", nt.Kind, nt.frame, func() []int {
				var ls []int
				for _, r := range raw {
					ls = append(ls, len(r))
				}
				return ls
			}())
		}
		if l, ok := nt.frame.(event.ToolLog); ok {
			logged += len(l.Lines)
		}
	}
	if n < 9 || logged != len(lines) {
		t.Errorf("%d notices carried %d log lines; want every frame sent, the %d lines whole", n, logged, len(lines))
	}
}

// failingReads is a cluster's store whose read back of committed records
// fails the first fails times, and its read of a setting the first
// settingFails times; settingCalls counts the reads of the token switch.
type failingReads struct {
	*models.Store
	fails, settingFails atomic.Int32
	calls, settingCalls atomic.Int32
}

func (s *failingReads) Setting(ctx context.Context, key string) (string, error) {
	if key == "token_usage_enabled" { // a reread reads the budgets after it
		s.settingCalls.Add(1)
	}
	if s.settingFails.Add(-1) >= 0 {
		return "", errors.New("connection reset by peer")
	}
	return s.Store.Setting(ctx, key)
}

func (s *failingReads) InRanges(ctx context.Context, rs []models.SeqRange) ([]models.Record, error) {
	s.calls.Add(1)
	if s.fails.Add(-1) >= 0 {
		return nil, errors.New("connection reset by peer")
	}
	return s.Store.InRanges(ctx, rs)
}

// TestClusterReadBackRetried: B's read back of A's commits fails twice;
// B's client still gets every record, in order, once, although the
// thread has no further commit to reveal the gap: B's reader tries again
// on its own timer.
func TestClusterReadBackRetried(t *testing.T) {
	dsn, store, th := clusterThread(t)
	a := newClusterNode(t, dsn, store, "a")
	reads := &failingReads{Store: store}
	b := newClusterNodeWith(t, store, Options{InstanceID: "b", Lease: 10 * time.Second, Renew: 3 * time.Second, Store: reads})
	conn := b.watch(t, th.ID)
	a.writeStarts(t, th.ID, 2)
	if seqs, err := collect(conn, 2, 10*time.Second); err != nil {
		t.Fatalf("live from A: %v after %v", err, seqs)
	}
	reads.fails.Store(2)
	before := reads.calls.Load()
	if err := a.writer.Write(context.Background(), runStartRecord(th.ID), runStartRecord(th.ID), runStartRecord(th.ID)); err != nil {
		t.Fatal(err)
	}
	seqs, err := collect(conn, 5, 15*time.Second)
	if err != nil {
		t.Fatalf("after B's reads failed: %v after %v (%d reads)", err, seqs, reads.calls.Load()-before)
	}
	if want := []int64{3, 4, 5}; !slices.Equal(seqs, want) {
		t.Errorf("B's client got %v, want %v", seqs, want)
	}
	if n := reads.calls.Load() - before; n != 3 {
		t.Errorf("%d reads back, want the two that failed and one more", n)
	}
}

// TestClusterRereadRetried: the token switch was turned off while B's
// listener was away (its notice lost, as in an outage), and B's first
// reads of the settings after it listens again fail: B reads again on
// its own timer, and its client gets the settings frame, with no further
// change to tell it.
func TestClusterRereadRetried(t *testing.T) {
	dsn, store, th := clusterThread(t)
	ctx := context.Background()
	newClusterNode(t, dsn, store, "a")
	reads := &failingReads{Store: store}
	b := newClusterNodeWith(t, store, Options{InstanceID: "b", Lease: 10 * time.Second, Renew: 3 * time.Second, Store: reads})
	conn := b.watch(t, th.ID)
	if err := store.SetSetting(ctx, "token_usage_enabled", "false"); err != nil {
		t.Fatal(err)
	}
	reads.settingFails.Store(2)
	before := reads.settingCalls.Load() // B's settings read it at start
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()", models.ListenerName); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := readFrame(conn, 15*time.Second)
		if err != nil {
			t.Fatalf("no settings frame on B: %v (%d reads of the setting)", err, reads.settingCalls.Load()-before)
		}
		if f.Type == hub.FrameSettings {
			if string(f.Data) != `{"token_usage_enabled":false}` {
				t.Errorf("settings frame on B: %s", f.Data)
			}
			break
		}
	}
	if n := reads.settingCalls.Load() - before; n != 3 {
		t.Errorf("%d reads of the setting, want the two that failed and one more", n)
	}
}
