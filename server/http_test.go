package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"herd/internal/pgtest"
	"herd/server/hub"
)

// TestMain checks that no test leaves a goroutine behind. regexp2 (chroma's
// lexers) keeps one shared clock for its match timeouts, which stops by
// itself a second after the last match: it belongs to the library.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop() // the cluster the PostgreSQL tests started, if any
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/dlclark/regexp2/v2.runClock")); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func TestRunAnswersAndPersists(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("hello")
	u.startRun(th, "What is herd?")
	a.waitIdle(th)

	var got struct {
		Messages []hub.MessageJSON `json:"messages"`
		Active   *runJSON          `json:"active_run"`
		LastSeq  int64             `json:"last_seq"`
	}
	u.mustJSON("GET", "/api/threads/"+th, nil, http.StatusOK, &got)
	if len(got.Messages) != 2 || got.Messages[0].Type != "human" || got.Messages[1].Type != "ai" {
		t.Fatalf("messages = %+v, want human then ai", got.Messages)
	}
	if !strings.Contains(got.Messages[1].Content, "demo") || got.Messages[1].ModelName != "demo-fast" {
		t.Errorf("answer = %q by %q, want a demo answer by demo-fast", got.Messages[1].Content, got.Messages[1].ModelName)
	}
	if got.Active != nil {
		t.Errorf("active_run = %+v after the run ended", got.Active)
	}
	// run.start, human, ai, run.end
	if got.LastSeq != 4 {
		t.Errorf("last_seq = %d, want 4", got.LastSeq)
	}
	rep, err := a.store.Usage(context.Background(), th, "")
	if err != nil || rep.Lead.Calls != 1 || rep.Total.TotalTokens <= 0 {
		t.Errorf("ledger = %+v, %v; want one lead call with tokens", rep, err)
	}
}

