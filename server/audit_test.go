package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd/models"
)

// auditEntries reads the audit log through the API, newest first.
func auditEntries(t *testing.T, u *user, query string) []auditJSON {
	t.Helper()
	var out struct {
		Entries []auditJSON `json:"entries"`
	}
	u.mustJSON("GET", "/api/admin/audit?"+query, nil, http.StatusOK, &out)
	return out.Entries
}

// field reads key of an entry side's JSON ("" when absent or null).
func field(t *testing.T, side models.JSON, key string) string {
	t.Helper()
	if len(side) == 0 {
		return ""
	}
	var m map[string]any
	if err := json.Unmarshal(side, &m); err != nil {
		t.Fatalf("side %s: %v", side, err)
	}
	if v, ok := m[key]; ok && v != nil {
		return fmt.Sprint(v)
	}
	return ""
}

// TestAuditAdminActions makes each admin action there is, through the
// JSON API and through the admin page's forms, and finds it on record
// with who did it, from where, and the target before and after.
func TestAuditAdminActions(t *testing.T) {
	a := newApp(t)
	admin := a.newUser("admin@example.com", true)
	form := func(v url.Values) url.Values { v.Set("_csrf", admin.csrf); return v }
	victim := func(email string) string { return a.newUser(email, false).id }

	type side struct{ key, want string }
	for _, tc := range []struct {
		name   string
		act    func() string // does the action; returns the target id
		action string
		before []side // nil: no before
		after  []side // nil: no after
	}{
		{"api user create", func() string {
			var u userJSON
			admin.mustJSON("POST", "/api/admin/users", map[string]string{"email": "new1@example.com", "password": strongPassword}, http.StatusCreated, &u)
			return u.ID
		}, models.AuditUserCreate, nil, []side{{"email", "new1@example.com"}, {"role", "user"}}},
		{"form user create", func() string {
			if r := admin.do("POST", "/admin/users", form(url.Values{"email": {"new2@example.com"}, "password": {strongPassword}, "role": {"admin"}})); r.status != http.StatusOK {
				t.Fatalf("create: %d %s", r.status, r.body)
			}
			u, err := a.store.UserByEmail(context.Background(), "new2@example.com")
			if err != nil {
				t.Fatal(err)
			}
			return u.ID
		}, models.AuditUserCreate, nil, []side{{"email", "new2@example.com"}, {"role", "admin"}}},
		{"api role", func() string {
			id := victim("r1@example.com")
			admin.mustJSON("PATCH", "/api/admin/users/"+id, map[string]string{"role": "admin"}, http.StatusOK, nil)
			return id
		}, models.AuditUserRole, []side{{"role", "user"}}, []side{{"role", "admin"}}},
		{"form role", func() string {
			id := victim("r2@example.com")
			if r := admin.do("POST", "/admin/users/"+id, form(url.Values{"role": {"admin"}})); r.status != http.StatusOK {
				t.Fatalf("role: %d %s", r.status, r.body)
			}
			return id
		}, models.AuditUserRole, []side{{"role", "user"}}, []side{{"role", "admin"}}},
		{"api disable", func() string {
			id := victim("d1@example.com")
			admin.mustJSON("PATCH", "/api/admin/users/"+id, map[string]bool{"disabled": true}, http.StatusOK, nil)
			return id
		}, models.AuditUserUpdate, []side{{"disabled", "false"}}, []side{{"disabled", "true"}, {"role", "user"}}},
		{"form disable", func() string {
			id := victim("d2@example.com")
			if r := admin.do("POST", "/admin/users/"+id, form(url.Values{"disabled": {"true"}})); r.status != http.StatusOK {
				t.Fatalf("disable: %d %s", r.status, r.body)
			}
			return id
		}, models.AuditUserUpdate, []side{{"disabled", "false"}}, []side{{"disabled", "true"}}},
		{"api delete", func() string {
			id := victim("x1@example.com")
			admin.mustJSON("DELETE", "/api/admin/users/"+id, nil, http.StatusNoContent, nil)
			return id
		}, models.AuditUserDelete, []side{{"email", "x1@example.com"}}, nil},
		{"form delete", func() string {
			id := victim("x2@example.com")
			if r := admin.do("POST", "/admin/users/"+id+"/delete", form(url.Values{})); r.status != http.StatusOK {
				t.Fatalf("delete: %d %s", r.status, r.body)
			}
			return id
		}, models.AuditUserDelete, []side{{"email", "x2@example.com"}}, nil},
		{"api token switch", func() string {
			admin.mustJSON("PUT", "/api/admin/settings", map[string]bool{"token_usage_enabled": false}, http.StatusOK, nil)
			return settingTokenUsage
		}, models.AuditSettingsTokenUsage, []side{{"token_usage_enabled", "true"}}, []side{{"token_usage_enabled", "false"}}},
		{"form token switch", func() string {
			if r := admin.do("POST", "/admin/settings", form(url.Values{"token_usage_enabled": {"true"}})); r.status != http.StatusOK {
				t.Fatalf("switch: %d %s", r.status, r.body)
			}
			return settingTokenUsage
		}, models.AuditSettingsTokenUsage, []side{{"token_usage_enabled", "false"}}, []side{{"token_usage_enabled", "true"}}},
		{"api default budget", func() string {
			admin.mustJSON("PUT", "/api/admin/budgets", map[string]any{"default": map[string]any{"tokens": 5000, "period": "week"}}, http.StatusOK, nil)
			return "default"
		}, models.AuditBudgetUpdate, []side{{"tokens", "0"}}, []side{{"tokens", "5000"}, {"period", "week"}}},
		{"form user budget", func() string {
			id := victim("spender@example.com")
			if r := admin.do("POST", "/admin/budgets", form(url.Values{"default_tokens": {"5000"}, "default_period": {"week"},
				"tokens_" + id: {"700"}, "period_" + id: {"day"}})); r.status != http.StatusOK {
				t.Fatalf("budgets form: %d %s", r.status, r.body)
			}
			return id
		}, models.AuditBudgetUpdate, nil, []side{{"tokens", "700"}, {"period", "day"}}},
		{"api model create", func() string {
			admin.mustJSON("POST", "/api/admin/models", map[string]any{"name": "audited", "provider": "openai", "model": "gpt-x",
				"base_url": "https://llm.example.com/v1", "api_key": "sk-audit-secret-1"}, http.StatusCreated, nil)
			return "audited"
		}, models.AuditModelCreate, nil, []side{{"name", "audited"}, {"model", "gpt-x"}, {"api_key", models.MaskedChanged}, {"base_url", "https://llm.example.com/" + models.MaskedChanged}}},
		{"api model new key", func() string {
			admin.mustJSON("PATCH", "/api/admin/models/audited", map[string]any{"name": "audited", "api_key": "sk-audit-secret-2"}, http.StatusOK, nil)
			return "audited"
		}, models.AuditModelUpdate, []side{{"api_key", models.Masked}}, []side{{"model", "gpt-x"}, {"api_key", models.MaskedChanged}}},
		{"form model delete", func() string {
			if r := admin.do("POST", "/admin/models/audited/delete", form(url.Values{})); r.status != http.StatusOK {
				t.Fatalf("delete: %d %s", r.status, r.body)
			}
			return "audited"
		}, models.AuditModelDelete, []side{{"name", "audited"}, {"api_key", models.Masked}}, nil},
		{"api agent create", func() string {
			admin.mustJSON("POST", "/api/admin/agents", map[string]any{"name": "writer", "description": "Writes release notes", "max_turns": 4}, http.StatusCreated, nil)
			return "writer"
		}, models.AuditAgentCreate, nil, []side{{"name", "writer"}, {"description", "Writes release notes"}}},
		{"api agent update", func() string {
			admin.mustJSON("PATCH", "/api/admin/agents/writer", map[string]any{"description": "Writes changelogs"}, http.StatusOK, nil)
			return "writer"
		}, models.AuditAgentUpdate, []side{{"description", "Writes release notes"}}, []side{{"description", "Writes changelogs"}}},
		{"api mcp create", func() string {
			admin.mustJSON("POST", "/api/admin/mcp", map[string]any{"name": "audited-mcp", "url": "https://mcp.example.com/x?token=t1",
				"headers": map[string]string{"Authorization": "Bearer mcp-audit-secret-1"}}, http.StatusCreated, nil)
			return "audited-mcp"
		}, models.AuditMCPCreate, nil, []side{{"name", "audited-mcp"}, {"url", "https://mcp.example.com/" + models.MaskedChanged},
			{"headers", "map[Authorization:" + models.MaskedChanged + "]"}}},
		{"api mcp new header", func() string {
			admin.mustJSON("PATCH", "/api/admin/mcp/audited-mcp", map[string]any{"headers": map[string]string{"Authorization": "Bearer mcp-audit-secret-2"}}, http.StatusOK, nil)
			return "audited-mcp"
		}, models.AuditMCPUpdate, []side{{"headers", "map[Authorization:" + models.Masked + "]"}}, []side{{"headers", "map[Authorization:" + models.MaskedChanged + "]"}}},
		{"api mcp delete", func() string {
			admin.mustJSON("DELETE", "/api/admin/mcp/audited-mcp", nil, http.StatusNoContent, nil)
			return "audited-mcp"
		}, models.AuditMCPDelete, []side{{"name", "audited-mcp"}, {"headers", "map[Authorization:" + models.Masked + "]"}}, nil},
		{"api limits", func() string {
			admin.mustJSON("PATCH", "/api/admin/limits", map[string]any{"runs_per_minute": 7}, http.StatusOK, nil)
			return "limits"
		}, models.AuditLimitsUpdate, []side{{"runs_per_minute", "10000"}}, []side{{"runs_per_minute", "7"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.act()
			es := auditEntries(t, admin, "limit=1")
			if len(es) != 1 {
				t.Fatalf("got %d entries, want the action's", len(es))
			}
			e := es[0]
			if e.Action != tc.action || e.Target.ID != target || e.Actor.ID != admin.id || e.Actor.Email != admin.email || e.Actor.IP != "127.0.0.1" {
				t.Fatalf("entry %+v; want %s on %s by %s from 127.0.0.1", e, tc.action, target, admin.email)
			}
			check := func(name string, got models.JSON, want []side) {
				t.Helper()
				if want == nil && len(got) != 0 {
					t.Fatalf("%s: %s, want none", name, got)
				}
				if want != nil && len(got) == 0 {
					t.Fatalf("%s: none, want %v", name, want)
				}
				for _, w := range want {
					if g := field(t, got, w.key); g != w.want {
						t.Fatalf("%s.%s = %q, want %q (%s)", name, w.key, g, w.want, got)
					}
				}
			}
			check("before", e.Before, tc.before)
			check("after", e.After, tc.after)
		})
	}

	// A refused change is no change: nothing recorded.
	n := len(auditEntries(t, admin, "limit=200"))
	if r := admin.do("POST", "/api/admin/users", map[string]string{"email": "new1@example.com", "password": strongPassword}); r.status != http.StatusConflict {
		t.Fatalf("create a user twice: %d, want 409", r.status)
	}
	if got := len(auditEntries(t, admin, "limit=200")); got != n {
		t.Fatalf("a refused change left an entry: %d entries, want %d", got, n)
	}
	// The actor's email stays with the entry once they are gone.
	other := a.newUser("other-admin@example.com", true)
	other.mustJSON("POST", "/api/admin/users", map[string]string{"email": "by-other@example.com", "password": strongPassword}, http.StatusCreated, nil)
	admin.mustJSON("DELETE", "/api/admin/users/"+other.id, nil, http.StatusNoContent, nil)
	if es := auditEntries(t, admin, "action=user.create&actor=other-admin@example.com"); len(es) != 1 || es[0].Actor.ID != other.id {
		t.Fatalf("entries of a deleted actor: %+v", es)
	}
}

// TestAuditAPI covers GET /api/admin/audit: who may read it, its filters
// and paging, bad input, the exports, and that secrets never leave.
func TestAuditAPI(t *testing.T) {
	a := newApp(t)
	admin := a.newUser("admin@example.com", true)
	plain := a.newUser("user@example.com", false)
	t0 := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	// One entry a month ago, for the time range (recorded first: the log
	// runs in the order entries were recorded).
	old := &models.AuditEntry{At: t0, ActorEmail: "old@example.com", Action: models.AuditUserDelete, TargetID: "gone"}
	if err := a.store.AddAudit(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		a.srv.Audit(context.Background(), Actor{ID: admin.id, Email: admin.email, IP: "192.0.2.7"}, models.AuditUserRole, fmt.Sprintf("u%d", i),
			map[string]any{"role": "user"}, map[string]any{"role": "admin", "api_key": "sk-secret-123", "headers": map[string]string{"Authorization": "Bearer hush"}})
	}
	a.srv.Audit(context.Background(), Actor{ID: plain.id, Email: "=cmd@example.com"}, models.AuditSettingsTokenUsage, settingTokenUsage, map[string]bool{"token_usage_enabled": true}, map[string]bool{"token_usage_enabled": false})

	for _, tc := range []struct {
		name   string
		u      *user
		query  string
		status int
		code   string
	}{
		{"anonymous", a.anonymous(), "", http.StatusUnauthorized, "unauthorized"},
		{"not an admin", plain, "", http.StatusForbidden, "forbidden"},
		{"unknown action", admin, "action=user.explode", http.StatusUnprocessableEntity, "unprocessable"},
		{"bad since", admin, "since=yesterday", http.StatusBadRequest, "bad_request"},
		{"bad cursor", admin, "before=abc", http.StatusUnprocessableEntity, "bad_cursor"},
		{"bad limit", admin, "limit=0", http.StatusBadRequest, "bad_request"},
		{"bad format", admin, "format=xml", http.StatusBadRequest, "bad_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.u.do("GET", "/api/admin/audit?"+tc.query, nil)
			if r.status != tc.status || r.errorCode() != tc.code {
				t.Fatalf("got %d %q, want %d %q: %s", r.status, r.errorCode(), tc.status, tc.code, r.body)
			}
		})
	}

	for _, tc := range []struct {
		name, query string
		want        int
	}{
		{"all", "", 7},
		{"actor", "actor=" + url.QueryEscape(admin.email), 5},
		{"action prefix", "action=user", 6},
		{"action", "action=settings.token_usage", 1},
		{"target", "target_kind=user&target=u3", 1},
		{"since a day", "since=" + t0.AddDate(0, 0, 1).Format(time.DateOnly), 6},
		{"until a day, inclusive", "until=" + t0.Format(time.DateOnly), 1},
	} {
		t.Run("filter "+tc.name, func(t *testing.T) {
			if got := len(auditEntries(t, admin, tc.query)); got != tc.want {
				t.Fatalf("%d entries, want %d", got, tc.want)
			}
		})
	}

	t.Run("paging", func(t *testing.T) {
		var seen []int64
		q := "limit=3"
		for range 5 {
			var p struct {
				Entries []auditJSON `json:"entries"`
				HasMore bool        `json:"has_more"`
				Next    *string     `json:"next"`
			}
			admin.mustJSON("GET", "/api/admin/audit?"+q, nil, http.StatusOK, &p)
			for _, e := range p.Entries {
				seen = append(seen, e.ID)
			}
			if !p.HasMore {
				if p.Next != nil {
					t.Fatalf("last page has next %q", *p.Next)
				}
				break
			}
			q = "limit=3&before=" + *p.Next
		}
		if len(seen) != 7 {
			t.Fatalf("paged %d entries, want 7: %v", len(seen), seen)
		}
		for i := 1; i < len(seen); i++ {
			if seen[i] >= seen[i-1] {
				t.Fatalf("not newest first: %v", seen)
			}
		}
	})

	t.Run("masked", func(t *testing.T) {
		e := auditEntries(t, admin, "target=u0")[0]
		if got := field(t, e.After, "api_key"); got != models.MaskedChanged {
			t.Fatalf("api_key shows %q, want %q", got, models.MaskedChanged)
		}
	})

	t.Run("csv", func(t *testing.T) {
		r := admin.do("GET", "/api/admin/audit?format=csv&action=user", nil)
		if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") || !strings.HasPrefix(r.header.Get("Content-Disposition"), "attachment") {
			t.Fatalf("csv: %d %v", r.status, r.header)
		}
		rows, err := csv.NewReader(bytes.NewReader(r.body)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 7 || strings.Join(rows[0], ",") != strings.Join(auditCSVHeader, ",") || rows[6][7] != "gone" {
			t.Fatalf("csv rows: %q", rows)
		}
		all := admin.do("GET", "/api/admin/audit?format=csv", nil)
		if !strings.Contains(string(all.body), "'=cmd@example.com") {
			t.Fatalf("a formula-like cell is not defused: %s", all.body)
		}
	})

	t.Run("jsonl", func(t *testing.T) {
		r := admin.do("GET", "/api/admin/audit?format=jsonl&actor="+url.QueryEscape(admin.email), nil)
		if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("jsonl: %d %v", r.status, r.header)
		}
		sc := bufio.NewScanner(bytes.NewReader(r.body))
		n := 0
		for sc.Scan() {
			var e auditJSON
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Actor.Email != admin.email {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			n++
		}
		if n != 5 {
			t.Fatalf("%d lines, want 5", n)
		}
	})

	t.Run("no secret anywhere", func(t *testing.T) {
		for _, q := range []string{"", "format=csv", "format=jsonl"} {
			body := string(admin.do("GET", "/api/admin/audit?"+q, nil).body)
			page := string(admin.do("GET", "/admin/audit", nil).body)
			for _, secret := range []string{"sk-secret-123", "hush"} {
				if strings.Contains(body, secret) || strings.Contains(page, secret) {
					t.Fatalf("%q shown (%s)", secret, q)
				}
			}
		}
	})
}

