package e2e

import (
	"encoding/json"
	"fmt"
	"herd/agent/mcp/mcptest"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveMCP serves s over streamable HTTP on a local port until the test
// ends, its sessions closed with it.
func serveMCP(t *testing.T, s *sdk.Server, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	var h http.Handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	if wrap != nil {
		h = wrap(h)
	}
	hs := httptest.NewUnstartedServer(h)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
	})
	return hs
}

// announceServer is an MCP server with mcptest's announce tool, which
// logs lines tied to no call while several users' calls are in flight.
func announceServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "announcer", Version: "1"}, nil)
	mcptest.AddAnnounce(s)
	return s
}

// watchFrames collects every frame of a thread's stream, as its page
// would receive them, until the test ends.
func watchFrames(t *testing.T, p *proc, c *client, threadID string) *syncBuffer {
	conn := dialThread(t, p, c, threadID)
	out := &syncBuffer{}
	go func() {
		for {
			_, b, err := conn.ReadMessage()
			if err != nil {
				return
			}
			out.Write(append(b, '\n'))
		}
	}()
	return out
}

// waitIdle waits until threadID's run has ended.
func (c *client) waitIdle(threadID string) {
	c.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		var th threadMessages
		c.call("GET", "/api/threads/"+threadID, nil, &th)
		if th.Active == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the run of thread %s did not end", threadID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stored is everything kept of a thread: its messages, ToolMessages'
// tool output included, and its events.
func (c *client) stored(threadID string) string {
	c.t.Helper()
	var th, ev json.RawMessage
	c.call("GET", "/api/threads/"+threadID, nil, &th)
	c.call("GET", "/api/threads/"+threadID+"/events?limit=1000", nil, &ev)
	return string(th) + "\n" + string(ev)
}

// Two users' calls of one MCP server in flight at once, the server logging
// each call's parameters without a progress token: neither user's stored
// tool output nor live frames hold the other's; the lines tied to no
// request are withheld and counted; a user alone gets every line of their
// call (docs/DESIGN.md §4). The server is a real SDK server over HTTP.
func TestMCPLogLinesStayWithTheirUser(t *testing.T) {
	hs := serveMCP(t, announceServer(), nil)
	hs.Start()
	p := startHerdWith(t, t.TempDir(),
		"HERD_MCP_SERVERS=[{name: fx, url: '"+hs.URL+"/mcp', timeout_seconds: 30}]",
		"HERD_LEAD_TOOLS=['mcp:fx/*']",
	)
	admin := p.signIn()
	const pw = "a long and unusual passphrase 7"
	users := map[string]*client{}
	for _, name := range []string{"ann", "bob"} {
		admin.call("POST", "/api/admin/users", map[string]string{"email": name + "@example.com", "password": pw, "role": "user"}, nil)
		users[name] = p.signInAs(name+"@example.com", pw)
	}
	type seen struct {
		thread string
		frames *syncBuffer
	}
	start := func(name, word, group string, together int) seen {
		c := users[name]
		var th struct{ ID string }
		c.call("POST", "/api/threads", map[string]string{"title": word}, &th)
		s := seen{thread: th.ID, frames: watchFrames(t, p, c, th.ID)}
		c.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{
			"content": fmt.Sprintf(`use fx/announce with {"word": %q, "group": %q, "together": %d}`, word, group, together)}, nil)
		return s
	}

	words := map[string]string{"ann": "ann-param-4242", "bob": "bob-param-7777"}
	runs := map[string]seen{}
	for name, word := range words {
		runs[name] = start(name, word, "both", 2)
	}
	for name, r := range runs {
		users[name].waitIdle(r.thread)
	}
	time.Sleep(200 * time.Millisecond) // the last frames
	for name, r := range runs {
		other := words["bob"]
		if name == "bob" {
			other = words["ann"]
		}
		stored, frames := users[name].stored(r.thread), r.frames.String()
		for what, text := range map[string]string{"stored output": stored, "frames": frames} {
			if strings.Contains(text, other) {
				t.Errorf("%s's %s hold the other user's %s:\n%s", name, what, other, text)
			}
			if !strings.Contains(text, "said "+words[name]) {
				t.Errorf("%s's %s lack the line on the call's own stream, said %s:\n%s", name, what, words[name], text)
			}
			if strings.Contains(text, "loose "+words[name]) {
				t.Errorf("%s's %s hold a line tied to no request while another user's call was in flight", name, what)
			}
		}
	}
	if n := p.metric(`herd_mcp_log_lines_dropped_total{server="fx"}`); n != 2 {
		t.Errorf("dropped = %v, want the 2 lines tied to no request", n)
	}
	var status struct {
		Servers []struct {
			LogLinesDropped int `json:"log_lines_dropped"`
		} `json:"servers"`
	}
	admin.call("GET", "/api/admin/mcp", nil, &status)
	if len(status.Servers) != 1 || status.Servers[0].LogLinesDropped != 2 {
		t.Errorf("GET /api/admin/mcp = %+v, want 2 lines dropped", status.Servers)
	}

	// A user alone gets every line of the call, once the others' calls
	// ended more than the grace ago.
	time.Sleep(2100 * time.Millisecond)
	solo := start("ann", "solo-5151", "solo", 1)
	users["ann"].waitIdle(solo.thread)
	stored := users["ann"].stored(solo.thread)
	for _, want := range []string{"said solo-5151", "loose solo-5151"} {
		if !strings.Contains(stored, want) {
			t.Errorf("a lone user's call lacks %q:\n%s", want, stored)
		}
	}
}
