package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"herd/agent"
	"herd/agent/event"
	"herd/internal/secrets"
	"herd/models"
)

// fileNote is what an entry of the config file says in the console.
const fileNote = "set in herd.yaml — edit there"

// modelRequest is a model as the console sends it: storedModel's fields
// and the API key, nil when it does not change.
type modelRequest struct {
	storedModel
	APIKey *string `json:"api_key"`
}

// modelView is a model as the console shows it: its key masked, where
// it is set, and whether it is the default.
type modelView struct {
	storedModel
	APIKey   string `json:"api_key"`
	Source   string `json:"source"` // "file" or "console"
	ReadOnly bool   `json:"read_only"`
	Note     string `json:"note,omitempty"`
	Default  bool   `json:"default"`
}

func viewOf(e ModelEntry, def bool) modelView {
	v := modelView{storedModel: specOf(e.Config), APIKey: secrets.Mask(e.Config.APIKey), Source: "console", Default: def}
	if e.FromFile {
		v.Source, v.ReadOnly, v.Note = "file", true, fileNote
	}
	return v
}

func (s *Server) apiAdminModels(c echo.Context) error {
	entries, err := s.console.Models(c.Request().Context())
	if entries == nil {
		return err
	}
	out := make([]modelView, len(entries))
	for i, e := range entries {
		out[i] = viewOf(e, i == 0)
	}
	return c.JSON(http.StatusOK, map[string]any{"models": out})
}

func (s *Server) apiAdminModelCreate(c echo.Context) error {
	var req modelRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	m, err := s.console.CreateModel(c.Request().Context(), ModelChange{Config: req.config(""), APIKey: req.APIKey}, s.rt)
	if err != nil {
		return err
	}
	s.consoleChanged()
	s.audit(c, models.AuditModelCreate, m.Name, nil, auditedModel(m))
	return c.JSON(http.StatusCreated, viewOf(ModelEntry{Config: m}, false))
}

func (s *Server) apiAdminModelUpdate(c echo.Context) error {
	var raw json.RawMessage
	if err := bindJSON(c, &raw); err != nil {
		return err
	}
	name := c.Param("name")
	edit := func(m *agent.ModelConfig) error {
		req := modelRequest{storedModel: specOf(*m)}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return jsonError(err)
		}
		if req.Name != name {
			return errUnprocessable("name cannot change; add a model of the new name and delete this one")
		}
		key := m.APIKey
		if req.APIKey != nil {
			key = *req.APIKey
		}
		*m = req.config(key)
		return nil
	}
	m, was, err := s.console.UpdateModel(c.Request().Context(), name, edit, s.rt)
	if err != nil {
		return err
	}
	s.consoleChanged()
	s.audit(c, models.AuditModelUpdate, name, auditedModel(was), auditedModel(m))
	return c.JSON(http.StatusOK, viewOf(ModelEntry{Config: m}, false))
}

func (s *Server) apiAdminModelDelete(c echo.Context) error {
	was, err := s.console.DeleteModel(c.Request().Context(), c.Param("name"), s.rt)
	if err != nil {
		return err
	}
	s.consoleChanged()
	s.audit(c, models.AuditModelDelete, c.Param("name"), auditedModel(was), nil)
	return c.NoContent(http.StatusNoContent)
}

// apiAdminModelTest is Test connection: of a model by its name, or of
// the settings sent (a stored model's key when none is sent).
func (s *Server) apiAdminModelTest(c echo.Context) error {
	var req modelRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	m, err := s.console.TestTarget(ctx, req.config(""), req.APIKey)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.console.TestModel(ctx, m))
}

// consoleChanged tells the other instances that the console's entries
// changed, as a settings change: each reads them again (cluster,
// docs/DESIGN.md §14). Open pages get the token gate as it is.
func (s *Server) consoleChanged() {
	s.pages.Publish("", "", event.Settings{TokenUsage: s.settings.TokenUsage()})
}

// ReloadConsole applies what the console stored, models, limits and MCP
// servers:
// another instance changed it (cluster.Console).
func (s *Server) ReloadConsole(ctx context.Context) error {
	return errors.Join(s.console.Reload(ctx, s.rt), s.console.ReloadLimits(ctx, s.applyLimits), s.console.ReloadMCP(ctx, s.applyMCP))
}

// consoleError is the console's refusal as an admin reads it, nil for
// any other error.
func consoleError(err error) *apiError {
	var entry *EntryError
	switch {
	case errors.Is(err, ErrFileEntry):
		return errConflict(fileNote)
	case errors.Is(err, ErrEntryExists):
		return errConflict("this name is taken (by herd.yaml or the console); choose another or edit that one")
	case errors.As(err, &entry) && entry.InUse:
		return errConflict(entry.Reason)
	case errors.As(err, &entry):
		return &apiError{http.StatusUnprocessableEntity, "unprocessable", entry.Reason}
	}
	return nil
}

func (s *Server) apiAdminLimits(c echo.Context) error {
	st, err := s.console.Limits(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

// apiAdminLimitsUpdate sets the limits sent; null sets one back to
// herd.yaml's.
func (s *Server) apiAdminLimitsUpdate(c echo.Context) error {
	var raw map[string]json.RawMessage
	if err := bindJSON(c, &raw); err != nil {
		return err
	}
	change := make(map[string]*int, len(raw))
	for name, v := range raw {
		var n *int
		if err := json.Unmarshal(v, &n); err != nil {
			return &EntryError{Field: name, Reason: name + " must be a whole number, or null for herd.yaml's"}
		}
		change[name] = n
	}
	st, was, err := s.console.SetLimits(c.Request().Context(), change, s.applyLimits)
	if err != nil {
		return err
	}
	s.consoleChanged()
	s.audit(c, models.AuditLimitsUpdate, "limits", was.Limits, st.Limits)
	return c.JSON(http.StatusOK, st)
}

// applyLimits puts l in force: the runtime's, and the runs a minute.
func (s *Server) applyLimits(l ConsoleLimits) error {
	if err := s.rt.SetLimits(l.Limits); err != nil {
		return &EntryError{Reason: err.Error()}
	}
	if l.RunsPerMinute > 0 { // 0: the server's default, kept
		s.runLimiter.SetRate(l.RunsPerMinute)
	}
	return nil
}
