package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// everythingServer is the npm package @modelcontextprotocol/server-everything
// that `make test` (and so .ci/run) installs under .cache/mcp, from the
// module root.
const everythingServer = ".cache/mcp/node_modules/.bin/mcp-server-everything"

// everythingEnv is the setting that gives a herd the everything server
// over stdio; the test fails when npm has not installed it.
func everythingEnv(t *testing.T) string {
	t.Helper()
	bin := repoPath(t, everythingServer)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run `make test` (or `make mcp-test-server`), which installs it with npm: %v", everythingServer, err)
	}
	return "HERD_MCP_SERVERS=[{name: everything, command: '" + bin + "', timeout_seconds: 30}]"
}

// A real third-party MCP server over stdio, end to end: the demo lead
// delegates to a subagent type whose tools list names the server's echo
// tool, the subagent calls it, and its result reaches the task's
// ToolMessage; a plain user, for whom the stdio server is not (use:
// admins by default), is not offered the tool at all.
func TestMCPServerEverything(t *testing.T) {
	mcpEnv := everythingEnv(t)
	p := startHerdWith(t, t.TempDir(),
		mcpEnv,
		"HERD_SUBAGENTS_AGENTS={echoer: {description: Echoes with the everything server., tools: ['mcp:everything/echo']}}",
	)
	admin := p.signIn()
	const ask = `- echoer: use everything/echo with {"message":"hello from herd <b>"}`

	var th struct{ ID string }
	admin.call("POST", "/api/threads", map[string]string{"title": "mcp"}, &th)
	got := admin.send(th.ID, ask)
	var result string
	for _, m := range got.Messages {
		if m.Type == "tool" && m.Name == "task" {
			result = m.Content
		}
	}
	if !strings.Contains(result, "Echo: hello from herd <b>") || !strings.Contains(result, "Task Succeeded") {
		t.Errorf("the task's result = %q, want the echo tool's answer", result)
	}
	// The card's steps: the call, and the tool's result as a tool step.
	var ev struct {
		Events json.RawMessage `json:"events"`
	}
	admin.call("GET", "/api/threads/"+th.ID+"/events?event_types=subagent.step&limit=100", nil, &ev)
	for _, want := range []string{`"tool_name":"mcp__everything__echo"`, `Echo: hello from herd \u003cb\u003e`} {
		if !strings.Contains(string(ev.Events), want) {
			t.Errorf("the subagent's steps lack %s: %s", want, ev.Events)
		}
	}

	var status struct {
		Servers []struct {
			Name, State, Transport string
			Tools                  []string
		} `json:"servers"`
	}
	admin.call("GET", "/api/admin/mcp", nil, &status)
	if len(status.Servers) != 1 || status.Servers[0].State != "connected" || status.Servers[0].Transport != "stdio" ||
		!slices.Contains(status.Servers[0].Tools, "mcp:everything/echo") {
		t.Errorf("GET /api/admin/mcp = %+v, want everything connected over stdio with its echo tool", status.Servers)
	}

	const pw = "a long and unusual passphrase 7"
	admin.call("POST", "/api/admin/users", map[string]string{"email": "user@example.com", "password": pw, "role": "user"}, nil)
	user := p.signInAs("user@example.com", pw)
	var uth struct{ ID string }
	user.call("POST", "/api/threads", map[string]string{"title": "mcp"}, &uth)
	for _, m := range user.send(uth.ID, ask).Messages {
		if m.Type == "tool" && m.Name == "task" && (!strings.Contains(m.Content, "not among my tools") || strings.Contains(m.Content, "Echo:")) {
			t.Errorf("a plain user's subagent was offered the admins' MCP tool: %q", m.Content)
		}
	}
}

// The real server's progress and images, end to end: the lead's own call
// of trigger-long-running-operation streams its progress as tool_progress
// frames, in order, its last step always; a subagent's get-tiny-image
// keeps the PNG on its tool step, served by herd to the thread's owner as
// image/png.
func TestMCPServerEverythingProgressAndImage(t *testing.T) {
	mcpEnv := everythingEnv(t)
	p := startHerdWith(t, t.TempDir(),
		mcpEnv,
		"HERD_LEAD_TOOLS=['mcp:everything/trigger-long-running-operation']",
		"HERD_SUBAGENTS_AGENTS={imager: {description: Gets pictures., tools: ['mcp:everything/get-tiny-image']}}",
	)
	admin := p.signIn()

	var th struct{ ID string }
	admin.call("POST", "/api/threads", map[string]string{"title": "progress"}, &th)
	conn := dialThread(t, p, admin, th.ID)
	admin.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": `use everything/trigger-long-running-operation with {"duration": 1, "steps": 4}`}, nil)
	var progress []string
	for done := false; !done; {
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		var f struct {
			Type string `json:"type"`
			Data struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"data"`
		}
		if err := conn.ReadJSON(&f); err != nil {
			t.Fatalf("frames stopped (progress %q): %v", progress, err)
		}
		switch {
		case f.Type == "tool_progress":
			progress = append(progress, f.Data.Text)
		case f.Type == "message" && f.Data.Type == "tool":
			done = true
		}
	}
	if n := len(progress); n < 2 || progress[n-1] != "trigger-long-running-operation: 4 of 4" {
		t.Errorf("tool_progress frames = %q, want the steps up to 4 of 4", progress)
	}

	var ith struct{ ID string }
	admin.call("POST", "/api/threads", map[string]string{"title": "image"}, &ith)
	admin.send(ith.ID, "- imager: use everything/get-tiny-image")
	var ev struct {
		Events []struct {
			Content struct {
				ToolName string `json:"tool_name"`
				Output   *struct {
					Images []struct{ ID, MIMEType string }
				} `json:"output"`
			} `json:"content"`
		} `json:"events"`
	}
	admin.call("GET", "/api/threads/"+ith.ID+"/events?event_types=subagent.step&limit=100", nil, &ev)
	id := ""
	for _, e := range ev.Events {
		if e.Content.ToolName == "mcp__everything__get-tiny-image" && e.Content.Output != nil && len(e.Content.Output.Images) == 1 {
			id = e.Content.Output.Images[0].ID
		}
	}
	if id == "" {
		t.Fatalf("get-tiny-image's step keeps no image: %+v", ev.Events)
	}
	resp, err := admin.http.Get(p.url + "/api/threads/" + ith.ID + "/tool-images/" + id)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" || !bytes.HasPrefix(body, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("GET the image: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
}
