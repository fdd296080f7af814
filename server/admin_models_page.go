package server

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"herd/agent"
	"herd/internal/secrets"
	"herd/models"
	"herd/views"
)

// The admin page's model forms (views.consoleModels): the same console
// as the API, answered with the page and a flash or an error.

func (s *Server) consoleModelViews(c echo.Context) ([]views.ConsoleModelView, error) {
	entries, err := s.console.Models(c.Request().Context())
	if entries == nil {
		return nil, err
	}
	out := make([]views.ConsoleModelView, len(entries))
	for i, e := range entries {
		m := e.Config
		out[i] = views.ConsoleModelView{
			Name: m.Name, DisplayName: m.DisplayName, Provider: m.Provider, Model: m.Model, BaseURL: m.BaseURL,
			Stream: string(m.Stream), APIKey: secrets.Mask(m.APIKey), ContextWindow: m.ContextWindow,
			MaxConcurrentRequests: m.MaxConcurrentRequests, Vision: m.Vision, FromFile: e.FromFile, Default: i == 0,
		}
		out[i].PriceInput, out[i].PriceOutput, out[i].Currency = priceFields(m.Price)
	}
	return out, nil
}

// modelForm reads a model form into m's fields (the name apart) and
// returns the API key typed, nil when the field was left empty.
func modelForm(c echo.Context, m *agent.ModelConfig) (*string, error) {
	m.DisplayName = strings.TrimSpace(c.FormValue("display_name"))
	m.Provider = c.FormValue("provider")
	m.Model = strings.TrimSpace(c.FormValue("model"))
	m.BaseURL = strings.TrimSpace(c.FormValue("base_url"))
	m.Stream = agent.StreamMode(c.FormValue("stream"))
	m.Vision = c.FormValue("vision") == "true"
	for _, f := range []struct {
		name string
		dst  *int
	}{{"context_window", &m.ContextWindow}, {"max_concurrent_requests", &m.MaxConcurrentRequests}} {
		v := strings.TrimSpace(c.FormValue(f.name))
		if v == "" {
			*f.dst = 0
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, &EntryError{Field: f.name, Reason: f.name + " must be a whole number, got " + strconv.Quote(v)}
		}
		*f.dst = n
	}
	price, err := priceForm(c)
	if err != nil {
		return nil, err
	}
	m.Price = price
	if k := c.FormValue("api_key"); k != "" {
		return &k, nil
	}
	return nil, nil
}

// priceForm reads a model form's price: none when both figures are
// empty; config.CheckModel checks the figures and the currency.
func priceForm(c echo.Context) (*agent.ModelPrice, error) {
	in, out := strings.TrimSpace(c.FormValue("price_input")), strings.TrimSpace(c.FormValue("price_output"))
	if in == "" && out == "" {
		return nil, nil
	}
	p := &agent.ModelPrice{Currency: strings.ToUpper(strings.TrimSpace(c.FormValue("currency")))}
	for _, f := range []struct {
		name, raw string
		dst       *float64
	}{{"price.input_per_mtok", in, &p.InputPerMTok}, {"price.output_per_mtok", out, &p.OutputPerMTok}} {
		if f.raw == "" {
			continue
		}
		v, err := strconv.ParseFloat(f.raw, 64)
		if err != nil {
			return nil, &EntryError{Field: f.name, Reason: "a price must be a number such as 0.40, got " + strconv.Quote(f.raw)}
		}
		*f.dst = v
	}
	return p, nil
}

