package server

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd/agent"
	"herd/agent/mcp"
)

const mcpToken = "Bearer tok-console-SECRET-42"

// consoleMCPFixture is a live HTTP MCP server with the tool lookup that
// answers only a request with mcpToken, and herd's MCP servers, none
// configured yet, closed when the test ends.
func consoleMCPFixture(t *testing.T) (*mcp.Servers, string) {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "fixture", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "lookup", Description: "Looks up.", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "found it"}}}, nil
	})
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != mcpToken {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	servers := mcp.New(nil, mcp.Options{MinBackoff: time.Hour})
	servers.Start()
	t.Cleanup(func() {
		servers.Close()
		hs.CloseClientConnections()
		hs.Close()
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
	})
	return servers, hs.URL + "/mcp"
}

// answer runs content in a new thread of u and returns the last answer.
func answer(a *testApp, u *user, content string) string {
	a.t.Helper()
	th := u.newThread("t")
	u.startRun(th, content)
	a.waitIdle(th)
	msgs := u.shownMessages(th)
	return msgs[len(msgs)-1].Content
}

// TestAdminMCPAppliedAtOnce: an MCP server an admin adds through the API
// is connected with its header and its tool called by the next run,
// without a restart; an edit and a delete reach the next run too. The
// header's value is never in an answer, and the database (the audit log
// included) holds it sealed only (docs/DESIGN.md §12).
func TestAdminMCPAppliedAtOnce(t *testing.T) {
	servers, url := consoleMCPFixture(t)
	a := newApp(t, func(c *appConfig) {
		c.mcp = servers
		c.lead = agent.LeadConfig{Tools: &[]string{"mcp:search/*"}}
	})
	admin := a.newUser("admin@example.com", true)
	const use = "use search/lookup"
	if got := answer(a, admin, use); strings.Contains(got, "found it") {
		t.Fatalf("before the server is added the run answered %q", got)
	}

	var added struct {
		Name string `json:"name"`
		mcpConfigView
	}
	admin.mustJSON("POST", "/api/admin/mcp", map[string]any{"name": "search", "url": url, "headers": map[string]string{"Authorization": mcpToken}}, http.StatusCreated, &added)
	if added.Name != "search" || added.Source != "console" || added.ReadOnly || len(added.Headers) != 1 || added.Headers[0] != "Authorization" || added.Use != mcp.UseAll {
		t.Fatalf("added = %+v, want search from the console, its header named", added)
	}
	if got := answer(a, admin, use); !strings.Contains(got, "found it") {
		t.Fatalf("the next run answered %q, want the tool's answer", got)
	}

	// An edit that leaves the headers out keeps them; it reaches the
	// next run.
	admin.mustJSON("PATCH", "/api/admin/mcp/search", map[string]any{"disallowed_tools": []string{"lookup"}}, http.StatusOK, nil)
	if got := answer(a, admin, use); strings.Contains(got, "found it") {
		t.Fatalf("after lookup was disallowed the run answered %q", got)
	}
	admin.mustJSON("PATCH", "/api/admin/mcp/search", map[string]any{"disallowed_tools": []string{}, "headers": map[string]any{"Authorization": nil}}, http.StatusOK, nil)
	if got := answer(a, admin, use); !strings.Contains(got, "found it") {
		t.Fatalf("with the header kept the run answered %q", got)
	}
	var listed struct {
		Servers []struct {
			mcp.ServerStatus
			Config mcpConfigView `json:"config"`
		} `json:"servers"`
	}
	r := admin.do("GET", "/api/admin/mcp", nil)
	if bytes.Contains(r.body, []byte("SECRET")) {
		t.Fatalf("GET /api/admin/mcp shows the header: %s", r.body)
	}
	admin.mustJSON("GET", "/api/admin/mcp", nil, http.StatusOK, &listed)
	if len(listed.Servers) != 1 || listed.Servers[0].State != mcp.StateConnected || listed.Servers[0].Config.Source != "console" ||
		strings.Join(listed.Servers[0].Tools, ",") != "mcp:search/lookup" {
		t.Fatalf("GET /api/admin/mcp = %+v, want search connected with its tool, from the console", listed.Servers)
	}

	admin.mustJSON("DELETE", "/api/admin/mcp/search", nil, http.StatusNoContent, nil)
	if st := servers.Status(); len(st) != 0 {
		t.Fatalf("after the delete the servers are %+v", st)
	}
	if got := answer(a, admin, use); strings.Contains(got, "found it") {
		t.Fatalf("after the delete the run answered %q", got)
	}
	a.close()
	for _, f := range []string{"herd.db", "herd.db-wal"} {
		b, err := os.ReadFile(filepath.Join(a.dir, f))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("SECRET")) {
			t.Fatalf("%s holds the header's value in the clear", f)
		}
	}
}

