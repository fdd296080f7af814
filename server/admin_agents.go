package server

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"herd/agent"
	"herd/models"
)

// agentView is a subagent type as the console shows it.
type agentView struct {
	agentSpec
	Source   string `json:"source"` // "file" or "console"
	ReadOnly bool   `json:"read_only"`
	Note     string `json:"note,omitempty"`
}

func agentViewOf(e AgentEntry) agentView {
	v := agentView{agentSpec: agentSpecOf(e.Name, e.Config), Source: "console"}
	if e.FromFile {
		v.Source, v.ReadOnly, v.Note = "file", true, fileNote
	}
	return v
}

func (s *Server) apiAdminAgents(c echo.Context) error {
	entries, err := s.console.AgentTypes(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]agentView, len(entries))
	for i, e := range entries {
		out[i] = agentViewOf(e)
	}
	return c.JSON(http.StatusOK, map[string]any{"agents": out})
}

func (s *Server) apiAdminAgentCreate(c echo.Context) error {
	var req agentSpec
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	if err := s.console.CreateAgent(c.Request().Context(), req.Name, req.config(), s.rt); err != nil {
		return err
	}
	s.consoleChanged()
	s.audit(c, models.AuditAgentCreate, req.Name, nil, auditedAgent(req.Name, req.config()))
	return c.JSON(http.StatusCreated, agentViewOf(AgentEntry{Name: req.Name, Config: req.config()}))
}

func (s *Server) apiAdminAgentUpdate(c echo.Context) error {
	var raw json.RawMessage
	if err := bindJSON(c, &raw); err != nil {
		return err
	}
	name := c.Param("name")
	edit := func(a *agent.AgentConfig) error {
		req := agentSpecOf(name, *a)
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return jsonError(err)
		}
		if req.Name != name {
			return errUnprocessable("name cannot change; add a type of the new name and delete this one")
		}
		*a = req.config()
		return nil
	}
	a, was, err := s.console.UpdateAgent(c.Request().Context(), name, edit, s.rt)
	if err != nil {
		return err
	}
	s.consoleChanged()
	s.audit(c, models.AuditAgentUpdate, name, auditedAgent(name, was), auditedAgent(name, a))
	return c.JSON(http.StatusOK, agentViewOf(AgentEntry{Name: name, Config: a}))
}

func (s *Server) apiAdminAgentDelete(c echo.Context) error {
	was, err := s.console.DeleteAgent(c.Request().Context(), c.Param("name"), s.rt)
	if err != nil {
		return err
	}
	s.consoleChanged()
	s.audit(c, models.AuditAgentDelete, c.Param("name"), auditedAgent(c.Param("name"), was), nil)
	return c.NoContent(http.StatusNoContent)
}
