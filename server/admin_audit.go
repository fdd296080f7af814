package server

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"herd/models"
	"herd/views"
)

// The audit log's page sizes (docs/API.md "Audit log").
const (
	auditPage    = 50
	maxAuditPage = 200
)

// auditFilterKeys are the query parameters that select entries: the API,
// the export and the page read the same ones.
var auditFilterKeys = []string{"actor", "action", "target_kind", "target", "since", "until"}

// auditFilterOf reads the entries a request selects and its page's cursor
// (?before=, an entry id).
func auditFilterOf(c echo.Context) (models.AuditFilter, error) {
	f := models.AuditFilter{
		Actor: strings.TrimSpace(c.QueryParam("actor")), Action: strings.TrimSpace(c.QueryParam("action")),
		TargetKind: c.QueryParam("target_kind"), TargetID: c.QueryParam("target"),
	}
	if f.Action != "" && !auditActionPrefix(f.Action) {
		return f, errUnprocessable("action must be an action or the start of one: %s", strings.Join(models.AuditActions, ", "))
	}
	var err error
	if f.Since, err = auditTime(c, "since", false); err != nil {
		return f, err
	}
	if f.Until, err = auditTime(c, "until", true); err != nil {
		return f, err
	}
	if v := c.QueryParam("before"); v != "" {
		if f.Before, err = strconv.ParseInt(v, 10, 64); err != nil || f.Before < 1 {
			return f, &apiError{http.StatusUnprocessableEntity, "bad_cursor", "before must be the next value of a previous page"}
		}
	}
	return f, nil
}

// auditActionPrefix reports whether p starts some action of the
// vocabulary.
func auditActionPrefix(p string) bool {
	for _, a := range models.AuditActions {
		if strings.HasPrefix(a, p) {
			return true
		}
	}
	return false
}

// auditTime reads the time bound name: RFC 3339, or a UTC day
// (2006-01-02), which as an until includes the whole day.
func auditTime(c echo.Context, name string, until bool) (time.Time, error) {
	v := strings.TrimSpace(c.QueryParam(name))
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC(), nil
	}
	d, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return time.Time{}, errBadRequest("%s must be a date (2006-01-02) or a time (2006-01-02T15:04:05Z)", name)
	}
	if until {
		d = d.AddDate(0, 0, 1)
	}
	return d, nil
}

// auditJSON is an entry on the wire.
type auditJSON struct {
	ID       int64           `json:"id"`
	At       string          `json:"at"`
	Actor    auditActorJSON  `json:"actor"`
	Action   string          `json:"action"`
	Target   auditTargetJSON `json:"target"`
	Before   models.JSON     `json:"before"`
	After    models.JSON     `json:"after"`
	Instance string          `json:"instance,omitempty"`
}

type auditActorJSON struct {
	ID    string `json:"id"`
	Email string `json:"email"`
	IP    string `json:"ip"`
}

type auditTargetJSON struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
}

// auditTimeLayout is how entries give their time: UTC, to the millisecond.
const auditTimeLayout = "2006-01-02T15:04:05.000Z"

func newAuditJSON(e *models.AuditEntry) auditJSON {
	return auditJSON{
		ID: e.ID, At: e.At.UTC().Format(auditTimeLayout),
		Actor:  auditActorJSON{ID: e.ActorID, Email: e.ActorEmail, IP: e.ActorIP},
		Action: e.Action, Target: auditTargetJSON{Kind: e.TargetKind, ID: e.TargetID},
		Before: e.Before, After: e.After, Instance: e.Instance,
	}
}