// TestAdminMCPRefusals: herd.yaml's servers are read-only (409), bad
// input is refused by the config file's rules naming its field (422),
// and users may not (403).
func TestAdminMCPRefusals(t *testing.T) {
	servers, url := consoleMCPFixture(t)
	a := newApp(t, func(c *appConfig) { c.mcp = servers })
	a.console.o.MCP = []mcp.ServerConfig{{Name: "filed", URL: url}}
	admin := a.newUser("admin@example.com", true)
	plain := a.newUser("user@example.com", false)
	admin.mustJSON("POST", "/api/admin/mcp", map[string]any{"name": "kid", "command": "/bin/true", "env": map[string]string{"K": "v"}}, http.StatusCreated, nil)
	for _, c := range []struct {
		u            *user
		method, path string
		body         any
		status       int
		want         string
	}{
		{admin, "PATCH", "/api/admin/mcp/filed", map[string]any{"timeout_seconds": 5}, http.StatusConflict, "set in herd.yaml"},
		{admin, "DELETE", "/api/admin/mcp/filed", nil, http.StatusConflict, "set in herd.yaml"},
		{admin, "POST", "/api/admin/mcp", map[string]any{"name": "filed", "command": "x"}, http.StatusConflict, "name is taken"},
		{admin, "POST", "/api/admin/mcp", map[string]any{"name": "kid", "command": "x"}, http.StatusConflict, "name is taken"},
		{admin, "POST", "/api/admin/mcp", map[string]any{"name": "Bad Name", "command": "x"}, http.StatusUnprocessableEntity, `"field":"name"`},
		{admin, "POST", "/api/admin/mcp", map[string]any{"name": "none"}, http.StatusUnprocessableEntity, "needs a command (stdio) or a url"},
		{admin, "POST", "/api/admin/mcp", map[string]any{"name": "web", "url": "ftp://example.com"}, http.StatusUnprocessableEntity, `"field":"url"`},
		{admin, "POST", "/api/admin/mcp", map[string]any{"name": "web", "url": "https://example.com", "headers": map[string]string{"Accept": "x"}}, http.StatusUnprocessableEntity, "set by the MCP client itself"},
		{admin, "POST", "/api/admin/mcp", map[string]any{"name": "web", "url": "https://example.com", "use": "everyone"}, http.StatusUnprocessableEntity, `"field":"use"`},
		{admin, "POST", "/api/admin/mcp", map[string]any{"name": "web", "url": "https://example.com", "headers": map[string]any{"X-Key": nil}}, http.StatusUnprocessableEntity, `"field":"headers.X-Key"`},
		{admin, "POST", "/api/admin/mcp", map[string]any{"name": "web", "url": "https://example.com", "port": 1}, http.StatusBadRequest, "port"},
		{admin, "PATCH", "/api/admin/mcp/kid", map[string]any{"env": map[string]any{"OTHER": nil}}, http.StatusUnprocessableEntity, `"field":"env.OTHER"`},
		{admin, "PATCH", "/api/admin/mcp/kid", map[string]any{"name": "kid2"}, http.StatusUnprocessableEntity, "name cannot change"},
		{admin, "PATCH", "/api/admin/mcp/kid", map[string]any{"timeout_seconds": -1}, http.StatusUnprocessableEntity, `"field":"timeout_seconds"`},
		{admin, "PATCH", "/api/admin/mcp/nobody", map[string]any{"timeout_seconds": 5}, http.StatusNotFound, "not found"},
		{plain, "POST", "/api/admin/mcp", map[string]any{"name": "web", "url": "https://example.com"}, http.StatusForbidden, ""},
		{plain, "DELETE", "/api/admin/mcp/kid", nil, http.StatusForbidden, ""},
		{plain, "POST", "/api/admin/mcp/test", map[string]any{"name": "kid"}, http.StatusForbidden, ""},
	} {
		t.Run(c.method+" "+c.path+" "+c.want, func(t *testing.T) {
			r := c.u.do(c.method, c.path, c.body)
			if r.status != c.status || !strings.Contains(string(r.body), c.want) {
				t.Fatalf("%d %s, want %d with %q", r.status, r.body, c.status, c.want)
			}
		})
	}
	// A refused edit changed nothing: the env is as it was.
	got, err := a.console.storedMCP(context.Background(), "kid")
	if err != nil || got.Env["K"] != "v" || got.TimeoutSeconds != mcp.DefaultTimeoutSeconds {
		t.Fatalf("kid = %+v, %v; want it as created", got, err)
	}
}

