package server

import (
	"net/http"

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
// tools, latest failures and a stdio server's stderr (docs/API.md). No
// URL, header or env value is shown: they may hold tokens.
func (s *Server) apiAdminMCP(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"servers": s.mcpStatus()})
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
