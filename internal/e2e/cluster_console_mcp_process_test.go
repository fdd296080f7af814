package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd/internal/pgtest"
)

// guardedServer is an MCP server over streamable HTTP with one tool,
// lookup, that answers only requests bearing token.
func guardedServer(t *testing.T, token string) string {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "guarded", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "lookup", Description: "Looks up.", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "found it"}}}, nil
	})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL + "/mcp"
}

// waitFor polls GET path on c until its body satisfies ok (no signal
// crosses the processes but the API).
func waitFor(t *testing.T, c *client, path, what string, ok func(string) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, body := c.status("GET", path, nil)
		if ok(body) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never: %s", what, body)
		}
	}
}

// TestClusterConsoleMCPOnOtherInstance: an MCP server and a subagent
// type that names its tool, added through instance A's API, are used by
// a run on instance B with the server's header, without a restart; a
// delete on A ends B's session. The row holds the header sealed only
// (docs/DESIGN.md §12, §14).
func TestClusterConsoleMCPOnOtherInstance(t *testing.T) {
	t.Parallel() // its own data directories, schema and ports
	const token = "Bearer mcp-cluster-SECRET-77"
	mcpURL := guardedServer(t, token)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	dsn := pgtest.DSN(t)
	env := clusterEnv(dsn, "HERD_SECRET_KEY="+base64.StdEncoding.EncodeToString(key))
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca, cb := a.signIn(), b.signIn()

	ca.call("POST", "/api/admin/mcp", map[string]any{"name": "search", "url": mcpURL, "headers": map[string]string{"Authorization": token}}, nil)
	ca.call("POST", "/api/admin/agents", map[string]any{"name": "finder", "description": "Finds things.", "tools": []string{"mcp:search/lookup"}}, nil)
	waitFor(t, cb, "/api/admin/agents", "B listed the subagent type added on A", func(s string) bool { return strings.Contains(s, `"finder"`) })
	waitFor(t, cb, "/api/admin/mcp", "B listed the MCP server added on A", func(s string) bool { return strings.Contains(s, `"search"`) })

	var th struct{ ID string }
	cb.call("POST", "/api/threads", map[string]string{"title": "mcp"}, &th)
	got := cb.send(th.ID, "- finder: use search/lookup")
	var result string
	for _, m := range got.Messages {
		if m.Type == "tool" && m.Name == "task" {
			result = m.Content
		}
	}
	if !strings.Contains(result, "found it") {
		t.Fatalf("the task on B returned %q, want the tool's answer (B calls the server with the header stored on A)", result)
	}
	if _, body := cb.status("GET", "/api/admin/mcp", nil); strings.Contains(body, "SECRET") || !strings.Contains(body, `"mcp:search/lookup"`) {
		t.Fatalf("B's GET /api/admin/mcp = %s, want search with its tool and no secret", body)
	}

	ca.call("DELETE", "/api/admin/agents/finder", nil, nil)
	ca.call("DELETE", "/api/admin/mcp/search", nil, nil)
	waitFor(t, cb, "/api/admin/mcp", "B dropped the MCP server deleted on A", func(s string) bool { return !strings.Contains(s, `"search"`) })

	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM console_entries WHERE kind = 'mcp'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("mcp rows after the delete: %d, %v", n, err)
	}
	var audited string
	if err := conn.QueryRow(context.Background(), "SELECT string_agg(coalesce(before::text, '') || coalesce(after::text, ''), ' ') FROM audit_entries WHERE action LIKE 'mcp.%'").Scan(&audited); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(audited, "SECRET") || !strings.Contains(audited, "Authorization") {
		t.Fatalf("the audit log of the MCP changes = %s, want the header named and masked", audited)
	}
	stopHerd(t, a)
	stopHerd(t, b)
}