func TestSecondRunConflicts(t *testing.T) {
	a := newApp(t, withModels(demoModel("slow", 400, 5)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("")
	runID := u.startRun(th, "first")
	r := u.do("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "second"})
	if r.status != http.StatusConflict || r.errorCode() != "conflict" {
		t.Fatalf("second run: %d %s, want 409 conflict", r.status, r.body)
	}
	u.mustJSON("POST", "/api/threads/"+th+"/runs/"+runID+"/cancel", nil, http.StatusAccepted, nil)
	a.waitIdle(th)
	run, err := a.store.Run(context.Background(), th, runID)
	if err != nil || run.Status != "cancelled" {
		t.Fatalf("run after Stop = %+v, %v; want cancelled", run, err)
	}
	r = u.do("POST", "/api/threads/"+th+"/runs/"+runID+"/cancel", nil)
	if r.status != http.StatusConflict {
		t.Errorf("cancel an ended run: %d, want 409", r.status)
	}
}

// TestOwnershipMatrix checks every thread route for every kind of caller:
// a thread is visible to its owner only, admins included (docs/DESIGN.md §10).
func TestOwnershipMatrix(t *testing.T) {
	a := newApp(t)
	owner := a.newUser("owner@example.com", false)
	other := a.newUser("other@example.com", false)
	admin := a.newUser("admin@example.com", true)
	anon := a.anonymous()
	const missing = "00000000-0000-4000-8000-000000000000"

	type route struct {
		name   string
		method string
		path   string // %s is the thread id
		body   any
		hdr    []string
		owner  int
		// ownerMsg, when set, is the error message the owner gets, to tell
		// "the thread is yours but this thing is not there" from "no thread".
		ownerMsg string
		page     bool
	}
	form := url.Values{"title": {"renamed"}}
	routes := []route{
		{name: "page", method: "GET", path: "/threads/%s", owner: 200, page: true},
		{name: "rename form", method: "POST", path: "/threads/%s/rename", body: form, owner: 303, page: true},
		{name: "delete form", method: "POST", path: "/threads/%s/delete", body: url.Values{}, owner: 303, page: true},
		{name: "get", method: "GET", path: "/api/threads/%s", owner: 200},
		{name: "patch", method: "PATCH", path: "/api/threads/%s", body: map[string]string{"title": "x"}, owner: 200},
		{name: "delete", method: "DELETE", path: "/api/threads/%s", owner: 204},
		{name: "start run", method: "POST", path: "/api/threads/%s/runs", body: map[string]string{"content": "hi"}, owner: 202},
		{name: "cancel run", method: "POST", path: "/api/threads/%s/runs/" + missing + "/cancel", owner: 404, ownerMsg: "run not found"},
		{name: "cancel task", method: "POST", path: "/api/threads/%s/tasks/call_x/cancel", owner: 404, ownerMsg: "running task not found"},
		{name: "retry run", method: "POST", path: "/api/threads/%s/runs/" + missing + "/retry", owner: 404, ownerMsg: "run not found"},
		{name: "edit message", method: "POST", path: "/api/threads/%s/messages/" + missing + "/edit", body: map[string]string{"content": "hi"}, owner: 404, ownerMsg: "message not found"},
		{name: "events", method: "GET", path: "/api/threads/%s/events", owner: 200},
		{name: "usage", method: "GET", path: "/api/threads/%s/usage", owner: 200},
		{name: "stream", method: "GET", path: "/api/threads/%s/stream", hdr: []string{"Origin", a.http.URL}, owner: 400},
		{name: "upload files", method: "POST", path: "/api/threads/%s/files", body: uploadBody(t, upload{name: "x.txt", data: []byte("x")}), owner: 201},
		{name: "list files", method: "GET", path: "/api/threads/%s/files", owner: 200},
		{name: "download a file", method: "GET", path: "/api/threads/%s/files/uploads/x.txt", owner: 404, ownerMsg: "file not found"},
		{name: "zip files", method: "GET", path: "/api/threads/%s/files.zip", owner: 200},
		{name: "list a folder", method: "GET", path: "/api/threads/%s/files?depth=1", owner: 200},
		{name: "delete a file", method: "DELETE", path: "/api/threads/%s/files/uploads/x.txt", owner: 404, ownerMsg: "file not found"},
		{name: "preview a file", method: "GET", path: "/threads/%s/preview/uploads/x.txt", owner: 404, ownerMsg: "file not found", page: true},
	}
	callers := []struct {
		name string
		u    *user
		want func(route) int
	}{
		{"anonymous", anon, func(r route) int {
			if r.page {
				if r.method == "GET" {
					return 303
				}
				return 403 // no session, so no CSRF token either
			}
			return 401
		}},
		{"other user", other, func(route) int { return 404 }},
		{"admin", admin, func(route) int { return 404 }},
		{"owner", owner, func(r route) int { return r.owner }},
	}
	for _, rt := range routes {
		for _, who := range callers {
			t.Run(rt.name+"/"+who.name, func(t *testing.T) {
				th := owner.newThread("mine")
				path := strings.Replace(rt.path, "%s", th, 1)
				body := rt.body
				if v, ok := body.(url.Values); ok {
					v = url.Values{"title": v["title"], "_csrf": {who.u.csrf}}
					body = v
				}
				r := who.u.do(rt.method, path, body, rt.hdr...)
				if want := who.want(rt); r.status != want {
					t.Fatalf("%s %s as %s: status %d, want %d: %.200s", rt.method, path, who.name, r.status, want, r.body)
				}
				if who.u != owner && r.status == 404 && !rt.page && !strings.Contains(string(r.body), "thread not found") {
					t.Errorf("404 body = %s, want thread not found", r.body)
				}
				if who.u == owner && rt.ownerMsg != "" && !strings.Contains(string(r.body), rt.ownerMsg) {
					t.Errorf("owner body = %s, want %q", r.body, rt.ownerMsg)
				}
				if who.u != owner {
					if files := a.workspaceFiles(th); files != nil {
						t.Errorf("refused %s left %v in the workspace", rt.name, files)
					}
					if _, err := a.store.Thread(context.Background(), owner.id, th); err != nil {
						t.Errorf("thread gone after a refused %s: %v", rt.name, err)
					}
					if n, _ := a.store.LastSeq(context.Background(), th); n != 0 {
						t.Errorf("refused %s wrote %d records", rt.name, n)
					}
				}
				a.waitIdle(th)
			})
		}
	}
	// Malformed and unknown ids are plain 404s too.
	for _, p := range []string{"/api/threads/" + missing, "/api/threads/not-a-uuid", "/api/threads/" + strings.ToUpper(missing) + "x"} {
		if r := owner.do("GET", p, nil); r.status != 404 {
			t.Errorf("GET %s: %d, want 404", p, r.status)
		}
	}
}

func TestAdminRoutesForbidUsers(t *testing.T) {
	a := newApp(t)
	u := a.newUser("u@example.com", false)
	admin := a.newUser("admin@example.com", true)
	for _, rt := range []struct{ method, path string }{
		{"GET", "/admin"},
		{"GET", "/admin/usage"},
		{"GET", "/api/admin/usage"},
		{"GET", "/admin/audit"},
		{"GET", "/api/admin/audit"},
		{"GET", "/api/admin/audit?format=csv"},
		{"PUT", "/api/admin/settings"},
		{"GET", "/api/admin/budgets"},
		{"PUT", "/api/admin/budgets"},
		{"GET", "/api/admin/users"},
		{"POST", "/api/admin/users"},
		{"PATCH", "/api/admin/users/" + admin.id},
		{"DELETE", "/api/admin/users/" + admin.id},
	} {
		if r := u.do(rt.method, rt.path, map[string]any{"token_usage_enabled": false}); r.status != http.StatusForbidden {
			t.Errorf("%s %s as user: %d, want 403", rt.method, rt.path, r.status)
		}
	}
	if !a.settings.TokenUsage() {
		t.Error("a user's refused request changed the token setting")
	}
}

func TestCSRF(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	tok := u.csrf

	u.csrf = ""
	for _, c := range []struct {
		name string
		hdr  []string
	}{
		{"no token", nil},
		{"wrong token", []string{"X-CSRF-Token", "nope"}},
	} {
		r := u.do("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "hi"}, c.hdr...)
		if r.status != http.StatusForbidden || r.errorCode() != "csrf" {
			t.Errorf("%s: %d %s, want 403 csrf", c.name, r.status, r.body)
		}
	}
	r := u.do("POST", "/threads/"+th+"/rename", url.Values{"title": {"x"}})
	if r.status != http.StatusForbidden {
		t.Errorf("form without _csrf: %d, want 403", r.status)
	}
	r = u.do("POST", "/threads/"+th+"/rename", url.Values{"title": {"x"}, "_csrf": {tok}})
	if r.status != http.StatusSeeOther {
		t.Errorf("form with _csrf: %d, want 303", r.status)
	}
	if n, _ := a.store.LastSeq(context.Background(), th); n != 0 {
		t.Errorf("refused requests wrote %d records", n)
	}

	// A bearer token needs no CSRF token: browsers never send it on their own.
	u.csrf = tok
	var created struct{ Token string }
	u.mustJSON("POST", "/api/tokens", map[string]string{"name": "cli"}, http.StatusCreated, &created)
	bearer := a.anonymous()
	r = bearer.do("POST", "/api/threads", map[string]string{"title": "via api"}, "Authorization", "Bearer "+created.Token)
	if r.status != http.StatusCreated {
		t.Fatalf("bearer create: %d %s", r.status, r.body)
	}
	r = bearer.do("GET", "/api/threads", nil, "Authorization", "Bearer herd_wrong")
	if r.status != http.StatusUnauthorized {
		t.Errorf("wrong bearer: %d, want 401", r.status)
	}
	// A wrong token on a page is a 401, not a redirect to the sign-in page
	// that the client would follow with the same header again and again.
	r = bearer.do("GET", "/", nil, "Authorization", "Bearer herd_wrong")
	if r.status != http.StatusUnauthorized || r.header.Get("Location") != "" {
		t.Errorf("bearer on a page: %d (Location %q), want 401 without a redirect", r.status, r.header.Get("Location"))
	}
	// Stored hashed, shown once.
	toks, _ := a.store.APITokens(context.Background(), u.id)
	if len(toks) != 1 || toks[0].Hash == created.Token || strings.Contains(toks[0].Hash, created.Token[5:]) {
		t.Errorf("token stored in clear: %+v", toks)
	}
	list := u.do("GET", "/api/tokens", nil)
	if strings.Contains(string(list.body), created.Token) {
		t.Error("GET /api/tokens shows the token again")
	}
	// JSON login only: a cross-site form cannot post it.
	anon := a.anonymous()
	r = anon.do("POST", "/api/auth/login", url.Values{"email": {"ann@example.com"}, "password": {"password123"}})
	if r.status != http.StatusForbidden && r.status != http.StatusUnsupportedMediaType {
		t.Errorf("form-encoded API login: %d, want refused", r.status)
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	big := strings.Repeat("x", 100<<10+1)
	cases := []struct {
		name   string
		method string
		path   string
		body   any
		status int
		msg    string
	}{
		{"oversized message", "POST", "/api/threads/%s/runs", map[string]string{"content": big}, 413, "limit is 100 KB"},
		{"body over 1 MB", "POST", "/api/threads/%s/runs", `{"content":"` + strings.Repeat("y", 1<<20) + `"}`, 413, "1 MB"},
		{"malformed JSON", "POST", "/api/threads/%s/runs", `{"content": "hi"`, 400, "malformed JSON"},
		{"not an object", "POST", "/api/threads/%s/runs", `["hi"]`, 400, "JSON object"},
		{"unknown field", "POST", "/api/threads/%s/runs", `{"content":"hi","temperature":2}`, 400, "unknown field"},
		{"trailing data", "POST", "/api/threads/%s/runs", `{"content":"hi"} {"content":"again"}`, 400, "exactly one JSON object"},
		{"wrong type", "POST", "/api/threads/%s/runs", `{"content": 42}`, 400, `content`},
		{"missing content", "POST", "/api/threads/%s/runs", `{}`, 422, "content is required"},
		{"blank content", "POST", "/api/threads/%s/runs", `{"content":"   "}`, 422, "content is required"},
		{"unknown model", "POST", "/api/threads/%s/runs", `{"content":"hi","model":"gpt-9"}`, 422, "unknown model"},
		{"empty body", "POST", "/api/threads/%s/runs", ``, 400, "empty"},
		{"unknown thread", "POST", "/api/threads/00000000-0000-4000-8000-000000000001/runs", `{"content":"hi"}`, 404, "thread not found"},
		{"malformed thread id", "POST", "/api/threads/abc/runs", `{"content":"hi"}`, 404, "thread not found"},
		{"negative after_seq", "GET", "/api/threads/%s/events?after_seq=-1", nil, 400, "after_seq"},
		{"limit zero", "GET", "/api/threads/%s/events?limit=0", nil, 400, "limit"},
		{"limit too big", "GET", "/api/threads/%s/events?limit=1001", nil, 400, "limit"},
		{"limit not a number", "GET", "/api/threads/%s/events?limit=ten", nil, 400, "limit"},
		{"unknown event type", "GET", "/api/threads/%s/events?event_types=subagent.nope", nil, 400, "unknown event type"},
		{"title too long", "PATCH", "/api/threads/%s", map[string]string{"title": strings.Repeat("t", 201)}, 422, "at most 200"},
		{"settings not admin", "PUT", "/api/admin/settings", `{"token_usage_enabled": "yes"}`, 403, "admins only"},
		{"unknown route", "GET", "/api/nope", nil, 404, "not found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := u.do(c.method, strings.Replace(c.path, "%s", th, 1), c.body)
			if r.status != c.status || !strings.Contains(string(r.body), c.msg) {
				t.Fatalf("%d %.300s; want %d containing %q", r.status, r.body, c.status, c.msg)
			}
			var e map[string]map[string]string
			if err := json.Unmarshal(r.body, &e); err != nil || e["error"]["code"] == "" || e["error"]["message"] == "" {
				t.Errorf("error body %.200s is not {\"error\": {code, message}}", r.body)
			}
		})
	}
	if n, _ := a.store.LastSeq(context.Background(), th); n != 0 {
		t.Errorf("bad requests wrote %d records", n)
	}
	if runs, _ := a.store.Runs(context.Background(), th); len(runs) != 0 {
		t.Errorf("bad requests started %d runs", len(runs))
	}
	thread, _ := a.store.Thread(context.Background(), u.id, th)
	if thread.Title != "t" {
		t.Errorf("title = %q after a refused rename", thread.Title)
	}
}

// TestForeignTokensAndUsers: a user cannot see or delete another user's
// API tokens, and the admin user routes answer 404 for unknown ids.
func TestForeignTokensAndUsers(t *testing.T) {
	a := newApp(t)
	ann := a.newUser("ann@example.com", false)
	bob := a.newUser("bob@example.com", false)
	admin := a.newUser("admin@example.com", true)
	var tok struct{ ID, Token string }
	ann.mustJSON("POST", "/api/tokens", map[string]string{"name": "cli"}, http.StatusCreated, &tok)
	if r := bob.do("DELETE", "/api/tokens/"+tok.ID, nil); r.status != http.StatusNotFound {
		t.Errorf("bob deleting ann's token: %d, want 404", r.status)
	}
	if r := bob.do("GET", "/api/tokens", nil); strings.Contains(string(r.body), tok.ID) {
		t.Error("bob sees ann's token")
	}
	if r := a.anonymous().do("GET", "/api/threads", nil, "Authorization", "Bearer "+tok.Token); r.status != http.StatusOK {
		t.Errorf("ann's token no longer works: %d", r.status)
	}
	const missing = "00000000-0000-4000-8000-000000000009"
	for _, rt := range []struct{ method, path string }{
		{"PATCH", "/api/admin/users/" + missing},
		{"DELETE", "/api/admin/users/" + missing},
		{"DELETE", "/api/admin/users/not-a-uuid"},
	} {
		if r := admin.do(rt.method, rt.path, map[string]string{"role": "user"}); r.status != http.StatusNotFound {
			t.Errorf("%s %s: %d, want 404", rt.method, rt.path, r.status)
		}
	}
}

func TestInvalidSettingsChangeNothing(t *testing.T) {
	a := newApp(t)
	admin := a.newUser("admin@example.com", true)
	for _, body := range []string{`{"token_usage_enabled":"yes"}`, `{"token_usage_enabled":1}`, `{}`, `{"token_usage_enabled":false,"x":1}`, `[false]`, `not json`} {
		r := admin.do("PUT", "/api/admin/settings", body)
		if r.status < 400 || r.status >= 500 {
			t.Errorf("PUT %s: %d, want 4xx", body, r.status)
		}
		if !a.settings.TokenUsage() {
			t.Fatalf("PUT %s turned token usage off", body)
		}
	}
	if _, err := a.store.Setting(context.Background(), settingTokenUsage); err == nil {
		t.Error("a refused change was stored")
	}
}
