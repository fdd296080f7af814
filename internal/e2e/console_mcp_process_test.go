package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// childrenOf are the processes whose parent is pid.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid …: comm may hold spaces, so read after ')'.
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(strings.Fields(string(b))[0])
			out = append(out, child)
		}
	}
	return out
}

// echoResult is the task's answer of a run of ask in a new thread.
func echoResult(c *client, ask string) string {
	var th struct{ ID string }
	c.call("POST", "/api/threads", map[string]string{"title": "mcp"}, &th)
	for _, m := range c.send(th.ID, ask).Messages {
		if m.Type == "tool" && m.Name == "task" {
			return m.Content
		}
	}
	return ""
}

// TestConsoleMCPServerEverything: the real third-party MCP server over
// stdio, added through the API of a herd started without any: its
// process starts at once and a subagent type added in the console calls
// its echo tool with no restart; after a restart the stored server is
// there again; a delete stops its process. The env value is sealed in
// the database file (docs/DESIGN.md §12).
func TestConsoleMCPServerEverything(t *testing.T) {
	t.Parallel() // its own data directories, schema and ports
	bin := repoPath(t, everythingServer)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run `make test` (or `make mcp-test-server`), which installs it with npm: %v", everythingServer, err)
	}
	dir := t.TempDir()
	p := startHerdWith(t, dir)
	admin := p.signIn()
	if kids := childrenOf(t, p.cmd.Process.Pid); len(kids) != 0 {
		t.Fatalf("herd without MCP servers runs children %v", kids)
	}
	admin.call("POST", "/api/admin/mcp", map[string]any{"name": "everything", "command": bin, "env": map[string]string{"EVERYTHING_NOTE": "env-SECRET-5"}, "timeout_seconds": 30}, nil)
	admin.call("POST", "/api/admin/agents", map[string]any{"name": "echoer", "description": "Echoes with the everything server.", "tools": []string{"mcp:everything/echo"}}, nil)
	if kids := childrenOf(t, p.cmd.Process.Pid); len(kids) != 1 {
		t.Fatalf("after the add herd runs children %v, want the server's process", kids)
	}
	const ask = `- echoer: use everything/echo with {"message":"hello from the console"}`
	if got := echoResult(admin, ask); !strings.Contains(got, "Echo: hello from the console") {
		t.Fatalf("the task returned %q, want the echo tool's answer", got)
	}
	stopHerd(t, p)

	p = startHerdWith(t, dir)
	admin = p.signIn()
	if got := echoResult(admin, ask); !strings.Contains(got, "Echo: hello from the console") {
		t.Fatalf("after a restart the task returned %q, want the stored server's echo", got)
	}
	admin.call("DELETE", "/api/admin/agents/echoer", nil, nil)
	admin.call("DELETE", "/api/admin/mcp/everything", nil, nil)
	if kids := childrenOf(t, p.cmd.Process.Pid); len(kids) != 0 {
		t.Fatalf("after the delete herd runs children %v, want none", kids)
	}
	stopHerd(t, p)
	for _, f := range []string{"herd.db", "herd.db-wal"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("env-SECRET-5")) {
			t.Fatalf("%s holds the env value in the clear", f)
		}
	}
}