// apiAdminAudit is GET /api/admin/audit: a page of entries, newest first,
// or with ?format=csv or jsonl every entry selected, as a download.
func (s *Server) apiAdminAudit(c echo.Context) error {
	f, err := auditFilterOf(c)
	if err != nil {
		return err
	}
	switch format := c.QueryParam("format"); format {
	case "", "json":
	case "csv", "jsonl":
		return s.exportAudit(c, f, format)
	default:
		return errBadRequest("format must be json, csv or jsonl")
	}
	limit, err := queryInt(c, "limit", auditPage, 1, maxAuditPage)
	if err != nil {
		return err
	}
	es, more, err := s.store.Audit(c.Request().Context(), f, int(limit))
	if err != nil {
		return err
	}
	out := make([]auditJSON, len(es))
	for i := range es {
		out[i] = newAuditJSON(&es[i])
	}
	var next *string
	if more {
		n := strconv.FormatInt(es[len(es)-1].ID, 10)
		next = &n
	}
	return c.JSON(http.StatusOK, map[string]any{"entries": out, "has_more": more, "next": next})
}

// auditCSVHeader names the export's CSV columns.
var auditCSVHeader = []string{"id", "at", "actor_id", "actor_email", "actor_ip", "action", "target_kind", "target_id", "before", "after", "instance"}

// exportAudit streams every entry f selects as CSV or JSON lines, newest
// first, one batch of the store's at a time: the export is never held
// whole in memory, and as long as it moves the write deadline moves with
// it (transfer). A failure once the answer has started can only cut it
// short; it is logged.
func (s *Server) exportAudit(c echo.Context, f models.AuditFilter, format string) error {
	f.Before = 0
	name := "herd-audit-" + s.now().UTC().Format("20060102-150405") + "." + format
	h := c.Response().Header()
	h.Set(echo.HeaderContentDisposition, `attachment; filename="`+name+`"`)
	w := s.transfer(c).writer(c.Response())
	var out auditExport = auditLines{json.NewEncoder(w)}
	if format == "csv" {
		h.Set(echo.HeaderContentType, "text/csv; charset=utf-8")
		out = newAuditCSV(w)
	} else {
		h.Set(echo.HeaderContentType, "application/x-ndjson")
	}
	c.Response().WriteHeader(http.StatusOK)
	err := s.store.EachAudit(c.Request().Context(), f, out.write)
	if err == nil {
		err = out.end()
	}
	if err != nil {
		s.log.Error("audit export cut short", "err", err)
	}
	return nil
}

// auditExport is an export's format: each entry written, then the end.
type auditExport interface {
	write(*models.AuditEntry) error
	end() error
}

// auditLines writes an entry a line, as the API shows it.
type auditLines struct{ enc *json.Encoder }

func (l auditLines) write(e *models.AuditEntry) error { return l.enc.Encode(newAuditJSON(e)) }
func (auditLines) end() error                         { return nil }

// auditCSV writes an entry a row under auditCSVHeader.
type auditCSV struct{ w *csv.Writer }

func newAuditCSV(w io.Writer) auditCSV {
	c := auditCSV{csv.NewWriter(w)}
	_ = c.w.Write(auditCSVHeader) // an error stays in the writer: end reports it
	return c
}

func (c auditCSV) write(e *models.AuditEntry) error {
	row := []string{strconv.FormatInt(e.ID, 10), e.At.UTC().Format(auditTimeLayout), e.ActorID, e.ActorEmail, e.ActorIP,
		e.Action, e.TargetKind, e.TargetID, string(e.Before), string(e.After), e.Instance}
	for i := range row {
		row[i] = csvCell(row[i])
	}
	return c.w.Write(row)
}

func (c auditCSV) end() error {
	c.w.Flush()
	return c.w.Error()
}

// csvCell keeps a spreadsheet from reading a cell as a formula: one that
// starts like one gets a leading apostrophe (an email or a model name is
// chosen by people).
func csvCell(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return "'" + v
	}
	return v
}

