package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// client is one WebSocket client of a thread.
type client struct {
	thread    string
	home      int // the instance it connects to; a reconnect goes to the next
	owner     int // the instance that runs its thread's run
	on        int // the instance of the current connection
	reconnect bool
	mu        sync.Mutex
	seqs      []int64
	last      int64
	dups      int
	lats      []time.Duration // live frames from the instance it is on
	remote    []time.Duration // live frames through another instance (NOTIFY and read-back)
	ended     chan struct{}   // closed when it has seen run.end
	endOnce   sync.Once
	// The first client of each thread notes when its tasks started and
	// ended, and when the run ended, by the records' commit times: how
	// many subagents ran at once and how long the runs took come from
	// the frames, so the driver never polls the herds during the burst.
	counts     bool
	tasks      []taskMark
	started    map[string]bool // task ids seen starting: only their ends count
	runEnd     time.Time
	reconnects int
	replayed   int // frames committed while it was away, caught up on reconnect
}

// fleet is every client of the load, reading until stopped.
type fleet struct {
	clients []*client
	wg      sync.WaitGroup
	done    chan struct{}
}

// attach starts perThread clients on each thread; the given share of them
// drop and reconnect once mid-run.
func attach(hs herds, threads []string, perThread int, reconnect float64) *fleet {
	fl := &fleet{done: make(chan struct{})}
	for i, th := range threads {
		for k := range perThread {
			c := &client{thread: th, home: len(fl.clients) % len(hs), owner: i % len(hs), reconnect: rand.Float64() < reconnect, ended: make(chan struct{}), counts: k == 0}
			fl.clients = append(fl.clients, c)
			fl.wg.Add(1)
			go c.run(hs, fl.done, &fl.wg)
		}
	}
	return fl
}

// stop closes every client's connection and waits for it to return.
func (fl *fleet) stop() {
	close(fl.done)
	fl.wg.Wait()
}

func (c *client) dial(hs herds) (*websocket.Conn, error) {
	c.mu.Lock()
	after := c.last
	c.on = (c.home + c.reconnects) % len(hs)
	h := hs[c.on]
	c.mu.Unlock()
	hdr := http.Header{"Authorization": {"Bearer " + h.tok}}
	url := "ws" + strings.TrimPrefix(h.url, "http") + fmt.Sprintf("/api/threads/%s/stream?after_seq=%d", c.thread, after)
	conn, resp, err := dialer.Dial(url, hdr)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	return conn, err
}

// dialer reads a socket 32 KB at a time: when a client falls behind in a
// burst, one read takes every frame waiting instead of one or two (the
// driver shares the cores with the herds it measures).
var dialer = &websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 45 * time.Second, ReadBufferSize: 32 << 10}

// run reads frames until stop, reconnecting once mid-run when asked to.
func (c *client) run(hs herds, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		conn, err := c.dial(hs)
		if err != nil {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				continue
			}
		}
		cut := make(chan struct{})
		if c.reconnect && c.reconnects == 0 {
			time.AfterFunc(time.Duration(200+rand.IntN(1500))*time.Millisecond, func() { close(cut) })
		}
		read := make(chan struct{})
		connected := time.Now()
		go func() {
			defer close(read)
			c.read(conn, connected)
		}()
		select {
		case <-stop:
			conn.Close()
			<-read
			return
		case <-cut:
			c.mu.Lock()
			c.reconnects++
			c.mu.Unlock()
			conn.Close()
			<-read
		case <-read:
			conn.Close()
		}
	}
}

// taskMark is a task starting (+1) or ending (-1) at a commit time.
type taskMark struct {
	at    time.Time
	delta int
}

var (
	keyTaskStarted = []byte(`"type":"task_started"`)
	keyTaskEnded   = [][]byte{[]byte(`"type":"task_completed"`), []byte(`"type":"task_failed"`), []byte(`"type":"task_cancelled"`), []byte(`"type":"task_timed_out"`)}
	keySeq         = []byte(`"seq":`)
	keyCreated     = []byte(`"created_at":"`)
	keyRunEnd      = []byte(`"type":"run.end"`)
)

