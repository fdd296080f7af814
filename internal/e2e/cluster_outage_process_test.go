package e2e

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"herd/internal/pgtest"
)

// warnLine is a log line at WARN or ERROR (the text handler's level).
var warnLine = regexp.MustCompile(`level=(WARN|ERROR) `)

// warnings are the WARN and ERROR lines of log from byte offset from on.
func warnings(log string, from int) []string {
	var out []string
	for _, line := range strings.Split(log[from:], "\n") {
		if warnLine.MatchString(line) {
			out = append(out, line)
		}
	}
	return out
}

// messageOf is a log line's msg, what tells one kind of warning from
// another.
var msgField = regexp.MustCompile(`msg="([^"]*)"|msg=(\S+)`)

func messageOf(line string) string {
	m := msgField.FindStringSubmatch(line)
	if m == nil {
		return line
	}
	return m[1] + m[2]
}

// retryPage does what an open page does while its instance cannot reach
// the database, until stop: every 250 ms it opens the thread's stream
// again and reads the thread.
func retryPage(p *proc, c *client, threadID string, stop <-chan struct{}) {
	hdr := http.Header{"Origin": {p.url}}
	for _, ck := range c.http.Jar.Cookies(mustParse(p.url)) {
		hdr.Add("Cookie", ck.Name+"="+ck.Value)
	}
	stream := "ws" + strings.TrimPrefix(p.url, "http") + "/api/threads/" + threadID + "/stream"
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		conn, resp, err := websocket.DefaultDialer.Dial(stream, hdr)
		if resp != nil {
			resp.Body.Close()
		}
		if err == nil {
			_ = conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			_, _, _ = conn.ReadMessage()
			conn.Close()
		}
		if resp, err := c.http.Get(p.url + "/api/threads/" + threadID); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
}

// TestClusterOutageLogsOnce: three instances on a PostgreSQL of the
// test's own, each with a page that keeps reconnecting (retryPage), lose
// the database for about 9 s. Each logs what went wrong once per state change (the
// listener lost, listening again, …), not once per attempt: fewer than
// ten WARN or ERROR lines per instance from the outage to 20 s after it,
// and none in the last 12 s of that, when nothing is wrong any more (a
// never-set setting read as a failure would repeat every 5 s).
//
// The lease (60 s) outlasts the outage: this test is about the log, not
// about an instance that lost its lease (docs/DESIGN.md §14).
func TestClusterOutageLogsOnce(t *testing.T) {
	t.Parallel() // it mostly waits: beside the others
	pg := pgtest.Private(t)
	env := clusterEnv(pg.DSN, "HERD_CLUSTER_LEASE_SECONDS=60", "HERD_CLUSTER_RENEW_SECONDS=3")
	var (
		ps      []*proc
		clients []*client
		threads []string
	)
	for range 3 {
		p := startHerdWith(t, t.TempDir(), env...)
		c := p.signIn()
		var th struct{ ID string }
		c.call("POST", "/api/threads", map[string]string{"title": "outage"}, &th)
		conn := dialStream(t, p, c, th.ID)
		c.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": "hello"}, nil)
		for f := readFrame(t, conn, p); f.Type != "run.end"; f = readFrame(t, conn, p) {
		}
		ps, clients, threads = append(ps, p), append(clients, c), append(threads, th.ID)
	}

	from := make([]int, len(ps))
	for i, p := range ps {
		from[i] = len(p.log.String())
	}
	stop := make(chan struct{})
	var pages sync.WaitGroup
	for i, p := range ps {
		pages.Go(func() { retryPage(p, clients[i], threads[i], stop) })
	}
	if err := pg.Halt(); err != nil {
		t.Fatal(err)
	}
	// The outage itself: its length is what the test is about.
	time.Sleep(9 * time.Second)
	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		if !p.log.waitFor("cluster: listening again", 30*time.Second) {
			t.Fatalf("instance %d never listened again:\n%s", i, p.log.String()[from[i]:])
		}
	}
	close(stop)
	pages.Wait()
	// Settled: what is logged from here on repeats without a cause.
	time.Sleep(8 * time.Second)
	settled := make([]int, len(ps))
	for i, p := range ps {
		settled[i] = len(p.log.String())
	}
	time.Sleep(12 * time.Second)

	for i, p := range ps {
		select {
		case err := <-p.done:
			t.Fatalf("instance %d exited through a 9 s outage under a 60 s lease: %v\n%s", i, err, p.log.String()[from[i]:])
		default:
		}
		log := p.log.String()
		all := warnings(log, from[i])
		kinds := map[string]int{}
		for _, l := range all {
			kinds[messageOf(l)]++
		}
		t.Logf("instance %d: %d WARN/ERROR lines through the outage and 20 s after: %v", i, len(all), kinds)
		if len(all) >= 10 {
			t.Errorf("instance %d logged %d WARN/ERROR lines for one 9 s outage, want fewer than 10:\n%s", i, len(all), strings.Join(all, "\n"))
		}
		if late := warnings(log, settled[i]); len(late) > 0 {
			t.Errorf("instance %d still warns 8 s after it listened again, with the database up:\n%s", i, strings.Join(late, "\n"))
		}
	}
	for _, p := range ps {
		stopHerd(t, p)
	}
}
