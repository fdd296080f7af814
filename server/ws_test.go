package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/gorilla/websocket"

	"herd/agent/event"
	"herd/models"
	"herd/server/auth"
	"herd/server/hub"
	"herd/server/render"
)

type wsFrame struct {
	Seq      *int64          `json:"seq"`
	Type     string          `json:"type"`
	ThreadID string          `json:"thread_id"`
	RunID    string          `json:"run_id"`
	Data     json.RawMessage `json:"data"`
}

// dial opens the thread's stream as u.
func (u *user) dial(threadID string, after int64) (*websocket.Conn, error) {
	return u.dialFrom(threadID, hub.Cursor{Seq: after})
}

// dialFrom opens the thread's stream from a cursor, its restore
// generation included when it has one, as static/thread.js does.
func (u *user) dialFrom(threadID string, from hub.Cursor) (*websocket.Conn, error) {
	hdr := http.Header{}
	hdr.Set("Origin", u.a.http.URL)
	for _, ck := range u.c.Jar.Cookies(mustURL(u.a.http.URL)) {
		hdr.Add("Cookie", ck.Name+"="+ck.Value)
	}
	url := "ws" + strings.TrimPrefix(u.a.http.URL, "http") + fmt.Sprintf("/api/threads/%s/stream?after_seq=%d", threadID, from.Seq)
	if from.Generation != "" {
		url += "&restore_generation=" + from.Generation
	}
	conn, resp, err := websocket.DefaultDialer.Dial(url, hdr)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil && resp != nil {
		return nil, fmt.Errorf("%w (HTTP %d)", err, resp.StatusCode)
	}
	return conn, err
}