// priceFields is p as a model form shows it.
func priceFields(p *agent.ModelPrice) (in, out, currency string) {
	if p == nil {
		return "", "", ""
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	return f(p.InputPerMTok), f(p.OutputPerMTok), p.Currency
}

func (s *Server) adminModelCreateSubmit(c echo.Context) error {
	m := agent.ModelConfig{Name: strings.TrimSpace(c.FormValue("name"))}
	key, err := modelForm(c, &m)
	if err == nil {
		m, err = s.console.CreateModel(c.Request().Context(), ModelChange{Config: m, APIKey: key}, s.rt)
	}
	if err == nil {
		s.consoleChanged()
		s.audit(c, models.AuditModelCreate, m.Name, nil, auditedModel(m))
		return formResult(c, nil, "Model "+m.Name+" added: new runs may use it now.", s.renderAdmin)
	}
	// Refused: the form comes back as it was sent, but for its key.
	kept := views.ConsoleModelView{Name: m.Name, DisplayName: m.DisplayName, Provider: m.Provider, Model: m.Model, BaseURL: m.BaseURL,
		Stream: string(m.Stream), ContextWindow: m.ContextWindow, MaxConcurrentRequests: m.MaxConcurrentRequests, Vision: m.Vision}
	kept.PriceInput, kept.PriceOutput, kept.Currency = c.FormValue("price_input"), c.FormValue("price_output"), c.FormValue("currency")
	return formResult(c, err, "", func(c echo.Context, status int, flash, errMsg string) error {
		return s.renderAdminWith(c, status, flash, errMsg, kept)
	})
}

func (s *Server) adminModelUpdateSubmit(c echo.Context) error {
	name := c.Param("name")
	edit := func(m *agent.ModelConfig) error {
		key, err := modelForm(c, m)
		if key != nil {
			m.APIKey = *key
		}
		return err
	}
	m, was, err := s.console.UpdateModel(c.Request().Context(), name, edit, s.rt)
	if err == nil {
		s.consoleChanged()
		s.audit(c, models.AuditModelUpdate, name, auditedModel(was), auditedModel(m))
	}
	return formResult(c, err, "Model "+name+" saved: new runs use it now.", s.renderAdmin)
}

func (s *Server) adminModelDeleteSubmit(c echo.Context) error {
	name := c.Param("name")
	was, err := s.console.DeleteModel(c.Request().Context(), name, s.rt)
	if err == nil {
		s.consoleChanged()
		s.audit(c, models.AuditModelDelete, name, auditedModel(was), nil)
	}
	return formResult(c, err, "Model "+name+" deleted.", s.renderAdmin)
}

// adminModelTestSubmit is a form's Test connection: the page again,
// with what the provider said.
func (s *Server) adminModelTestSubmit(c echo.Context) error {
	m := agent.ModelConfig{Name: strings.TrimSpace(c.FormValue("name"))}
	key, err := modelForm(c, &m)
	if err == nil {
		m, err = s.console.TestTarget(c.Request().Context(), m, key)
	}
	var got Connection
	if err == nil {
		got = s.console.TestModel(c.Request().Context(), m)
	}
	return s.testAnswer(c, "Test connection", got, err)
}

// testAnswer is a Test connection's answer to the page's form: the page
// again with the answer on top, or, asked by static/console.js (Accept:
// application/json), the answer alone, so the form keeps what was typed,
// its key included.
func (s *Server) testAnswer(c echo.Context, what string, got Connection, err error) error {
	if c.Request().Header.Get("Accept") == "application/json" {
		if err != nil {
			ae := knownError(err, c)
			if ae == nil {
				return err
			}
			return c.JSON(ae.Status, Connection{OK: false, Detail: ae.Message})
		}
		return c.JSON(http.StatusOK, got)
	}
	if err != nil {
		return formResult(c, err, "", s.renderAdmin)
	}
	if !got.OK {
		return s.renderAdmin(c, http.StatusOK, "", what+" failed: "+got.Detail)
	}
	return s.renderAdmin(c, http.StatusOK, what+": "+got.Detail+".", "")
}

// limitLabels name the console's limits on the page, in its order.
var limitLabels = []struct{ name, label string }{
	{"runs_per_minute", "Runs a minute per user"},
	{"max_active_runs_per_user", "Runs at once per user"},
	{"lead_max_turns", "Lead turns per run"},
	{"subagents_max_running", "Subagents at once"},
	{"subagents_max_running_per_user", "Subagents at once per user"},
}

func (s *Server) limitViews(c echo.Context) ([]views.LimitView, error) {
	st, err := s.console.Limits(c.Request().Context())
	if err != nil {
		return nil, err
	}
	now, file := st.Limits.limitFields(), st.File.limitFields()
	out := make([]views.LimitView, len(limitLabels))
	for i, l := range limitLabels {
		_, set := st.Stored[l.name]
		out[i] = views.LimitView{Name: l.name, Label: l.label, Value: *now[l.name], File: *file[l.name], Set: set}
	}
	return out, nil
}

// adminLimitsSubmit sets the limits of the form: an empty field sets
// one back to herd.yaml's.
func (s *Server) adminLimitsSubmit(c echo.Context) error {
	change := map[string]*int{}
	var err error
	for _, l := range limitLabels {
		v := strings.TrimSpace(c.FormValue(l.name))
		if v == "" {
			change[l.name] = nil
			continue
		}
		n, perr := strconv.Atoi(v)
		if perr != nil {
			err = &EntryError{Field: l.name, Reason: l.label + " must be a whole number, got " + strconv.Quote(v)}
			break
		}
		change[l.name] = &n
	}
	if err == nil {
		var st, was LimitsState
		if st, was, err = s.console.SetLimits(c.Request().Context(), change, s.applyLimits); err == nil {
			s.consoleChanged()
			s.audit(c, models.AuditLimitsUpdate, "limits", was.Limits, st.Limits)
		}
	}
	return formResult(c, err, "Limits saved: they apply now.", s.renderAdmin)
}
