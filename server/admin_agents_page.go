package server

import (
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"herd/agent"
	"herd/models"
	"herd/views"
)

// The admin page's subagent-type forms (views.consoleAgents).

func (s *Server) agentTypeViews(c echo.Context) ([]views.AgentTypeView, error) {
	entries, err := s.console.AgentTypes(c.Request().Context())
	if err != nil {
		return nil, err
	}
	out := make([]views.AgentTypeView, len(entries))
	for i, e := range entries {
		a := e.Config
		v := views.AgentTypeView{Name: e.Name, Description: a.Description, SystemPrompt: a.SystemPrompt, Model: a.Model, FromFile: e.FromFile}
		if a.Tools != nil {
			v.Tools = strings.Join(*a.Tools, ", ")
		}
		if a.MaxTurns != nil {
			v.MaxTurns = strconv.Itoa(*a.MaxTurns)
		}
		if a.TimeoutSeconds != nil {
			v.TimeoutSeconds = strconv.Itoa(*a.TimeoutSeconds)
		}
		out[i] = v
	}
	return out, nil
}

// agentForm reads a subagent-type form into a, keeping what the form
// has no field for (disallowed tools, a token budget).
func agentForm(c echo.Context, a *agent.AgentConfig) error {
	a.Description = strings.TrimSpace(c.FormValue("description"))
	a.SystemPrompt = strings.TrimSpace(c.FormValue("system_prompt"))
	a.Model = c.FormValue("model")
	a.Tools = nil
	if t := strings.TrimSpace(c.FormValue("tools")); t != "" {
		var list []string
		for _, name := range strings.Split(t, ",") {
			if name = strings.TrimSpace(name); name != "" {
				list = append(list, name)
			}
		}
		a.Tools = &list
	}
	for _, f := range []struct {
		name string
		dst  **int
	}{{"max_turns", &a.MaxTurns}, {"timeout_seconds", &a.TimeoutSeconds}} {
		*f.dst = nil
		v := strings.TrimSpace(c.FormValue(f.name))
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return &EntryError{Field: f.name, Reason: f.name + " must be a whole number, got " + strconv.Quote(v)}
		}
		*f.dst = &n
	}
	return nil
}

func (s *Server) adminAgentCreateSubmit(c echo.Context) error {
	name := strings.TrimSpace(c.FormValue("name"))
	var a agent.AgentConfig
	err := agentForm(c, &a)
	if err == nil {
		err = s.console.CreateAgent(c.Request().Context(), name, a, s.rt)
	}
	if err == nil {
		s.consoleChanged()
		s.audit(c, models.AuditAgentCreate, name, nil, auditedAgent(name, a))
	}
	return formResult(c, err, "Subagent type "+name+" added.", s.renderAdmin)
}

func (s *Server) adminAgentUpdateSubmit(c echo.Context) error {
	name := c.Param("name")
	a, was, err := s.console.UpdateAgent(c.Request().Context(), name, func(a *agent.AgentConfig) error { return agentForm(c, a) }, s.rt)
	if err == nil {
		s.consoleChanged()
		s.audit(c, models.AuditAgentUpdate, name, auditedAgent(name, was), auditedAgent(name, a))
	}
	return formResult(c, err, "Subagent type "+name+" saved.", s.renderAdmin)
}

func (s *Server) adminAgentDeleteSubmit(c echo.Context) error {
	name := c.Param("name")
	was, err := s.console.DeleteAgent(c.Request().Context(), name, s.rt)
	if err == nil {
		s.consoleChanged()
		s.audit(c, models.AuditAgentDelete, name, auditedAgent(name, was), nil)
	}
	return formResult(c, err, "Subagent type "+name+" deleted.", s.renderAdmin)
}