// TestAuditPageRoute: the page is the admins', keeps its filters in its
// links, and shows a bad filter's message.
func TestAuditPageRoute(t *testing.T) {
	a := newApp(t)
	admin := a.newUser("admin@example.com", true)
	plain := a.newUser("user@example.com", false)
	for i := range auditPage + 1 {
		a.srv.Audit(context.Background(), Actor{ID: admin.id, Email: admin.email}, models.AuditUserRole, fmt.Sprintf("u%d", i), nil, map[string]string{"role": "<b>admin</b>"})
	}
	if r := plain.do("GET", "/admin/audit", nil); r.status != http.StatusForbidden {
		t.Fatalf("a user: %d, want 403", r.status)
	}
	r := admin.do("GET", "/admin/audit?action=user.&actor="+url.QueryEscape(admin.email), nil)
	body := string(r.body)
	for _, want := range []string{
		`href="/api/admin/audit?action=user.&amp;actor=admin%40example.com&amp;format=csv"`,
		`id="audit-older"`, "&lt;b&gt;admin&lt;/b&gt;",
	} {
		if r.status != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("page (%d) lacks %s", r.status, want)
		}
	}
	if strings.Contains(body, "<b>admin</b>") {
		t.Fatal("a recorded value is rendered as HTML")
	}
	if r := admin.do("GET", "/admin/audit?since=soon", nil); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "since must be a date") {
		t.Fatalf("bad filter: %d", r.status)
	}
}

