package server

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"herd/agent/mcp"
	"herd/models"
	"herd/views"
)

// The admin page's MCP server forms (views.mcpServers): the same console
// as the API, answered with the page and a flash or an error.

// mcpConfigViews are the servers' settings for the page, by name.
func (s *Server) mcpConfigViews(c echo.Context) map[string]*views.MCPConfigView {
	entries, _ := s.console.MCPServers(c.Request().Context()) // one unreadable is shown without its settings
	out := make(map[string]*views.MCPConfigView, len(entries))
	for _, e := range entries {
		sc := e.Config
		v := &views.MCPConfigView{Command: sc.Command, Args: len(sc.Args), Env: sortedKeys(sc.Env), Headers: sortedKeys(sc.Headers),
			DisallowedTools: strings.Join(sc.DisallowedTools, ", "), TimeoutSeconds: sc.TimeoutSeconds, Use: sc.Use, FromFile: e.FromFile}
		if sc.Tools != nil {
			v.Tools, v.ToolsSet = strings.Join(*sc.Tools, ", "), true
		}
		if u, err := url.Parse(sc.URL); err == nil && sc.URL != "" {
			v.URLHost = u.Scheme + "://" + u.Host
		}
		out[sc.Name] = v
	}
	return out
}

// mcpForm reads an MCP server form over known, the server as stored (an
// empty one for a new server). In an edit, an empty URL or arguments
// field keeps them; an env or header line that names a variable or
// header alone keeps its value (views.mcpFields).
func mcpForm(c echo.Context, known mcp.ServerConfig, edit bool) (mcp.ServerConfig, error) {
	req := mcpRequest{storedMCP: mcpSpecOf(known)}
	req.Name = strings.TrimSpace(c.FormValue("name"))
	req.Command = strings.TrimSpace(c.FormValue("command"))
	if args := formLines(c.FormValue("args")); len(args) > 0 || !edit {
		req.Args = args
	}
	if u := strings.TrimSpace(c.FormValue("url")); u != "" || !edit {
		req.URL = u
	}
	req.Env = formPairs(c.FormValue("env"), "=")
	req.Headers = formPairs(c.FormValue("headers"), ":")
	req.Tools = nil
	if t := formList(c.FormValue("tools")); len(t) > 0 {
		req.Tools = &t
	}
	req.DisallowedTools = formList(c.FormValue("disallowed_tools"))
	req.Use = c.FormValue("use")
	req.TimeoutSeconds = 0
	if v := strings.TrimSpace(c.FormValue("timeout_seconds")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return known, &EntryError{Field: "timeout_seconds", Reason: "timeout_seconds must be a whole number, got " + strconv.Quote(v)}
		}
		req.TimeoutSeconds = n
	}
	return req.config(known)
}

// formLines are a text area's non-empty lines, trimmed.
func formLines(v string) []string {
	var out []string
	for l := range strings.SplitSeq(v, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// formPairs reads "name<sep>value" lines; a name alone is nil: keep the
// stored value.
func formPairs(v, sep string) map[string]*string {
	out := map[string]*string{}
	for _, l := range formLines(v) {
		k, val, found := strings.Cut(l, sep)
		k = strings.TrimSpace(k)
		if !found {
			out[k] = nil
			continue
		}
		if sep == ":" {
			val = strings.TrimSpace(val)
		}
		out[k] = &val
	}
	return out
}

// formList is a comma-separated list, trimmed, without empty entries.
func formList(v string) []string {
	var out []string
	for t := range strings.SplitSeq(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

func (s *Server) adminMCPCreateSubmit(c echo.Context) error {
	sc, err := mcpForm(c, mcp.ServerConfig{}, false)
	if err == nil {
		sc, err = s.console.CreateMCP(c.Request().Context(), sc, s.applyMCP)
	}
	if err == nil {
		s.consoleChanged()
		s.audit(c, models.AuditMCPCreate, sc.Name, nil, auditedMCP(sc))
	}
	return formResult(c, err, "MCP server "+sc.Name+" added: its tools reach runs now.", s.renderAdmin)
}

func (s *Server) adminMCPUpdateSubmit(c echo.Context) error {
	name := c.Param("name")
	edit := func(sc *mcp.ServerConfig) error {
		next, err := mcpForm(c, *sc, true)
		*sc = next
		return err
	}
	sc, was, err := s.console.UpdateMCP(c.Request().Context(), name, edit, s.applyMCP)
	if err == nil {
		s.consoleChanged()
		s.audit(c, models.AuditMCPUpdate, name, auditedMCP(was), auditedMCP(sc))
	}
	return formResult(c, err, "MCP server "+name+" saved: its session restarted with the new settings.", s.renderAdmin)
}

func (s *Server) adminMCPDeleteSubmit(c echo.Context) error {
	name := c.Param("name")
	was, err := s.console.DeleteMCP(c.Request().Context(), name, s.applyMCP)
	if err == nil {
		s.consoleChanged()
		s.audit(c, models.AuditMCPDelete, name, auditedMCP(was), nil)
	}
	return formResult(c, err, "MCP server "+name+" deleted.", s.renderAdmin)
}

// adminMCPTestSubmit is a form's Test connection: the page again, with
// what the server said. herd.yaml's servers' button sends the name
// alone: that server is tested; an add or edit form's settings are
// tested as Save would store them.
func (s *Server) adminMCPTestSubmit(c echo.Context) error {
	ctx := c.Request().Context()
	var build func(mcp.ServerConfig, bool) (mcp.ServerConfig, error)
	if _, err := c.FormParams(); err == nil && c.Request().Form.Has("use") {
		build = func(known mcp.ServerConfig, found bool) (mcp.ServerConfig, error) { return mcpForm(c, known, found) }
	}
	sc, err := s.console.MCPTestTarget(ctx, strings.TrimSpace(c.FormValue("name")), build)
	var got Connection
	if err == nil {
		got = s.testMCP(ctx, sc)
	}
	return s.testAnswer(c, "Test connection of "+sc.Name, got, err)
}
