package server

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"herd/agent/mcp"
	"herd/views"
)

// mcpStatus is every configured MCP server's state, in config order.
func (s *Server) mcpStatus() []mcp.ServerStatus {
	if s.mcp == nil {
		return []mcp.ServerStatus{}
	}
	return s.mcp.Status()
}

// apiAdminMCP lists the MCP servers with their state, transport and
// tools, latest failures and a stdio server's stderr, and each one's
// settings (docs/API.md). No URL past its host, header or env value, or
// argument is shown: they may hold tokens.
func (s *Server) apiAdminMCP(c echo.Context) error {
	type serverJSON struct {
		mcp.ServerStatus
		Config *mcpConfigView `json:"config,omitempty"`
	}
	configs := map[string]mcp.ServerConfig{}
	for _, sc := range s.console.o.MCP {
		configs[sc.Name] = sc.WithDefaults()
	}
	st := s.mcpStatus()
	out := make([]serverJSON, len(st))
	for i, m := range st {
		out[i].ServerStatus = m
		if sc, ok := configs[m.Name]; ok {
			out[i].Config = mcpConfigOf(sc)
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"servers": out})
}

// mcpConfigView is an MCP server's settings as the console shows them:
// what they are without what may hold a secret (header and env names
// only, the URL to its host, the number of arguments).
type mcpConfigView struct {
	Command         string    `json:"command,omitempty"`
	Args            int       `json:"args,omitempty"`
	Env             []string  `json:"env,omitempty"`
	URL             string    `json:"url,omitempty"`
	Headers         []string  `json:"headers,omitempty"`
	Tools           *[]string `json:"tools,omitempty"`
	DisallowedTools []string  `json:"disallowed_tools,omitempty"`
	TimeoutSeconds  int       `json:"timeout_seconds"`
	Use             string    `json:"use"`
	Source          string    `json:"source"`
	ReadOnly        bool      `json:"read_only"`
	Note            string    `json:"note"`
}

func mcpConfigOf(sc mcp.ServerConfig) *mcpConfigView {
	v := &mcpConfigView{Command: sc.Command, Args: len(sc.Args), Env: sortedKeys(sc.Env), Headers: sortedKeys(sc.Headers),
		Tools: sc.Tools, DisallowedTools: sc.DisallowedTools, TimeoutSeconds: sc.TimeoutSeconds, Use: sc.Use,
		Source: "file", ReadOnly: true, Note: fileNote}
	if u, err := url.Parse(sc.URL); err == nil && sc.URL != "" {
		v.URL = u.Scheme + "://" + u.Host
	}
	return v
}

func (s *Server) mcpViews() []views.MCPServerView {
	st := s.mcpStatus()
	out := make([]views.MCPServerView, len(st))
	for i, m := range st {
		out[i] = views.MCPServerView{
			Name: m.Name, Transport: m.Transport, Use: m.Use, State: m.State, LastError: m.LastError,
			Since: m.Since, Restarts: m.Restarts, Tools: m.Tools, Skipped: m.Skipped,
			Stderr: m.Stderr, LogLinesDropped: m.LogLinesDropped,
		}
		for _, f := range m.Failures {
			out[i].Failures = append(out[i].Failures, views.MCPFailureView{Ref: f.Ref, At: f.At, Error: f.Error})
		}
	}
	return out
}