// TestAdminMCPTestConnection: Test connection lists a server's tools, of
// one by its name or of settings sent, with a stored header kept when
// its value is null, and says in plain words what went wrong; it adds
// nothing to the servers in use.
func TestAdminMCPTestConnection(t *testing.T) {
	servers, url := consoleMCPFixture(t)
	a := newApp(t, func(c *appConfig) { c.mcp = servers })
	admin := a.newUser("admin@example.com", true)
	admin.mustJSON("POST", "/api/admin/mcp", map[string]any{"name": "search", "url": url, "headers": map[string]string{"Authorization": mcpToken}}, http.StatusCreated, nil)
	for _, c := range []struct {
		body   map[string]any
		ok     bool
		detail string
	}{
		{map[string]any{"name": "search"}, true, "1 tool: lookup"},
		{map[string]any{"name": "search", "url": url, "headers": map[string]any{"Authorization": nil}}, true, "1 tool: lookup"},
		{map[string]any{"name": "other", "url": url, "headers": map[string]any{"Authorization": "Bearer wrong"}}, false, "401"},
		{map[string]any{"name": "kid", "command": "/nonexistent/mcp-server", "timeout_seconds": 2}, false, "/nonexistent/mcp-server"},
	} {
		var got Connection
		admin.mustJSON("POST", "/api/admin/mcp/test", c.body, http.StatusOK, &got)
		if got.OK != c.ok || !strings.Contains(got.Detail, c.detail) || strings.Contains(got.Detail, "SECRET") {
			t.Errorf("test %v = %+v, want ok %v with %q", c.body, got, c.ok, c.detail)
		}
	}
	if r := admin.do("POST", "/api/admin/mcp/test", map[string]any{"name": "nobody"}); r.status != http.StatusUnprocessableEntity {
		t.Errorf("a test of no server: %d %s, want 422", r.status, r.body)
	}
	if st := servers.Status(); len(st) != 1 {
		t.Errorf("after the tests the servers are %+v, want search alone", st)
	}
}