// TestAuditRetention: entries older than the retention are purged when
// herd starts (and hourly), the purge itself is on record, and younger
// entries stay.
func TestAuditRetention(t *testing.T) {
	dir := t.TempDir()
	s, err := models.Open(filepath.Join(dir, "herd.db"), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, age := range []time.Duration{40 * 24 * time.Hour, 31 * 24 * time.Hour, 29 * 24 * time.Hour} {
		if err := s.AddAudit(context.Background(), &models.AuditEntry{At: now.Add(-age), Action: models.AuditUserCreate, TargetID: age.String()}); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	purged := make(chan int64, 1)
	a := newApp(t, inDir(dir), func(c *appConfig) {
		c.server = func(o *Options) {
			o.AuditRetention = 30 * 24 * time.Hour
			o.OnAuditPurged = func(n int64) { purged <- n }
		}
	})
	if n := <-purged; n != 2 {
		t.Fatalf("purged %d, want 2", n)
	}
	admin := a.newUser("admin@example.com", true)
	es := auditEntries(t, admin, "")
	if len(es) != 2 || es[0].Action != models.AuditAuditPurge || field(t, es[0].After, "removed") != "2" || es[1].Target.ID != (29*24*time.Hour).String() {
		t.Fatalf("after the purge: %+v", es)
	}
}

// TestAuditFailureCounted: an entry that cannot be written is logged at
// ERROR and counted, in the server and on /metrics.
func TestAuditFailureCounted(t *testing.T) {
	var logs bytes.Buffer
	a := newApp(t, func(c *appConfig) {
		c.server = func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) }
	})
	a.srv.Audit(context.Background(), Actor{ID: "u1"}, "user.explode", "x", nil, nil)
	if n := a.srv.AuditFailures(); n != 1 {
		t.Fatalf("%d failures counted, want 1", n)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "user.explode") {
		t.Fatalf("not logged at ERROR: %s", logs.String())
	}
	rec := httptest.NewRecorder()
	a.metrics.Handler("").ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/metrics", nil))
	if !strings.Contains(rec.Body.String(), "herd_audit_failures_total 1") {
		t.Fatal("herd_audit_failures_total is not 1")
	}
}

