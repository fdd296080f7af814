package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"herd/agent/mcp"
	"herd/models"
	"herd/views"
)

// mcpStatus is every configured MCP server's state, in config order.
func (s *Server) mcpStatus() []mcp.ServerStatus {
	if s.mcp == nil {
		return []mcp.ServerStatus{}
	}
	return s.mcp.Status()
}

// MCPServers are the MCP servers as the server uses them;
// *mcp.Servers implements it.
type MCPServers interface {
	Status() []mcp.ServerStatus
	Set([]mcp.ServerConfig)
	Test(context.Context, mcp.ServerConfig) ([]string, error)
}

// applyMCP puts the servers cfgs in force (Console.ReloadMCP).
func (s *Server) applyMCP(cfgs []mcp.ServerConfig) {
	if s.mcp != nil {
		s.mcp.Set(cfgs)
	}
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
	entries, err := s.console.MCPServers(c.Request().Context())
	if entries == nil && err != nil {
		return err
	}
	configs := map[string]*mcpConfigView{}
	for _, e := range entries {
		configs[e.Config.Name] = mcpConfigOf(e)
	}
	st := s.mcpStatus()
	out := make([]serverJSON, len(st))
	for i, m := range st {
		out[i].ServerStatus = m
		out[i].Config = configs[m.Name]
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
	Source          string    `json:"source"` // "file" or "console"
	ReadOnly        bool      `json:"read_only"`
	Note            string    `json:"note,omitempty"`
}

func mcpConfigOf(e MCPEntry) *mcpConfigView {
	sc := e.Config
	v := &mcpConfigView{Command: sc.Command, Args: len(sc.Args), Env: sortedKeys(sc.Env), Headers: sortedKeys(sc.Headers),
		Tools: sc.Tools, DisallowedTools: sc.DisallowedTools, TimeoutSeconds: sc.TimeoutSeconds, Use: sc.Use, Source: "console"}
	if e.FromFile {
		v.Source, v.ReadOnly, v.Note = "file", true, fileNote
	}
	if u, err := url.Parse(sc.URL); err == nil && sc.URL != "" {
		v.URL = u.Scheme + "://" + u.Host
	}
	return v
}

// mcpEntryView is a stored MCP server as a change answers it.
type mcpEntryView struct {
	Name string `json:"name"`
	*mcpConfigView
}

// mcpRequest is an MCP server as the console sends it: storedMCP's
// fields, and the env and header values, where a null value keeps the
// one stored under its name and a name left out is removed; env or
// headers left out keep them all.
type mcpRequest struct {
	storedMCP
	Env     map[string]*string `json:"env"`
	Headers map[string]*string `json:"headers"`
}

// config is the server r describes, its values merged into known's.
func (r mcpRequest) config(known mcp.ServerConfig) (mcp.ServerConfig, error) {
	sc := r.storedMCP.config(mcpSecrets{Env: known.Env, Headers: known.Headers})
	var err error
	if r.Env != nil {
		if sc.Env, err = mergeValues("env", r.Env, known.Env); err != nil {
			return sc, err
		}
	}
	if r.Headers != nil {
		sc.Headers, err = mergeValues("headers", r.Headers, known.Headers)
	}
	return sc, err
}

// mergeValues is sent with each null value taken from known.
func mergeValues(field string, sent map[string]*string, known map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(sent))
	for k, v := range sent {
		if v != nil {
			out[k] = *v
			continue
		}
		old, ok := known[k]
		if !ok {
			return nil, &EntryError{Field: field + "." + k, Reason: field + "." + k + " has no stored value to keep: send one"}
		}
		out[k] = old
	}
	return out, nil
}

func (s *Server) apiAdminMCPCreate(c echo.Context) error {
	var req mcpRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	sc, err := req.config(mcp.ServerConfig{})
	if err != nil {
		return err
	}
	if sc, err = s.console.CreateMCP(c.Request().Context(), sc, s.applyMCP); err != nil {
		return err
	}
	s.consoleChanged()
	s.audit(c, models.AuditMCPCreate, sc.Name, nil, auditedMCP(sc))
	return c.JSON(http.StatusCreated, mcpEntryView{Name: sc.Name, mcpConfigView: mcpConfigOf(MCPEntry{Config: sc})})
}

