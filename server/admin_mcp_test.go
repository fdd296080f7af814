package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd/agent/mcp"
)

// mcpFixture is a live HTTP MCP server with one tool, a stdio server
// whose command does not exist (its error names it, markup included), and
// one that prints on stderr, with the value of its env, and exits.
func mcpFixture(t *testing.T) (*mcp.Servers, []mcp.ServerConfig) {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "fixture", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "lookup", Description: "Looks up.", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "found"}}}, nil
	})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	configs := []mcp.ServerConfig{
		{Name: "search", URL: hs.URL + "/mcp?token=url-SECRET-4", Headers: map[string]string{"Authorization": "Bearer tok-SECRET-1"}},
		{Name: "broken", Command: "/nonexistent/<script>alert(1)</script>", Env: map[string]string{"KEY": "env-SECRET-2"}, TimeoutSeconds: 2},
		{Name: "noisy", Command: "sh", Args: []string{"-c", `echo "noisy <b>stderr</b> $KEY" >&2; exit 1`}, Env: map[string]string{"KEY": "env-SECRET-3"}, TimeoutSeconds: 2},
	}
	servers := mcp.New(configs, mcp.Options{MinBackoff: time.Hour})
	servers.Start()
	t.Cleanup(func() {
		servers.Close()
		hs.CloseClientConnections()
		hs.Close()
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	servers.Tools(ctx, true) // connects search, waits for broken's first try
	return servers, configs
}

func TestAdminMCP(t *testing.T) {
	servers, configs := mcpFixture(t)
	a := newApp(t, func(c *appConfig) { c.server = func(o *Options) { o.MCP = servers } })
	a.console.o.MCP = configs
	admin := a.newUser("admin@example.com", true)
	plain := a.newUser("user@example.com", false)

	var got struct {
		Servers []struct {
			mcp.ServerStatus
			Config mcpConfigView `json:"config"`
		} `json:"servers"`
	}
	admin.mustJSON("GET", "/api/admin/mcp", nil, http.StatusOK, &got)
	if len(got.Servers) != 3 {
		t.Fatalf("servers = %+v, want search, broken and noisy", got.Servers)
	}
	if c := got.Servers[0].Config; c.URL != strings.TrimSuffix(configs[0].URL, "/mcp?token=url-SECRET-4") || len(c.Headers) != 1 || c.Headers[0] != "Authorization" ||
		!c.ReadOnly || c.Note != "set in herd.yaml — edit there" || got.Servers[2].Config.Args != 2 || got.Servers[2].Config.Env[0] != "KEY" {
		t.Errorf("the servers' settings = %+v, %+v: want the URL to its host, header and env names, read-only", c, got.Servers[2].Config)
	}
	search, broken, noisy := got.Servers[0].ServerStatus, got.Servers[1].ServerStatus, got.Servers[2].ServerStatus
	if search.Name != "search" || search.Transport != "http" || search.State != mcp.StateConnected || search.Use != "all" ||
		len(search.Tools) != 1 || search.Tools[0] != "mcp:search/lookup" {
		t.Errorf("search = %+v, want connected over http with mcp:search/lookup", search)
	}
	if broken.Transport != "stdio" || broken.Use != "admins" || broken.State != mcp.StateRestarting || !strings.Contains(broken.LastError, "/nonexistent/") {
		t.Errorf("broken = %+v, want restarting with its last error", broken)
	}

	// The admin reads a stdio server's stderr, its env values redacted,
	// and its failures under the references users were given.
	if noisy.Stderr != "noisy <b>stderr</b> [redacted]" || len(noisy.Failures) != 1 ||
		!strings.Contains(noisy.Failures[0].Error, "stderr: noisy <b>stderr</b> [redacted] (ref "+noisy.Failures[0].Ref+")") {
		t.Errorf("noisy = %+v, want its stderr and its failure with it", noisy)
	}

	page := admin.do("GET", "/admin", nil)
	body := string(page.body)
	for _, want := range []string{"MCP servers", "mcp:search/lookup", `data-state="connected"`, `data-state="restarting"`, "&lt;script&gt;alert(1)&lt;/script&gt;",
		`<pre>noisy &lt;b&gt;stderr&lt;/b&gt; [redacted]</pre>`, `data-ref="` + noisy.Failures[0].Ref + `"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the admin page lacks %q", want)
		}
	}
	raw, _ := json.Marshal(got)
	for name, out := range map[string]string{"page": body, "api": string(raw)} {
		for _, secret := range []string{"tok-SECRET-1", "env-SECRET-2", "env-SECRET-3", "url-SECRET-4", "noisy <b>stderr</b> $KEY", "<script>alert", "<b>stderr"} {
			if strings.Contains(out, secret) && !(name == "api" && (secret == "<script>alert" || secret == "<b>stderr")) {
				t.Errorf("the %s shows %q", name, secret)
			}
		}
	}

	if r := plain.do("GET", "/api/admin/mcp", nil); r.status != http.StatusForbidden {
		t.Errorf("a plain user's GET /api/admin/mcp = %d, want 403", r.status)
	}
}

func TestAdminMCPNoneConfigured(t *testing.T) {
	a := newApp(t)
	admin := a.newUser("admin@example.com", true)
	r := admin.do("GET", "/api/admin/mcp", nil)
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"servers":[]}` {
		t.Errorf("GET /api/admin/mcp = %d %s, want an empty list", r.status, r.body)
	}
	if body := string(admin.do("GET", "/admin", nil).body); !strings.Contains(body, "No MCP servers yet") {
		t.Error("the admin page does not say no MCP servers are configured")
	}
}

// The admin sees the MCP servers in a real browser: states, tools and a
// failed server's error shown as text, with no console error.
func TestBrowserAdminMCP(t *testing.T) {
	servers, _ := mcpFixture(t)
	a := newApp(t, func(c *appConfig) { c.server = func(o *Options) { o.MCP = servers } })
	root := a.newUser("root@example.com", true)
	b := newBrowser(t, a.http.URL)
	b.signIn(root.email, "password123")
	b.navigate("/admin")
	b.waitFor("the MCP servers", `document.querySelectorAll("#mcp-servers tr.mcp-server").length === 3`, 10*time.Second)
	if got := evalAs[string](b, `document.querySelector('#mcp-servers tr[data-state="connected"] code.mcp-tool').textContent`); got != "mcp:search/lookup" {
		t.Errorf("the connected server's tool = %q, want mcp:search/lookup", got)
	}
	if got := evalAs[string](b, `document.querySelector("#mcp-servers .mcp-error").textContent`); !strings.Contains(got, "<script>alert(1)</script>") {
		t.Errorf("the failed server's error = %q, want its text shown as text", got)
	}
	if n := evalAs[int](b, `document.querySelectorAll("#mcp-servers script").length`); n != 0 {
		t.Errorf("%d script elements in the MCP section: the error was not escaped", n)
	}
}