// auditQuery is the query of the filters f was read from, for links that
// keep them (the page's paging and export links).
func auditQuery(c echo.Context, extra ...string) string {
	q := url.Values{}
	for _, k := range auditFilterKeys {
		if v := c.QueryParam(k); v != "" {
			q.Set(k, v)
		}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return q.Encode()
}

// adminAuditPage is /admin/audit: a page of entries with the filters of
// the query; a bad filter shows the page empty with its message.
func (s *Server) adminAuditPage(c echo.Context) error {
	p := views.AuditPage{
		Page:  s.page(c, "Audit log"),
		Actor: c.QueryParam("actor"), Action: c.QueryParam("action"), Since: c.QueryParam("since"), Until: c.QueryParam("until"),
		Actions: auditChoices(),
		CSV:     "/api/admin/audit?" + auditQuery(c, "format", "csv"),
		JSONL:   "/api/admin/audit?" + auditQuery(c, "format", "jsonl"),
	}
	f, err := auditFilterOf(c)
	if err != nil {
		ae := knownError(err, c)
		p.Error = ae.Message
		return s.render(c, ae.Status, views.AdminAudit(p))
	}
	es, more, err := s.store.Audit(c.Request().Context(), f, auditPage)
	if err != nil {
		return err
	}
	for i := range es {
		p.Entries = append(p.Entries, auditView(&es[i]))
	}
	if f.Before > 0 {
		p.Newer = "/admin/audit?" + auditQuery(c)
	}
	if more {
		p.Older = "/admin/audit?" + auditQuery(c, "before", strconv.FormatInt(es[len(es)-1].ID, 10))
	}
	return s.render(c, http.StatusOK, views.AdminAudit(p))
}

// auditChoices are the action filter's choices: each kind of target as a
// prefix ("user."), then each action.
func auditChoices() []string {
	var kinds []string
	for _, a := range models.AuditActions {
		k, _, _ := strings.Cut(a, ".")
		if !slices.Contains(kinds, k+".") {
			kinds = append(kinds, k+".")
		}
	}
	return append(kinds, models.AuditActions...)
}

func auditView(e *models.AuditEntry) views.AuditEntryView {
	return views.AuditEntryView{
		ID: e.ID, At: e.At, ActorEmail: e.ActorEmail, ActorIP: e.ActorIP,
		Action: e.Action, TargetKind: e.TargetKind, TargetID: e.TargetID, TargetLabel: auditLabel(e),
		Changes: auditChanges(e.Before, e.After), Created: len(e.Before) == 0, Deleted: len(e.After) == 0,
	}
}

// auditLabel is the name people know an entry's target by: its email or
// name, after the action or else before it; for a setting, its key.
func auditLabel(e *models.AuditEntry) string {
	for _, side := range []models.JSON{e.After, e.Before} {
		var named struct{ Email, Name string }
		if json.Unmarshal(side, &named) == nil && cmp.Or(named.Email, named.Name) != "" {
			return cmp.Or(named.Email, named.Name)
		}
	}
	if e.TargetKind == "settings" {
		return e.TargetID
	}
	return ""
}

// auditChanges lists the fields of before and after, flattened to dotted
// paths, in order, each side as text.
func auditChanges(before, after models.JSON) []views.AuditChange {
	b, a := map[string]string{}, map[string]string{}
	flattenJSON("", json.RawMessage(before), b)
	flattenJSON("", json.RawMessage(after), a)
	fields := slices.Sorted(maps.Keys(b))
	for k := range a {
		if _, ok := b[k]; !ok {
			fields = append(fields, k)
		}
	}
	slices.Sort(fields)
	out := make([]views.AuditChange, len(fields))
	for i, k := range fields {
		bv, inB := b[k]
		av, inA := a[k]
		out[i] = views.AuditChange{Field: k, Before: bv, After: av, Changed: inB != inA || bv != av}
	}
	return out
}

// flattenJSON puts the leaves of the document raw into out under dotted
// paths below prefix; a list or a non-object document is one leaf.
func flattenJSON(prefix string, raw json.RawMessage, out map[string]string) {
	if len(raw) == 0 {
		return
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil && obj != nil {
		for k, v := range obj {
			flattenJSON(strings.TrimPrefix(prefix+"."+k, "."), v, out)
		}
		return
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		out[cmp.Or(prefix, "value")] = str
		return
	}
	out[cmp.Or(prefix, "value")] = string(raw)
}
