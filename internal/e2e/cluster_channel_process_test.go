//lint:file-ignore SA1019 the MCP fixture logs as servers still do (logging is deprecated as of MCP 2026-07-28, and still works)

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd/internal/pgtest"
)

// The instances' channel against another login on their database
// (docs/DESIGN.md §14, docs/OPERATIONS.md "PostgreSQL"): a role that can
// connect and nothing more may LISTEN and NOTIFY on herd's channel. It
// must read nothing of a user's run, and nothing it sends may act.

// loudServer is an MCP server over streamable HTTP with one tool, shout,
// which reports progress and logs its text before it returns it: a call
// of it shows a run's every kind of live output.
func loudServer(t *testing.T) string {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "loud", Version: "1"}, nil)
	type shoutIn struct {
		Text string `json:"text" jsonschema:"what to shout"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "shout", Description: "Shouts text."}, func(ctx context.Context, req *sdk.CallToolRequest, in shoutIn) (*sdk.CallToolResult, any, error) {
		tok := req.Params.GetProgressToken()
		if tok != nil {
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: "progress " + in.Text})
		}
		// Named by the call's progress token: the log line is this call's.
		_ = req.Session.Log(ctx, &sdk.LoggingMessageParams{Meta: sdk.Meta{"progressToken": tok}, Level: "info", Data: "log " + in.Text})
		time.Sleep(300 * time.Millisecond) // the frames go out before the result
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "shouted " + in.Text}}}, nil, nil
	})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// stranger is another login on the cluster's database: one connection
// that listens on herd's channel, one that sends on it.
type stranger struct {
	t       *testing.T
	channel string
	listen  *pgx.Conn
	send    *pgx.Conn
	mu      sync.Mutex
	heard   []string
	stop    context.CancelFunc
	done    chan struct{}
}

func newStranger(t *testing.T, dsn string) *stranger {
	t.Helper()
	ctx := context.Background()
	sdsn := pgtest.Stranger(t, dsn)
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	s := &stranger{t: t, channel: "herd_" + cc.RuntimeParams["search_path"], done: make(chan struct{})}
	for _, c := range []**pgx.Conn{&s.listen, &s.send} {
		if *c, err = pgx.Connect(ctx, sdsn); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		s.stopListening()
		s.listen.Close(ctx)
		s.send.Close(ctx)
	})
	return s
}

// startListening records every payload on herd's channel until
// stopListening.
func (s *stranger) startListening() {
	s.t.Helper()
	if _, err := s.listen.Exec(context.Background(), "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go func() {
		defer close(s.done)
		for {
			n, err := s.listen.WaitForNotification(ctx)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.heard = append(s.heard, n.Payload)
			s.mu.Unlock()
		}
	}()
}

func (s *stranger) stopListening() []string {
	if s.stop != nil {
		s.stop()
		<-s.done
		s.stop = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heard
}

// notify sends payloads on herd's channel, in order.
func (s *stranger) notify(payloads ...string) {
	s.t.Helper()
	for _, p := range payloads {
		if _, err := s.send.Exec(context.Background(), "SELECT pg_notify($1, $2)", s.channel, p); err != nil {
			s.t.Fatalf("NOTIFY %.40q: %v", p, err)
		}
	}
}

// refusals are the reasons herd_cluster_notices_refused_total counts, as
// docs/OPERATIONS.md names them.
var refusals = []string{"plaintext", "malformed", "unknown_key", "forged", "stale", "replayed", "not_allowed"}

// refused is how many notices p refused for reason, or for any of
// reasons.
func (p *proc) refused(reasons ...string) float64 {
	var n float64
	for _, r := range reasons {
		n += p.metric(`herd_cluster_notices_refused_total{reason="` + r + `"}`)
	}
	return n
}

// waitRefused waits until p has refused want notices more than before.
func waitRefused(t *testing.T, p *proc, before, want float64, reasons ...string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for p.refused(reasons...)-before < want {
		if time.Now().After(deadline) {
			t.Fatalf("refused %v as %v, want %v more than %v:\n%s", p.refused(reasons...), reasons, want, before, p.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// nextFrame is the next frame on conn that is not a keepalive.
func nextFrame(t *testing.T, conn *websocket.Conn, p *proc) liveFrame {
	t.Helper()
	for {
		if f := readFrame(t, conn, p); f.Type != "ping" {
			return f
		}
	}
}

// renamedNext renames threadID through c and checks that the rename is
// the next frame on conn: nothing the stranger sent reached the page
// before it.
func renamedNext(t *testing.T, c *client, threadID string, conn *websocket.Conn, p *proc) {
	t.Helper()
	title := "after the stranger " + randomHex(4)
	c.call("PATCH", "/api/threads/"+threadID, map[string]string{"title": title}, nil)
	f := nextFrame(t, conn, p)
	if f.Type != "thread.renamed" || !strings.Contains(string(f.Data), title) {
		t.Fatalf("the page got %s %s before the rename; want nothing the stranger sent", f.Type, f.Data)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestClusterChannelReadsAsNoise: a login with no grant LISTENs while a
// user's run on A streams an answer with reasoning, a tool's progress and
// its log lines, which a page on B shows; of all that the login heard
// none of the text, nor the thread's id, in any payload, or in what a
// payload's base64 decodes to. It cannot read the key. Every payload it
// recorded, sent again, is refused by B as a replay, and B's page gets
// nothing of them.
func TestClusterChannelReadsAsNoise(t *testing.T) {
	dsn := pgtest.DSN(t)
	env := clusterEnv(dsn, "HERD_MCP_SERVERS=[{name: loud, url: '"+loudServer(t)+"', timeout_seconds: 30}]", "HERD_LEAD_TOOLS=['mcp:loud/shout']",
		"HERD_MODELS_0_LATENCY_MS=20", "HERD_MODELS_1_LATENCY_MS=20")
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca, cb := a.signIn(), b.signIn()
	s := newStranger(t, dsn)
	var key []byte
	err := s.send.QueryRow(context.Background(), "SELECT key FROM channel_keys").Scan(&key)
	if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "42501" {
		t.Errorf("the stranger reading the channel key: %v, %x; want permission denied (42501)", err, key)
	}

	var th struct{ ID string }
	ca.call("POST", "/api/threads", map[string]string{"title": "secrets"}, &th)
	conn := dialStream(t, b, cb, th.ID)
	s.startListening()
	secret := "canary" + randomHex(6)
	ca.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": `use loud/shout with {"text":"` + secret + `"}`}, nil)
	seen := map[string]string{} // streamed text joined, other frames' data
	for {
		f := nextFrame(t, conn, b)
		var d struct{ Text *string }
		if json.Unmarshal(f.Data, &d) == nil && d.Text != nil && strings.HasPrefix(f.Type, "ai_") {
			seen[f.Type] += *d.Text
		} else {
			seen[f.Type] += string(f.Data)
		}
		if f.Type == "run.end" {
			break
		}
	}
	const reasoning = "One piece of work to hand off"
	for typ, want := range map[string]string{"ai_delta": "shouted " + secret, "ai_reasoning_delta": reasoning, "tool_log": "log " + secret, "tool_progress": "progress " + secret} {
		if !strings.Contains(seen[typ], want) {
			t.Errorf("B's page got no %s with %q (got %q): the run did not show what the test looks for", typ, want, seen[typ])
		}
	}
	heard := s.stopListening()
	if len(heard) < 10 {
		t.Fatalf("the stranger heard %d payloads; want the run's notices", len(heard))
	}
	for _, p := range heard {
		seen := []string{p}
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.StdEncoding} {
			if d, err := enc.DecodeString(p); err == nil {
				seen = append(seen, string(d))
			}
		}
		for _, text := range seen {
			for _, secret := range []string{secret, th.ID, reasoning} {
				if strings.Contains(text, secret) {
					t.Fatalf("the stranger read %q in a payload: %.300q", secret, text)
				}
			}
		}
	}

	// B handles the channel's notices in order: the rename's comes after
	// every replay.
	before := b.refused("replayed", "stale")
	s.notify(heard...)
	renamedNext(t, ca, th.ID, conn, b)
	waitRefused(t, b, before, float64(len(heard)), "replayed", "stale")
	t.Logf("the stranger heard %d payloads, none readable; B refused all %d sent again", len(heard), len(heard))
	stopHerd(t, a)
	stopHerd(t, b)
}

// TestClusterChannelRefusesForgeries: a login with no grant NOTIFYs on
// herd's channel what herd's notices were before they were sealed, of
// every kind, and garbage: the token switch turned off, every socket of
// the user closed, the Stop of a run on B and the cancel of one of its
// cards, the undo of a delete and the purge of a live thread, an ai_html
// frame and streamed text with a link into a page, records, reasoning,
// progress, a title. None acts — the settings stay, the page's socket
// stays open and gets none of it, the run and its cards end on their
// own, the deleted thread is purged on time and the live one kept — and
// B counts every one.
func TestClusterChannelRefusesForgeries(t *testing.T) {
	dsn := pgtest.DSN(t)
	env := clusterEnv(dsn, "HERD_MODELS_0_LATENCY_MS=700", "HERD_MODELS_1_LATENCY_MS=700")
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca, cb := a.signIn(), b.signIn()
	admin, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var me struct{ User struct{ ID string } }
	cb.call("GET", "/api/auth/me", nil, &me)

	var page, gone struct{ ID string }
	cb.call("POST", "/api/threads", map[string]string{"title": "watched"}, &page)
	ca.call("POST", "/api/threads", map[string]string{"title": "to delete"}, &gone)
	conn := dialStream(t, b, cb, page.ID)
	running := runningSubagents(cb)
	var run struct {
		ID, Instance string
		Task         string
	}
	if err := admin.QueryRow(context.Background(), "SELECT r.id, r.instance_id, e.task_id FROM runs r JOIN run_events e ON e.run_id = r.id WHERE r.thread_id = $1 AND r.status = 'running' AND e.task_id <> '' LIMIT 1", running).Scan(&run.ID, &run.Instance, &run.Task); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	if code, body := ca.status("DELETE", "/api/threads/"+gone.ID, nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, body)
	}

	s := newStranger(t, dsn)
	plain := func(v map[string]any) string {
		v["i"] = "forger"
		b, _ := json.Marshal(v)
		return string(b)
	}
	forged := []string{
		plain(map[string]any{"k": "b", "y": "settings", "d": map[string]bool{"token_usage_enabled": false}}),
		plain(map[string]any{"k": "sock", "s": map[string]any{"c": 4401, "w": "forged", "u": me.User.ID}}),
		plain(map[string]any{"k": "stop", "o": run.Instance, "t": running, "u": run.ID}),
		plain(map[string]any{"k": "task", "o": run.Instance, "t": running, "u": run.ID, "m": run.Task}),
		plain(map[string]any{"k": "del", "t": gone.ID}),
		plain(map[string]any{"k": "del", "t": page.ID, "a": time.Now().UnixMicro()}),
		plain(map[string]any{"k": "f", "t": page.ID, "y": "ai_html", "d": map[string]string{"message_id": "m", "html": `<a href="https://evil.example/login">Sign in again</a>`}}),
		plain(map[string]any{"k": "d", "t": page.ID, "u": "r", "m": "m", "x": "[Sign in again](https://evil.example/login)"}),
		plain(map[string]any{"k": "r", "t": page.ID, "u": "r", "m": "m", "x": "forged thoughts"}),
		plain(map[string]any{"k": "p", "t": page.ID, "u": "r", "m": "task", "x": "forged progress"}),
		plain(map[string]any{"k": "f", "t": page.ID, "y": "thread.renamed", "d": map[string]string{"title": "forged title"}}),
		plain(map[string]any{"k": "n", "t": page.ID, "b": 1}),
		plain(map[string]any{"k": "c", "t": page.ID, "a": 1, "b": 99}),
	}
	garbage := []string{"", "hello", "{not json", strings.Repeat("A", 7999), base64.RawStdEncoding.EncodeToString([]byte(strings.Repeat("x", 200)))}
	plainBefore, allBefore := b.refused("plaintext"), b.refused(refusals...)
	s.notify(append(forged, garbage...)...)
	// B handles the channel's notices in order: the rename's comes after
	// the stranger's. The socket is open and got nothing of them.
	renamedNext(t, ca, page.ID, conn, b)
	waitRefused(t, b, allBefore, float64(len(forged)+len(garbage)), refusals...)
	if n := b.refused("plaintext") - plainBefore; n < float64(len(forged)) {
		t.Errorf("%v refused as plaintext, want the %d forged in herd's old format", n, len(forged))
	}
	var settings map[string]bool
	cb.call("GET", "/api/settings", nil, &settings)
	if !settings["token_usage_enabled"] {
		t.Errorf("B's token switch after the forgeries: %v, want on", settings)
	}
	waitRunEnd(t, cb, running, 60*time.Second)
	var ends []struct {
		Content struct{ Status string } `json:"content"`
	}
	var p struct {
		Events json.RawMessage `json:"events"`
	}
	cb.call("GET", "/api/threads/"+running+"/events?event_types=run.end", nil, &p)
	if err := json.Unmarshal(p.Events, &ends); err != nil || len(ends) != 1 || ends[0].Content.Status != "completed" {
		t.Errorf("the run on B ended %s (%v); want completed, not stopped", p.Events, err)
	}
	var state threadState
	cb.call("GET", "/api/threads/"+running, nil, &state)
	for _, task := range state.Tasks {
		if task.Status != "completed" {
			t.Errorf("card %s is %s; want completed, not cancelled", task.TaskID, task.Status)
		}
	}
	// The undo window is 10 s.
	for n := 1; n > 0; time.Sleep(100 * time.Millisecond) {
		if err := admin.QueryRow(context.Background(), "SELECT count(*) FROM threads WHERE id = $1", gone.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 && time.Since(deleted) > 25*time.Second {
			t.Fatalf("the deleted thread is still there %v after its delete: a forged undo stopped its purge", time.Since(deleted))
		}
	}
	var n int
	if err := admin.QueryRow(context.Background(), "SELECT count(*) FROM threads WHERE id = $1", page.ID).Scan(&n); err != nil || n != 1 {
		t.Errorf("the live thread: %d rows (%v), want it kept", n, err)
	}
	if !strings.Contains(b.log.String(), "cluster: refused a notice on the channel") {
		t.Errorf("B logged no refusal:\n%s", b.log.String())
	}
	if got := strings.Count(b.log.String(), "cluster: refused a notice"); got > 1 {
		t.Errorf("B logged %d refusals within a minute, want one line", got)
	}
	stopHerd(t, a)
	stopHerd(t, b)
}