// TestAdminMCPForms: the admin page adds, edits, tests and deletes an
// MCP server with its forms (CSRF required, users refused); an edit
// whose header line names the header alone keeps its value, which the
// page never shows; herd.yaml's server is marked read-only.
func TestAdminMCPForms(t *testing.T) {
	servers, mcpURL := consoleMCPFixture(t)
	a := newApp(t, func(c *appConfig) {
		c.mcp = servers
		c.lead = agent.LeadConfig{Tools: &[]string{"mcp:search/*"}}
	})
	a.console.o.MCP = []mcp.ServerConfig{{Name: "filed", Command: "/nonexistent/filed"}}
	servers.Set(a.console.o.MCP)
	admin := a.newUser("admin@example.com", true)
	plain := a.newUser("user@example.com", false)
	form := func(v url.Values) url.Values { v.Set("_csrf", admin.csrf); return v }
	add := url.Values{"name": {"search"}, "url": {mcpURL}, "headers": {"Authorization: " + mcpToken}, "use": {""}}

	tok := admin.csrf
	admin.csrf = ""
	if r := admin.do("POST", "/admin/mcp", add); r.status != http.StatusForbidden {
		t.Errorf("the form without _csrf: %d", r.status)
	}
	admin.csrf = tok
	if r := plain.do("POST", "/admin/mcp", url.Values{"_csrf": {plain.csrf}, "name": {"search"}, "url": {mcpURL}}); r.status != http.StatusForbidden {
		t.Errorf("the form as a user: %d", r.status)
	}
	if r := admin.do("POST", "/admin/mcp/test", form(url.Values{"name": {"search"}, "url": {mcpURL}, "headers": {"Authorization: " + mcpToken}, "use": {""}})); !strings.Contains(string(r.body), "1 tool: lookup") {
		t.Fatalf("Test connection of the add form: %d, want 1 tool: lookup in %s", r.status, r.body)
	}
	if r := admin.do("POST", "/admin/mcp", form(add)); r.status != http.StatusOK || !strings.Contains(string(r.body), "MCP server search added") {
		t.Fatalf("add: %d %s", r.status, r.body)
	}
	// The edit form as the page fills it: the header by its name alone.
	edit := url.Values{"name": {"search"}, "headers": {"Authorization"}, "disallowed_tools": {"nothing"}, "timeout_seconds": {"30"}, "use": {"all"}}
	if r := admin.do("POST", "/admin/mcp/test", form(edit)); !strings.Contains(string(r.body), "1 tool: lookup") {
		t.Fatalf("Test connection of the edit form: %d, want 1 tool: lookup", r.status)
	}
	if r := admin.do("POST", "/admin/mcp/search", form(edit)); r.status != http.StatusOK || !strings.Contains(string(r.body), "MCP server search saved") {
		t.Fatalf("edit: %d %s", r.status, r.body)
	}
	if got := answer(a, admin, "use search/lookup"); !strings.Contains(got, "found it") {
		t.Fatalf("after the edit the run answered %q: the header was not kept", got)
	}
	if r := admin.do("POST", "/admin/mcp/search", form(url.Values{"name": {"search"}, "timeout_seconds": {"soon"}, "use": {"all"}})); r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "timeout_seconds must be a whole number") {
		t.Errorf("a bad edit: %d", r.status)
	}

	r := admin.do("GET", "/admin", nil)
	page := string(r.body)
	if strings.Contains(page, "SECRET") || !strings.Contains(page, `id="mcp-search"`) || !strings.Contains(page, "set in herd.yaml — edit there") {
		t.Fatalf("the admin page: want search listed, filed read-only and no secret")
	}
	if r := admin.do("POST", "/admin/mcp/filed", form(edit)); r.status != http.StatusConflict {
		t.Errorf("an edit of herd.yaml's server: %d, want 409", r.status)
	}
	if r := admin.do("POST", "/admin/mcp/test", form(url.Values{"name": {"filed"}})); !strings.Contains(string(r.body), "/nonexistent/filed") {
		t.Errorf("Test connection of herd.yaml's server: %d, want its failure named", r.status)
	}
	if r := admin.do("POST", "/admin/mcp/search/delete", form(url.Values{})); r.status != http.StatusOK || !strings.Contains(string(r.body), "MCP server search deleted") {
		t.Fatalf("delete: %d", r.status)
	}
	if st := servers.Status(); len(st) != 1 || st[0].Name != "filed" {
		t.Errorf("after the delete the servers are %+v, want filed alone", st)
	}
}