func (s *Server) apiAdminMCPUpdate(c echo.Context) error {
	var raw json.RawMessage
	if err := bindJSON(c, &raw); err != nil {
		return err
	}
	name := c.Param("name")
	edit := func(sc *mcp.ServerConfig) error {
		req := mcpRequest{storedMCP: mcpSpecOf(*sc)}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return jsonError(err)
		}
		if req.Name != name {
			return errUnprocessable("name cannot change; add a server of the new name and delete this one")
		}
		next, err := req.config(*sc)
		*sc = next
		return err
	}
	sc, was, err := s.console.UpdateMCP(c.Request().Context(), name, edit, s.applyMCP)
	if err != nil {
		return err
	}
	s.consoleChanged()
	s.audit(c, models.AuditMCPUpdate, name, auditedMCP(was), auditedMCP(sc))
	return c.JSON(http.StatusOK, mcpEntryView{Name: sc.Name, mcpConfigView: mcpConfigOf(MCPEntry{Config: sc})})
}

func (s *Server) apiAdminMCPDelete(c echo.Context) error {
	was, err := s.console.DeleteMCP(c.Request().Context(), c.Param("name"), s.applyMCP)
	if err != nil {
		return err
	}
	s.consoleChanged()
	s.audit(c, models.AuditMCPDelete, c.Param("name"), auditedMCP(was), nil)
	return c.NoContent(http.StatusNoContent)
}

// apiAdminMCPTest is Test connection of an MCP server: of one by its
// name, or of the settings sent (null values the stored server's).
func (s *Server) apiAdminMCPTest(c echo.Context) error {
	var req mcpRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var build func(mcp.ServerConfig, bool) (mcp.ServerConfig, error)
	if req.Command != "" || req.URL != "" {
		build = func(known mcp.ServerConfig, _ bool) (mcp.ServerConfig, error) { return req.config(known) }
	}
	sc, err := s.console.MCPTestTarget(ctx, req.Name, build)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.testMCP(ctx, sc))
}

// testMCP connects to sc apart from the servers in use, lists its tools
// and stops it, within connectionTimeout. A stdio server's command runs
// on the host, as herd.yaml's do: the console is for admins only.
func (s *Server) testMCP(ctx context.Context, sc mcp.ServerConfig) Connection {
	if s.mcp == nil {
		return Connection{Detail: "this herd runs no MCP servers"}
	}
	ctx, cancel := context.WithTimeout(ctx, connectionTimeout)
	defer cancel()
	names, err := s.mcp.Test(ctx, sc)
	if err != nil {
		return Connection{Detail: err.Error()}
	}
	return Connection{OK: true, Detail: toolList(sc.Name, names)}
}

// maxListed bounds the tools a test's answer names.
const maxListed = 20

// toolList is "N tools: a, b, …", the tools by their own names.
func toolList(server string, selectors []string) string {
	if len(selectors) == 0 {
		return "connected; it offers no tools (or tools and disallowed_tools leave none)"
	}
	names := make([]string, 0, min(len(selectors), maxListed))
	for _, sel := range selectors[:min(len(selectors), maxListed)] {
		names = append(names, strings.TrimPrefix(sel, mcp.SelectorPrefix+server+"/"))
	}
	list := strings.Join(names, ", ")
	if len(selectors) > maxListed {
		list += ", …"
	}
	word := "tools"
	if len(selectors) == 1 {
		word = "tool"
	}
	return fmt.Sprintf("%d %s: %s", len(selectors), word, list)
}

func (s *Server) mcpViews(c echo.Context) []views.MCPServerView {
	configs := s.mcpConfigViews(c)
	st := s.mcpStatus()
	out := make([]views.MCPServerView, len(st))
	for i, m := range st {
		out[i] = views.MCPServerView{
			Name: m.Name, Transport: m.Transport, Use: m.Use, State: m.State, LastError: m.LastError,
			Since: m.Since, Restarts: m.Restarts, Tools: m.Tools, Skipped: m.Skipped,
			Stderr: m.Stderr, LogLinesDropped: m.LogLinesDropped, Config: configs[m.Name],
		}
		for _, f := range m.Failures {
			out[i].Failures = append(out[i].Failures, views.MCPFailureView{Ref: f.Ref, At: f.At, Error: f.Error})
		}
	}
	return out
}