// read records frames. The driver shares the cores with the server, so it
// scans for the fields it needs instead of decoding every frame. A frame
// committed before this connection opened is a catch-up after a
// reconnect: its delay is the time the client was away, so it counts as
// replayed, not in the live latency.
func (c *client) read(conn *websocket.Conn, connected time.Time) {
	var buf bytes.Buffer
	for {
		_, r, err := conn.NextReader()
		if err != nil {
			return
		}
		buf.Reset()
		if _, err := buf.ReadFrom(r); err != nil {
			return
		}
		raw := buf.Bytes() // reused: nothing below keeps it
		now := time.Now()
		i := bytes.Index(raw, keySeq)
		if i < 0 || bytes.HasPrefix(raw[i+len(keySeq):], []byte("null")) {
			continue
		}
		rest := raw[i+len(keySeq):]
		j := bytes.IndexAny(rest, ",}")
		seq, err := strconv.ParseInt(string(rest[:j]), 10, 64)
		if err != nil {
			continue
		}
		var lat time.Duration = -1
		var at time.Time
		replay := false
		if k := bytes.LastIndex(raw, keyCreated); k >= 0 {
			ts := raw[k+len(keyCreated):]
			if at, err = time.Parse(time.RFC3339Nano, string(ts[:bytes.IndexByte(ts, '"')])); err == nil {
				lat = now.Sub(at)
				replay = at.Before(connected)
			}
		}
		c.mu.Lock()
		if seq <= c.last {
			c.dups++
		} else {
			c.seqs = append(c.seqs, seq)
			c.last = seq
			if c.counts && lat >= 0 {
				c.mark(raw, at)
			}
			switch {
			case replay:
				c.replayed++
			case lat >= 0 && c.on != c.owner:
				c.remote = append(c.remote, lat)
			case lat >= 0:
				c.lats = append(c.lats, lat)
			}
		}
		c.mu.Unlock()
		if bytes.Contains(raw, keyRunEnd) {
			c.endOnce.Do(func() { close(c.ended) })
		}
	}
}

// mark notes a task's start or end, or the run's end, committed at at;
// c.mu is held.
func (c *client) mark(raw []byte, at time.Time) {
	switch {
	case bytes.Contains(raw, keyTaskStarted):
		if c.started == nil {
			c.started = map[string]bool{}
		}
		c.started[taskID(raw)] = true
		c.tasks = append(c.tasks, taskMark{at, 1})
	case bytes.Contains(raw, keyRunEnd):
		c.runEnd = at
	default:
		for _, k := range keyTaskEnded {
			// A task that ends without starting (cancelled while
			// queued) never ran.
			if bytes.Contains(raw, k) && c.started[taskID(raw)] {
				c.tasks = append(c.tasks, taskMark{at, -1})
			}
		}
	}
}

var keyTaskID = []byte(`"task_id":"`)

// taskID is the task_id a task frame names.
func taskID(raw []byte) string {
	i := bytes.Index(raw, keyTaskID)
	if i < 0 {
		return ""
	}
	rest := raw[i+len(keyTaskID):]
	if j := bytes.IndexByte(rest, '"'); j >= 0 {
		return string(rest[:j])
	}
	return ""
}

// peakRunning is the most tasks running at once by the commit times of
// their starts and ends (an end and a start at the same instant count
// the end first), and lastRunEnd the commit time of the last run.end.
func (fl *fleet) peakRunning() (peak int, lastRunEnd time.Time) {
	var marks []taskMark
	for _, c := range fl.clients {
		if c.counts {
			c.mu.Lock()
			marks = append(marks, c.tasks...)
			if c.runEnd.After(lastRunEnd) {
				lastRunEnd = c.runEnd
			}
			c.mu.Unlock()
		}
	}
	slices.SortFunc(marks, func(a, b taskMark) int {
		if d := a.at.Compare(b.at); d != 0 {
			return d
		}
		return a.delta - b.delta
	})
	running := 0
	for _, m := range marks {
		running += m.delta
		peak = max(peak, running)
	}
	return peak, lastRunEnd
}