// TestAuditFirstAdmin: the first admin is on record, made by themselves
// through the set-up link, or by herd from HERD_ADMIN_EMAIL.
func TestAuditFirstAdmin(t *testing.T) {
	t.Run("set-up link", func(t *testing.T) {
		a := newApp(t)
		link := a.setupLink()
		anon := a.anonymous()
		anon.do("GET", link, nil)
		form := url.Values{"_csrf": {preCSRFOf(t, anon)}, "token": {tokenOf(link)}, "email": {"first@example.com"}, "password": {strongPassword}, "password_confirm": {strongPassword}}
		if r := anon.do("POST", "/setup", form); r.status != http.StatusSeeOther {
			t.Fatalf("set-up: %d %s", r.status, r.body)
		}
		es, _, err := a.store.Audit(context.Background(), models.AuditFilter{}, 10)
		if err != nil || len(es) != 1 || es[0].Action != models.AuditUserCreate || es[0].ActorEmail != "first@example.com" || es[0].ActorID != es[0].TargetID || es[0].ActorIP != "127.0.0.1" {
			t.Fatalf("entries %+v, %v; want the admin's creation by themselves", es, err)
		}
	})
	t.Run("environment", func(t *testing.T) {
		a := newApp(t)
		if err := a.srv.EnsureAdmin(context.Background(), "env@example.com", strongPassword); err != nil {
			t.Fatal(err)
		}
		es, _, err := a.store.Audit(context.Background(), models.AuditFilter{}, 10)
		if err != nil || len(es) != 1 || es[0].Action != models.AuditUserCreate || es[0].ActorID != "" || field(t, es[0].After, "email") != "env@example.com" {
			t.Fatalf("entries %+v, %v; want the admin's creation by herd", es, err)
		}
	})
}