// watch opens the thread's stream as its first watcher from seq 0, closes
// it when the test ends, and returns once the hub counts the client.
func (u *user) watch(threadID string) *websocket.Conn {
	t := u.a.t
	t.Helper()
	conn, err := u.dial(threadID, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	waitClients(t, u.a.hub, 1)
	return conn
}

func readFrame(conn *websocket.Conn, timeout time.Duration) (wsFrame, error) {
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	var f wsFrame
	_, b, err := conn.ReadMessage()
	if err != nil {
		return f, err
	}
	return f, json.Unmarshal(b, &f)
}

// collect reads persisted frames until it has seen seq want, returning
// every seq in arrival order.
func collect(conn *websocket.Conn, want int64, timeout time.Duration) ([]int64, error) {
	var seqs []int64
	deadline := time.Now().Add(timeout)
	for {
		f, err := readFrame(conn, time.Until(deadline))
		if err != nil {
			return seqs, err
		}
		if f.Seq == nil {
			continue
		}
		seqs = append(seqs, *f.Seq)
		if *f.Seq >= want {
			return seqs, nil
		}
	}
}

// TestReplayWhileWriting connects clients at random points of a thread
// that is being written, each resuming from a random seq: every client
// must receive exactly the records after its seq, in order, once.
func TestReplayWhileWriting(t *testing.T) {
	// A tiny queue makes clients fall behind constantly, exercising the
	// catch-up from the database; the default one exercises live delivery.
	for _, buf := range []int{4, 512} {
		t.Run(fmt.Sprintf("queue %d", buf), func(t *testing.T) { testReplayWhileWriting(t, buf) })
	}
}

func testReplayWhileWriting(t *testing.T, queue int) {
	a := newApp(t, withHub(hub.Options{SendBuffer: queue}))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("busy")
	const total = 1500
	ctx := context.Background()

	var produced sync.WaitGroup
	var wrote atomic.Pointer[time.Time] // when the last record was written
	start := time.Now()
	produced.Go(func() {
		defer func() { now := time.Now(); wrote.Store(&now) }()
		for i := range total {
			ev := &models.RunEvent{ThreadID: th, EventType: "run.start", Category: "run", Content: models.JSON(`{"run_id":"r","model_name":"m"}`)}
			var err error
			if i%50 == 0 {
				err = a.writer.Write(ctx, models.Record{Event: ev})
			} else {
				err = a.writer.Enqueue(ctx, models.Record{Event: ev})
			}
			if err != nil {
				t.Errorf("write: %v", err)
				return
			}
			if i%100 == 0 {
				time.Sleep(2 * time.Millisecond)
			}
		}
	})

	var clients sync.WaitGroup
	for i := range 12 {
		clients.Go(func() {
			time.Sleep(time.Duration(i*3) * time.Millisecond)
			last, _ := a.store.LastSeq(ctx, th)
			after := int64(0)
			if last > 0 {
				after = rand.Int64N(last + 1)
			}
			conn, err := u.dial(th, after)
			if err != nil {
				t.Errorf("client %d: dial: %v", i, err)
				return
			}
			defer conn.Close()
			seqs, err := collectAfterWrites(conn, total, &wrote)
			if err != nil {
				t.Errorf("client %d (after %d): %v after %d frames", i, after, err, len(seqs))
				return
			}
			for j, s := range seqs {
				if s != after+int64(j)+1 {
					t.Errorf("client %d (after %d): frame %d has seq %d, want %d (gap or duplicate)", i, after, j, s, after+int64(j)+1)
					return
				}
			}
		})
	}
	produced.Wait()
	clients.Wait()
	t.Logf("the writes took %v; every client had every record %v after the last", wrote.Load().Sub(start).Round(time.Millisecond), time.Since(*wrote.Load()).Round(time.Millisecond))
}

// collectAfterWrites is collect for a thread being written: a client that
// hears nothing for 20 s while the writes go on, or lacks a record 20 s
// after the last write, is stuck. The bar runs from the last write, not
// from the dial: on a loaded machine the 1,500 writes alone may take
// longer than 20 s, and a client cannot have a record before it exists.
func collectAfterWrites(conn *websocket.Conn, want int64, wrote *atomic.Pointer[time.Time]) ([]int64, error) {
	const patience = 20 * time.Second
	var seqs []int64
	for {
		timeout := patience
		if end := wrote.Load(); end != nil {
			timeout = time.Until(end.Add(patience))
		}
		f, err := readFrame(conn, timeout)
		if err != nil {
			return seqs, err
		}
		if f.Seq == nil {
			continue
		}
		seqs = append(seqs, *f.Seq)
		if *f.Seq >= want {
			return seqs, nil
		}
	}
}

// TestSlowClientIsCut checks that a client that never reads is
// disconnected while the writer and a reading client go on unhindered.
func TestSlowClientIsCut(t *testing.T) {
	dropped := make(chan struct{}, 1)
	// The write timeout is what cuts a client; 2 s leaves the fast client
	// room on a machine busy enough to starve its reader for a while.
	a := newApp(t, withHub(hub.Options{SendBuffer: 16, WriteTimeout: 2 * time.Second, OnDrop: func() {
		// Never block the hub: a second drop (the fast client cut too, on
		// a loaded machine) must fail the test, not hang its cleanup.
		select {
		case dropped <- struct{}{}:
		default:
		}
	}}))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("firehose")
	ctx := context.Background()

	slow, err := u.dial(th, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fast, err := u.dial(th, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	waitClients(t, a.hub, 2)

	const total = 400
	big := strings.Repeat("z", 16<<10) // enough to fill the slow client's socket buffers
	got := make(chan error, 1)
	go func() {
		seqs, err := collect(fast, total, 20*time.Second)
		if err == nil && len(seqs) != total {
			err = fmt.Errorf("fast client got %d frames, want %d", len(seqs), total)
		}
		got <- err
	}()
	start := time.Now()
	for range total {
		m := &models.Message{ID: auth.RandomToken(), ThreadID: th, Type: "human", Content: big}
		if err := a.writer.Enqueue(ctx, models.Record{Message: m}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.writer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("writing took %v: a slow client stalled the writer", d)
	}
	if err := <-got; err != nil {
		t.Fatalf("fast client: %v", err)
	}
	select {
	case <-dropped:
	case <-time.After(10 * time.Second):
		t.Fatal("the client that stopped reading was never cut")
	}
	waitClients(t, a.hub, 1)
	// Once it reads again, it finds its connection closed.
	for {
		if _, _, err := slow.ReadMessage(); err != nil {
			break
		}
	}
}

func waitClients(t testing.TB, h *hub.Hub, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for h.Clients() != n {
		if time.Now().After(deadline) {
			t.Fatalf("hub has %d clients, want %d", h.Clients(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestClientFrames(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	cases := []struct {
		name string
		typ  int
		msg  string
		code int // 0: stays open
	}{
		{"ping", websocket.TextMessage, `{"type":"ping"}`, 0},
		{"other type ignored", websocket.TextMessage, `{"type":"subscribe","thread":"x"}`, 0},
		{"malformed", websocket.TextMessage, `not json`, websocket.CloseUnsupportedData},
		{"binary", websocket.BinaryMessage, `{"type":"ping"}`, websocket.CloseUnsupportedData},
		{"oversized", websocket.TextMessage, `{"type":"ping","pad":"` + strings.Repeat("p", 8000) + `"}`, websocket.CloseMessageTooBig},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn, err := u.dial(th, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := conn.WriteMessage(c.typ, []byte(c.msg)); err != nil {
				t.Fatal(err)
			}
			_, _, err = readFrameErr(conn, 300*time.Millisecond)
			var ce *websocket.CloseError
			switch {
			case c.code == 0 && err != nil && !isTimeout(err):
				t.Fatalf("connection ended: %v", err)
			case c.code != 0 && (!errors.As(err, &ce) || ce.Code != c.code):
				t.Fatalf("got %v, want close %d", err, c.code)
			}
		})
	}
	// The others on the thread are unharmed: a fresh client still works.
	conn, err := u.dial(th, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

func readFrameErr(conn *websocket.Conn, d time.Duration) (int, []byte, error) {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	return conn.ReadMessage()
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

func TestStreamRefusals(t *testing.T) {
	a := newApp(t)
	owner := a.newUser("owner@example.com", false)
	other := a.newUser("other@example.com", false)
	th := owner.newThread("t")
	if _, err := other.dial(th, 0); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("other user's dial: %v, want HTTP 404", err)
	}
	if _, err := owner.dial(th, -1); err == nil || !strings.Contains(err.Error(), "HTTP 400") {
		t.Errorf("after_seq=-1: %v, want HTTP 400", err)
	}
	hdr := http.Header{"Origin": {"http://evil.example"}}
	for _, ck := range owner.c.Jar.Cookies(mustURL(a.http.URL)) {
		hdr.Add("Cookie", ck.Name+"="+ck.Value)
	}
	_, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(a.http.URL, "http")+"/api/threads/"+th+"/stream", hdr)
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin dial: %v, want 403", err)
	}
	if resp != nil {
		resp.Body.Close()
	}
}

// aiHTML is an ai_html frame's data (docs/API.md).
type aiHTML struct {
	MessageID string `json:"message_id"`
	Version   int    `json:"version"`
	Keep      int    `json:"keep"`
	HTML      string `json:"html"`
}

// livePage is what a page holds per message while an answer streams: the
// HTML it rebuilt from the ai_html frames, as UTF-16 (JavaScript
// strings), and its version.
type livePage struct {
	page    map[string][]uint16
	version map[string]int
}

// apply is static/markdown-live.js's rule: a whole frame replaces, a diff
// applies only on the version it follows.
func (p *livePage) apply(d aiHTML) {
	html := utf16.Encode([]rune(d.HTML))
	switch {
	case d.Keep == 0:
		p.page[d.MessageID] = html
	case p.version[d.MessageID] == d.Version-1:
		p.page[d.MessageID] = append(p.page[d.MessageID][:d.Keep:d.Keep], html...)
	default:
		return
	}
	p.version[d.MessageID] = d.Version
}

func (p *livePage) shown(id string) string { return string(utf16.Decode(p.page[id])) }

// TestLiveRunStreams watches a real run over the socket: run.start, the
// human message, ai_reasoning_delta frames (the demo lead's reasoning),
// ai_delta frames, the AI message, run.end.
func TestLiveRunStreams(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 20, 2)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	conn := u.watch(th)
	u.startRun(th, "Tell me about herd")
	var types []string
	var deltas, reasoning strings.Builder
	// The answer as a page rebuilds it from ai_html frames, and the text
	// after each delta: every rebuilt page is the render of one of them.
	var pages, prefixes []string
	page := livePage{page: map[string][]uint16{}, version: map[string]int{}}
	for {
		f, err := readFrame(conn, 10*time.Second)
		if err != nil {
			t.Fatalf("after %v: %v", types, err)
		}
		if f.Type == hub.FrameAIHTML {
			var d aiHTML
			_ = json.Unmarshal(f.Data, &d)
			page.apply(d)
			pages = append(pages, page.shown(d.MessageID))
			continue
		}
		if f.Type == hub.FrameAIDelta || f.Type == hub.FrameAIReasoning {
			var d struct{ Text string }
			_ = json.Unmarshal(f.Data, &d)
			map[string]*strings.Builder{hub.FrameAIDelta: &deltas, hub.FrameAIReasoning: &reasoning}[f.Type].WriteString(d.Text)
			if f.Type == hub.FrameAIDelta {
				prefixes = append(prefixes, deltas.String())
			}
			if len(types) == 0 || types[len(types)-1] != f.Type {
				types = append(types, f.Type)
			}
			continue
		}
		types = append(types, f.Type)
		if f.Type == hub.FrameMessage {
			var m hub.MessageJSON
			_ = json.Unmarshal(f.Data, &m)
			if m.Type == "ai" && m.Content != deltas.String() {
				t.Errorf("streamed %q, persisted %q", deltas.String(), m.Content)
			}
			var kw struct {
				Reasoning string `json:"reasoning_content"`
			}
			_ = json.Unmarshal(m.AdditionalKwargs, &kw)
			if m.Type == "ai" && (kw.Reasoning == "" || kw.Reasoning != reasoning.String() || strings.Contains(m.Content, kw.Reasoning)) {
				t.Errorf("streamed reasoning %q, persisted %q beside the answer %q", reasoning.String(), kw.Reasoning, m.Content)
			}
			if m.Type == "ai" && !strings.Contains(m.HTML, "<p>") {
				t.Errorf("ai message html = %q, want rendered Markdown", m.HTML)
			}
		}
		if f.Type == "run.end" {
			break
		}
	}
	want := []string{"run.start", "message", "ai_reasoning_delta", "ai_delta", "message", "run.end"}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Errorf("frames = %v, want %v", types, want)
	}
	if len(pages) == 0 {
		t.Fatal("no ai_html frame: the answer was not rendered while it streamed")
	}
	md := render.NewMarkdownCache(0)
	renders := map[string]bool{}
	for _, p := range prefixes {
		renders[md.Render(p)] = true
	}
	for i, p := range pages {
		if !renders[p] {
			t.Errorf("ai_html frame %d rebuilds to %q, the render of no text streamed so far", i, p)
		}
	}
}

// dropAll cuts every client's socket, as a network failure would.
func (a *testApp) dropAll() {
	a.hijackedMu.Lock()
	defer a.hijackedMu.Unlock()
	for _, c := range a.hijacked {
		_ = c.Close()
	}
	a.hijacked = nil
}

// TestEnvelopeContract: every frame carries exactly the envelope fields of
// contracts/run_event_stream_contract.json.
func TestEnvelopeContract(t *testing.T) {
	var c struct {
		Fields   []string `json:"envelope_fields"`
		Optional []string `json:"envelope_optional_fields"`
	}
	b, err := os.ReadFile("../contracts/run_event_stream_contract.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	a := newApp(t, withHub(hub.Options{PingInterval: 100 * time.Millisecond}))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	u.startRun(th, "Compare:\n- a\n- b")
	a.waitIdle(th)
	conn, err := u.dial(th, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sawPing := false
	for !sawPing {
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, raw, err := conn.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		var f map[string]json.RawMessage
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		for _, k := range c.Fields {
			if _, ok := f[k]; !ok {
				t.Fatalf("frame %s lacks %s", raw, k)
			}
		}
		for k := range f {
			if !slices.Contains(c.Fields, k) && !slices.Contains(c.Optional, k) {
				t.Fatalf("frame has %s, not in the contract", k)
			}
		}
		if string(f["type"]) == `"ping"` {
			sawPing = true
		}
	}
}

// TestBatchedFrames publishes a burst of ephemeral frames, small and
// large, so the client's writer sends several per write: the client must
// read every one, intact and in order, and a ping it sends meanwhile is
// answered without disturbing them.
func TestBatchedFrames(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	conn := u.watch(th)
	pongs := make(chan string, 1)
	conn.SetPongHandler(func(data string) error { pongs <- data; return nil })

	var texts []string
	for i, n := range []int{1, 2, 0xffff, 0x10000, 300_000, 3, 4, 5, 6, 7} {
		texts = append(texts, strings.Repeat(string(rune('a'+i)), n))
	}
	for _, text := range texts {
		a.hub.Publish(th, "r", event.Delta{MessageID: "m", Text: text})
	}
	if err := conn.WriteControl(websocket.PingMessage, []byte("hello"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	for i, want := range texts {
		f, err := readFrame(conn, 5*time.Second)
		for err == nil && f.Type == hub.FrameAIHTML { // the text rendered (hub/live.go): not this test's
			f, err = readFrame(conn, 5*time.Second)
		}
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		var d struct{ Text string }
		if err := json.Unmarshal(f.Data, &d); err != nil || f.Type != hub.FrameAIDelta || d.Text != want {
			t.Fatalf("frame %d: %s with %d bytes of text (%v), want ai_delta with %d", i, f.Type, len(d.Text), err, len(want))
		}
	}
	// The pong handler runs inside a read; if the pong is not in yet, the
	// last reads wait for it (past the last rendered frames, then timing
	// out: nothing else is due).
	deadline := time.Now().Add(time.Second)
	for len(pongs) == 0 && time.Now().Before(deadline) {
		_, _, _ = readFrameErr(conn, time.Until(deadline))
	}
	select {
	case got := <-pongs:
		if got != "hello" {
			t.Errorf("pong %q, want %q", got, "hello")
		}
	default:
		t.Error("the client's ping was not answered")
	}
}

// TestCloseDuringHandshake: a client whose handshake completes while the
// hub closes — connected before SIGTERM, as far as it can tell — still
// gets every record, then going-away; one that comes after Close is
// refused before the handshake.
func TestCloseDuringHandshake(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	const records = 5
	for range records {
		ev := &models.RunEvent{ThreadID: th, EventType: "run.start", Category: "run", Content: models.JSON(`{"run_id":"r","model_name":"m"}`)}
		if err := a.writer.Write(t.Context(), models.Record{Event: ev}); err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upgrade := func() (*websocket.Conn, error) {
			go func() { closed <- a.hub.Close(context.Background()) }()
			waitClosing(a.hub) // the hub takes no new client from here on
			return (&websocket.Upgrader{}).Upgrade(w, r, nil)
		}
		if err := a.hub.Serve(context.WithoutCancel(r.Context()), upgrade, th, hub.Cursor{}, func() {}); err != nil {
			t.Errorf("serve: %v", err)
		}
	}))
	defer srv.Close()
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	seqs, err := collect(conn, records, 5*time.Second)
	if len(seqs) != records {
		t.Fatalf("got seqs %v (%v) before the close, want 1..%d", seqs, err, records)
	}
	_, _, err = readFrameErr(conn, 5*time.Second)
	if ce := (*websocket.CloseError)(nil); !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
		t.Errorf("after the records: %v, want a going-away close frame", err)
	}
	if err := <-closed; err != nil {
		t.Errorf("hub close: %v", err)
	}
	if _, err := u.dial(th, 0); err == nil || !strings.Contains(err.Error(), "HTTP 503") {
		t.Errorf("dial after close: %v, want HTTP 503", err)
	}
}

// waitClosing returns once h has begun to close: it then refuses a
// client (hub.ErrClosed) before calling its upgrade, which until then
// fails the probe harmlessly.
func waitClosing(h *hub.Hub) {
	notYet := errors.New("not closing yet")
	for {
		err := h.Serve(context.Background(), func() (*websocket.Conn, error) { return nil, notYet }, "probe", hub.Cursor{}, func() {})
		if errors.Is(err, hub.ErrClosed) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// A cursor past the thread's end (as after restoring a backup) is not
// trusted: the client gets a resync frame with the real last seq and is
// served from there, so it drops nothing that follows.
func TestCursorPastTheEndResyncs(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	u.startRun(th, "hello")
	a.waitIdle(th)
	last, err := a.store.LastSeq(context.Background(), th)
	if err != nil || last == 0 {
		t.Fatalf("last seq %d, %v", last, err)
	}
	conn, err := u.dial(th, last+1000)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	f, err := readFrame(conn, 2*time.Second)
	if err != nil || f.Type != hub.FrameResync || f.Seq != nil {
		t.Fatalf("first frame %+v, %v; want a resync with seq null", f, err)
	}
	var d struct {
		LastSeq int64 `json:"last_seq"`
	}
	if err := json.Unmarshal(f.Data, &d); err != nil || d.LastSeq != last {
		t.Fatalf("resync data %s, want last_seq %d", f.Data, last)
	}
	// The next run's records arrive, from last+1 on.
	u.startRun(th, "again")
	seqs, err := collect(conn, last+1, 10*time.Second)
	if err != nil || len(seqs) == 0 || seqs[0] != last+1 {
		t.Fatalf("after the resync got %v, %v; want from seq %d", seqs, err, last+1)
	}
	a.waitIdle(th)

	// A cursor at the end is a plain reconnect: no resync.
	conn2, err := u.dial(th, last)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	if f, err := readFrame(conn2, 2*time.Second); err != nil || f.Type == hub.FrameResync {
		t.Errorf("cursor within the thread: first frame %+v, %v; want the records after it", f, err)
	}
}
