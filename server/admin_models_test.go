package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herd/agent"
	"herd/agent/mcp"
	"herd/agent/openai"
	"herd/agent/openai/openaitest"
	"herd/internal/config"
	"herd/internal/secrets"
	"herd/server/metrics"
)

// testModelBuilder builds a console model as main does (providers.go),
// for the providers the tests use.
func testModelBuilder(m *metrics.Metrics) ModelBuilder {
	return func(c agent.ModelConfig) (*agent.Model, error) {
		var p agent.Provider
		switch c.Provider {
		case "openai":
			op, err := openai.New(c)
			if err != nil {
				return nil, err
			}
			p = op
		default:
			return nil, &EntryError{Field: "provider", Reason: "the tests build openai models only"}
		}
		return &agent.Model{Config: c, Provider: m.Instrument(c.Name, agent.LimitRequests(p, c.MaxConcurrentRequests))}, nil
	}
}

func testCheckModel(m agent.ModelConfig) []FieldProblem {
	var out []FieldProblem
	for _, f := range config.CheckModel(m) {
		out = append(out, FieldProblem{Field: f.Field, Message: f.Message})
	}
	return out
}

type modelJSON struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	BaseURL  string `json:"base_url"`
	APIKey   string `json:"api_key"`
	Source   string `json:"source"`
	ReadOnly bool   `json:"read_only"`
	Note     string `json:"note"`
	Vision   bool   `json:"vision"`
}

const consoleKey = "sk-console-SECRET-0123456789"

// TestAdminModelAppliedAtOnce: a model an admin adds through the API is
// shown with its key masked, listed for users and used by the next run,
// with its key, without a restart; the database holds the key sealed
// only (docs/DESIGN.md §12).
func TestAdminModelAppliedAtOnce(t *testing.T) {
	fake := openaitest.NewServer(t, openaitest.Text("hello from the console model"))
	a := newApp(t)
	admin := a.newUser("admin@example.com", true)

	var added modelJSON
	admin.mustJSON("POST", "/api/admin/models", map[string]any{
		"name": "console-gpt", "provider": "openai", "model": "gpt-x", "base_url": fake.URL(), "api_key": consoleKey, "vision": true,
	}, http.StatusCreated, &added)
	if added.APIKey != "…6789" || added.Source != "console" || added.ReadOnly || !added.Vision {
		t.Fatalf("added = %+v, want the key masked as …6789, source console, editable, vision", added)
	}
	var listed struct {
		Models []struct{ Name string } `json:"models"`
	}
	admin.mustJSON("GET", "/api/models", nil, http.StatusOK, &listed)
	if n := len(listed.Models); n != 3 || listed.Models[2].Name != "console-gpt" {
		t.Fatalf("GET /api/models = %+v, want the two file models and console-gpt", listed.Models)
	}

	th := admin.newThread("t")
	admin.mustJSON("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "hi", "model": "console-gpt"}, http.StatusAccepted, nil)
	a.waitIdle(th)
	msgs := admin.shownMessages(th)
	if last := msgs[len(msgs)-1]; last.Content != "hello from the console model" {
		t.Fatalf("the run answered %q, want the console model's answer", last.Content)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "Bearer "+consoleKey || reqs[0].Chat.Model != "gpt-x" {
		t.Fatalf("the provider got %d requests (first: %v), want one with the console's key for gpt-x", len(reqs), reqs)
	}

	for _, r := range []response{admin.do("GET", "/api/admin/models", nil), admin.do("GET", "/api/models", nil)} {
		if bytes.Contains(r.body, []byte("SECRET")) {
			t.Fatalf("a response shows the key: %s", r.body)
		}
	}
	a.close()
	for _, f := range []string{"herd.db", "herd.db-wal"} {
		b, err := os.ReadFile(filepath.Join(a.dir, f))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("SECRET")) {
			t.Fatalf("%s holds the API key in the clear", f)
		}
	}
}

// TestAdminModelRestart: a stored model is there after a restart, its
// key opened with the data directory's key file.
func TestAdminModelRestart(t *testing.T) {
	fake := openaitest.NewServer(t, openaitest.Text("after the restart"))
	dir := t.TempDir()
	a := newApp(t, inDir(dir))
	admin := a.newUser("admin@example.com", true)
	admin.mustJSON("POST", "/api/admin/models", map[string]any{"name": "kept", "provider": "openai", "base_url": fake.URL(), "api_key": consoleKey}, http.StatusCreated, nil)
	a.close()

	b := newApp(t, inDir(dir))
	admin = b.signIn("admin@example.com")
	th := admin.newThread("t")
	admin.mustJSON("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "hi", "model": "kept"}, http.StatusAccepted, nil)
	b.waitIdle(th)
	if reqs := fake.Requests(); len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "Bearer "+consoleKey {
		t.Fatalf("after a restart the provider got %v, want one request with the stored key", reqs)
	}
}

// TestAdminModelEdits: a PATCH changes what the next run uses and keeps
// an unsent key; the config file's models are read-only (409), bad
// input names its field (422), users may not (403).
func TestAdminModelEdits(t *testing.T) {
	fake := openaitest.NewServer(t, openaitest.Text("one"), openaitest.Text("two"))
	a := newApp(t)
	admin := a.newUser("admin@example.com", true)
	plain := a.newUser("user@example.com", false)
	admin.mustJSON("POST", "/api/admin/models", map[string]any{"name": "m", "provider": "openai", "base_url": fake.URL(), "api_key": "key-one"}, http.StatusCreated, nil)

	var patched modelJSON
	admin.mustJSON("PATCH", "/api/admin/models/m", map[string]any{"model": "renamed-upstream"}, http.StatusOK, &patched)
	if patched.APIKey != "set" || patched.BaseURL != fake.URL() {
		t.Fatalf("patched = %+v, want the key kept (set) and the base URL unchanged", patched)
	}
	th := admin.newThread("t")
	admin.mustJSON("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "hi", "model": "m"}, http.StatusAccepted, nil)
	a.waitIdle(th)
	admin.mustJSON("PATCH", "/api/admin/models/m", map[string]any{"api_key": "key-two"}, http.StatusOK, nil)
	admin.mustJSON("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "again", "model": "m"}, http.StatusAccepted, nil)
	a.waitIdle(th)
	reqs := fake.Requests()
	if len(reqs) != 2 || reqs[0].Chat.Model != "renamed-upstream" || reqs[0].Header.Get("Authorization") != "Bearer key-one" || reqs[1].Header.Get("Authorization") != "Bearer key-two" {
		t.Fatalf("requests %v: want the renamed model with key-one, then key-two", reqs)
	}

	cases := []struct {
		name         string
		u            *user
		method, path string
		body         any
		status       int
		want         string
	}{
		{"a file model is read-only", admin, "PATCH", "/api/admin/models/demo-fast", map[string]any{"vision": true}, http.StatusConflict, "set in herd.yaml — edit there"},
		{"a file model cannot be deleted", admin, "DELETE", "/api/admin/models/demo-fast", nil, http.StatusConflict, "set in herd.yaml — edit there"},
		{"a file model's name is taken", admin, "POST", "/api/admin/models", map[string]any{"name": "demo-fast", "provider": "openai", "base_url": fake.URL()}, http.StatusConflict, "taken"},
		{"a console model's name is taken", admin, "POST", "/api/admin/models", map[string]any{"name": "m", "provider": "openai", "base_url": fake.URL()}, http.StatusConflict, "taken"},
		{"a bad base URL", admin, "POST", "/api/admin/models", map[string]any{"name": "x", "provider": "openai", "base_url": "ftp://x"}, http.StatusUnprocessableEntity, `"field":"base_url"`},
		{"an unknown provider", admin, "POST", "/api/admin/models", map[string]any{"name": "x", "provider": "gemini"}, http.StatusUnprocessableEntity, `"field":"provider"`},
		{"a small window", admin, "POST", "/api/admin/models", map[string]any{"name": "x", "provider": "openai", "base_url": fake.URL(), "context_window": 128}, http.StatusUnprocessableEntity, "context_window must be 0 (unknown) or at least 512"},
		{"a bad name", admin, "POST", "/api/admin/models", map[string]any{"name": "a b", "provider": "openai", "base_url": fake.URL()}, http.StatusUnprocessableEntity, `"field":"name"`},
		{"an unknown field", admin, "POST", "/api/admin/models", map[string]any{"name": "x", "provider": "openai", "colour": "red"}, http.StatusBadRequest, "colour"},
		{"a name cannot change", admin, "PATCH", "/api/admin/models/m", map[string]any{"name": "n"}, http.StatusUnprocessableEntity, "name cannot change"},
		{"an unknown model", admin, "PATCH", "/api/admin/models/nope", map[string]any{"vision": true}, http.StatusNotFound, "not found"},
		{"users may not list", plain, "GET", "/api/admin/models", nil, http.StatusForbidden, ""},
		{"users may not add", plain, "POST", "/api/admin/models", map[string]any{"name": "x", "provider": "openai", "base_url": fake.URL()}, http.StatusForbidden, ""},
		{"users may not delete", plain, "DELETE", "/api/admin/models/m", nil, http.StatusForbidden, ""},
		{"users may not test", plain, "POST", "/api/admin/models/test", map[string]any{"name": "m"}, http.StatusForbidden, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.u.do(c.method, c.path, c.body)
			if r.status != c.status || !strings.Contains(string(r.body), c.want) {
				t.Fatalf("%s %s: %d %s, want %d with %q", c.method, c.path, r.status, r.body, c.status, c.want)
			}
		})
	}

	if r := admin.do("DELETE", "/api/admin/models/m", nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	r := admin.do("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "once more", "model": "m"})
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "unknown model") {
		t.Fatalf("a run of a deleted model: %d %s, want 422 naming the unknown model", r.status, r.body)
	}
}

// TestAdminModelInUse: a model a subagent type names cannot be deleted.
func TestAdminModelInUse(t *testing.T) {
	fake := openaitest.NewServer(t)
	a := newApp(t, func(c *appConfig) {
		c.subagents = agent.SubagentsConfig{Agents: map[string]agent.AgentConfig{"researcher": {Description: "r", Model: "demo-deep"}}}
	})
	admin := a.newUser("admin@example.com", true)
	admin.mustJSON("POST", "/api/admin/models", map[string]any{"name": "m", "provider": "openai", "base_url": fake.URL()}, http.StatusCreated, nil)
	a.console.o.Agents = map[string]agent.AgentConfig{"researcher": {Description: "r", Model: "m"}}
	r := admin.do("DELETE", "/api/admin/models/m", nil)
	if r.status != http.StatusConflict || !strings.Contains(string(r.body), "subagent type researcher uses model m") {
		t.Fatalf("DELETE of a model in use: %d %s", r.status, r.body)
	}
}

// TestAdminModelTestConnection: Test connection says in plain words what
// the provider answered.
func TestAdminModelTestConnection(t *testing.T) {
	fake := openaitest.NewServer(t, openaitest.Text("OK"), openaitest.Fail(http.StatusUnauthorized, "Incorrect API key provided"), openaitest.Fail(http.StatusNotFound, "The model does not exist"))
	a := newApp(t)
	admin := a.newUser("admin@example.com", true)
	admin.mustJSON("POST", "/api/admin/models", map[string]any{"name": "m", "provider": "openai", "base_url": fake.URL(), "api_key": "stored-key"}, http.StatusCreated, nil)
	dead := openaitest.NewServer(t)
	deadURL := dead.URL()
	dead.Close()

	cases := []struct {
		name   string
		body   map[string]any
		ok     bool
		detail string
	}{
		{"by name", map[string]any{"name": "m"}, true, "answered"},
		{"a refused key", map[string]any{"provider": "openai", "base_url": fake.URL(), "api_key": "wrong"}, false, "the API key was refused"},
		{"an unknown model", map[string]any{"provider": "openai", "base_url": fake.URL(), "model": "nope"}, false, `does not know the model "nope"`},
		{"a refused connection", map[string]any{"provider": "openai", "base_url": deadURL}, false, "could not be reached"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got Connection
			admin.mustJSON("POST", "/api/admin/models/test", c.body, http.StatusOK, &got)
			if got.OK != c.ok || !strings.Contains(got.Detail, c.detail) {
				t.Fatalf("test = %+v, want ok %v and %q", got, c.ok, c.detail)
			}
		})
	}
	if reqs := fake.Requests(); reqs[0].Header.Get("Authorization") != "Bearer stored-key" || reqs[0].Chat.MaxTokens+reqs[0].Chat.MaxCompletionTokens == 0 {
		t.Fatalf("the test by name sent %v, want the stored key and a capped answer", reqs[0])
	}
	r := admin.do("POST", "/api/admin/models/test", map[string]any{"name": "nothing"})
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("a test of no model: %d %s", r.status, r.body)
	}
}

// TestAdminModelWithoutItsKey: a model sealed with a key this herd no
// longer has is left out, and herd starts and lists the rest.
func TestAdminModelWithoutItsKey(t *testing.T) {
	dir := t.TempDir()
	a := newApp(t, inDir(dir))
	admin := a.newUser("admin@example.com", true)
	admin.mustJSON("POST", "/api/admin/models", map[string]any{"name": "sealed", "provider": "openai", "base_url": "http://127.0.0.1:1/v1", "api_key": consoleKey}, http.StatusCreated, nil)
	a.close()
	if err := os.Remove(filepath.Join(dir, secrets.KeyFile)); err != nil {
		t.Fatal(err)
	}
	b := newApp(t, inDir(dir))
	admin = b.signIn("admin@example.com")
	var got struct {
		Models []modelJSON `json:"models"`
	}
	admin.mustJSON("GET", "/api/admin/models", nil, http.StatusOK, &got)
	if len(got.Models) != 2 {
		t.Fatalf("models = %+v, want the file's two, the unreadable one left out", got.Models)
	}
}

// TestAdminLimits: the console's limits win over herd.yaml's at once,
// null sets one back, bad input names the limit, users may not.
func TestAdminLimits(t *testing.T) {
	a := newApp(t)
	admin := a.newUser("admin@example.com", true)
	plain := a.newUser("user@example.com", false)
	var st LimitsState
	admin.mustJSON("GET", "/api/admin/limits", nil, http.StatusOK, &st)
	if st.Limits != st.File || st.File.RunsPerMinute != 10000 || len(st.Stored) != 0 {
		t.Fatalf("limits before a change = %+v", st)
	}
	admin.mustJSON("PATCH", "/api/admin/limits", map[string]any{"lead_max_turns": 5, "runs_per_minute": 1, "subagents_max_running": 2}, http.StatusOK, &st)
	if got := a.rt.Limits(); got.MaxTurns != 5 || got.MaxRunning != 2 || st.Limits.RunsPerMinute != 1 || st.Stored["lead_max_turns"] != 5 {
		t.Fatalf("after the PATCH the runtime has %+v, the answer %+v", got, st)
	}
	th := plain.newThread("t")
	plain.startRun(th, "one")
	a.waitIdle(th)
	if r := plain.do("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "two"}); r.status != http.StatusTooManyRequests {
		t.Fatalf("a second run within the minute at runs_per_minute 1: %d %s, want 429", r.status, r.body)
	}
	st = LimitsState{}
	admin.mustJSON("PATCH", "/api/admin/limits", map[string]any{"lead_max_turns": nil}, http.StatusOK, &st)
	if a.rt.Limits().MaxTurns != st.File.MaxTurns || st.Stored["lead_max_turns"] != 0 {
		t.Fatalf("null did not set max turns back to herd.yaml's: %+v", st)
	}
	for _, c := range []struct {
		body any
		want string
	}{
		{map[string]any{"runs_per_minute": 0}, `"field":"runs_per_minute"`},
		{map[string]any{"colour": 3}, `"field":"colour"`},
		{map[string]any{"lead_max_turns": "many"}, `lead_max_turns`},
	} {
		if r := admin.do("PATCH", "/api/admin/limits", c.body); r.status/100 != 4 || !strings.Contains(string(r.body), c.want) {
			t.Errorf("PATCH %v: %d %s, want a refusal with %s", c.body, r.status, r.body, c.want)
		}
	}
	if r := plain.do("PATCH", "/api/admin/limits", map[string]any{"lead_max_turns": 9}); r.status != http.StatusForbidden {
		t.Errorf("a user's PATCH: %d", r.status)
	}
	if a.rt.Limits().MaxTurns != st.File.MaxTurns {
		t.Error("a refused change changed the limits")
	}
}

func testCheckMCP(sc mcp.ServerConfig) []FieldProblem {
	var out []FieldProblem
	for _, f := range config.CheckMCPServer(sc) {
		out = append(out, FieldProblem{Field: f.Field, Message: f.Message})
	}
	return out
}

func testCheckAgent(name string, a agent.AgentConfig, models []agent.ModelConfig, servers []mcp.ServerConfig) []FieldProblem {
	var out []FieldProblem
	for _, f := range config.CheckAgent(name, a, models, servers) {
		out = append(out, FieldProblem{Field: f.Field, Message: f.Message})
	}
	return out
}

// TestAdminAgents: a subagent type added through the API is offered to
// the next run's lead (the task tool names it) with no restart; it is
// held to the config file's rules; herd.yaml's types are read-only; a
// model it names cannot be deleted.
func TestAdminAgents(t *testing.T) {
	fake := openaitest.NewServer(t)
	fake.SetFallback(func(openaitest.ChatRequest) openaitest.Reply { return openaitest.Text("done") })
	a := newApp(t, func(c *appConfig) {
		c.subagents = agent.SubagentsConfig{Agents: map[string]agent.AgentConfig{"researcher": {Description: "researches"}}}
	})
	admin := a.newUser("admin@example.com", true)
	plain := a.newUser("user@example.com", false)
	admin.mustJSON("POST", "/api/admin/models", map[string]any{"name": "m", "provider": "openai", "base_url": fake.URL()}, http.StatusCreated, nil)
	admin.mustJSON("POST", "/api/admin/agents", map[string]any{"name": "writer", "description": "Writes release notes", "model": "m", "max_turns": 4}, http.StatusCreated, nil)

	var got struct {
		Agents []struct {
			Name, Source, Note string
			ReadOnly           bool `json:"read_only"`
		} `json:"agents"`
	}
	admin.mustJSON("GET", "/api/admin/agents", nil, http.StatusOK, &got)
	if len(got.Agents) != 2 || got.Agents[0].Name != "researcher" || !got.Agents[0].ReadOnly || got.Agents[1].Name != "writer" || got.Agents[1].Source != "console" {
		t.Fatalf("agents = %+v, want herd.yaml's researcher read-only, then writer", got.Agents)
	}
	th := admin.newThread("t")
	admin.mustJSON("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "hi", "model": "m"}, http.StatusAccepted, nil)
	a.waitIdle(th)
	if reqs := fake.Requests(); len(reqs) == 0 || !bytes.Contains(reqs[0].Body, []byte("Writes release notes")) {
		t.Fatal("the next run's task tool does not offer the type added")
	}
	admin.mustJSON("PATCH", "/api/admin/agents/writer", map[string]any{"description": "Writes changelogs"}, http.StatusOK, nil)

	cases := []struct {
		name         string
		u            *user
		method, path string
		body         any
		status       int
		want         string
	}{
		{"herd.yaml's type is read-only", admin, "PATCH", "/api/admin/agents/researcher", map[string]any{"max_turns": 3}, http.StatusConflict, "set in herd.yaml — edit there"},
		{"herd.yaml's type's name is taken", admin, "POST", "/api/admin/agents", map[string]any{"name": "researcher", "description": "x"}, http.StatusConflict, "taken"},
		{"an unknown model", admin, "POST", "/api/admin/agents", map[string]any{"name": "x", "description": "x", "model": "nope"}, http.StatusUnprocessableEntity, `"field":"model"`},
		{"an unknown tool", admin, "POST", "/api/admin/agents", map[string]any{"name": "x", "description": "x", "tools": []string{"teleport"}}, http.StatusUnprocessableEntity, `"field":"tools.0"`},
		{"no description", admin, "POST", "/api/admin/agents", map[string]any{"name": "x"}, http.StatusUnprocessableEntity, `"field":"description"`},
		{"a bad name", admin, "POST", "/api/admin/agents", map[string]any{"name": "Bad Name", "description": "x"}, http.StatusUnprocessableEntity, "agent name must match"},
		{"a model a type names", admin, "DELETE", "/api/admin/models/m", nil, http.StatusConflict, "subagent type writer uses model m"},
		{"users may not add", plain, "POST", "/api/admin/agents", map[string]any{"name": "x", "description": "x"}, http.StatusForbidden, ""},
		{"users may not list", plain, "GET", "/api/admin/agents", nil, http.StatusForbidden, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.u.do(c.method, c.path, c.body)
			if r.status != c.status || !strings.Contains(string(r.body), c.want) {
				t.Fatalf("%s %s: %d %s, want %d with %q", c.method, c.path, r.status, r.body, c.status, c.want)
			}
		})
	}
	if r := admin.do("DELETE", "/api/admin/agents/writer", nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE writer: %d %s", r.status, r.body)
	}
	if r := admin.do("DELETE", "/api/admin/models/m", nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE m once no type names it: %d %s", r.status, r.body)
	}
}

// TestResealAfterRotation: with the old key as the previous one, Reseal
// seals every stored secret (a model's key, an MCP server's env and
// headers) again with the new key, once; then the new key alone opens
// them.
func TestResealAfterRotation(t *testing.T) {
	a := newApp(t)
	admin := a.newUser("admin@example.com", true)
	admin.mustJSON("POST", "/api/admin/models", map[string]any{"name": "m", "provider": "openai", "base_url": "http://127.0.0.1:1/v1", "api_key": consoleKey}, http.StatusCreated, nil)
	admin.mustJSON("POST", "/api/admin/mcp", map[string]any{"name": "search", "url": "http://127.0.0.1:1/mcp", "headers": map[string]string{"Authorization": mcpToken}}, http.StatusCreated, nil)
	oldFile, err := os.ReadFile(filepath.Join(a.dir, secrets.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	oldKey, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(string(oldFile)))
	newKey := bytes.Repeat([]byte{7}, 32)
	rotated, err := secrets.New(newKey, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	console := func(box *secrets.Box) *Console {
		return NewConsole(ConsoleOptions{Store: a.store, Secrets: box, Defaults: config.FillModelDefaults, Check: testCheckModel, Build: testModelBuilder(a.metrics)})
	}
	ctx := context.Background()
	if n, err := console(rotated).Reseal(ctx); err != nil || n != 2 {
		t.Fatalf("Reseal = %d, %v; want the model's key and the server's header", n, err)
	}
	if n, _ := console(rotated).Reseal(ctx); n != 0 {
		t.Fatalf("a second Reseal sealed %d again, want none", n)
	}
	only, _ := secrets.New(newKey, nil)
	ms, err := console(only).Models(ctx)
	if err != nil || len(ms) != 1 || ms[0].Config.APIKey != consoleKey {
		t.Fatalf("the new key alone opens %+v, %v; want the stored key", ms, err)
	}
	servers, err := console(only).MCPServers(ctx)
	if err != nil || len(servers) != 1 || servers[0].Config.Headers["Authorization"] != mcpToken {
		t.Fatalf("the new key alone opens %+v, %v; want the stored header", servers, err)
	}
}

// TestAdminModelFormKeptWhenRefused: a refused save brings the page back
// with the add form as it was sent, but for its key, which the page
// never holds.
func TestAdminModelFormKeptWhenRefused(t *testing.T) {
	a := newApp(t)
	admin := a.newUser("admin@example.com", true)
	r := admin.do("POST", "/admin/models", url.Values{"_csrf": {admin.csrf}, "name": {"kept-model"}, "provider": {"openai"},
		"model": {"gpt-kept"}, "base_url": {"ftp://llm.example.com"}, "api_key": {"sk-kept-SECRET"}, "stream": {"false"}, "context_window": {"64000"}})
	page := string(r.body)
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(page, "base_url") {
		t.Fatalf("a bad base URL: %d, want 422 naming base_url:\n%.600s", r.status, page)
	}
	for _, want := range []string{`id="new-model-name" name="name" type="text" autocomplete="off" required value="kept-model"`,
		`value="gpt-kept"`, `value="ftp://llm.example.com"`, `value="64000"`, `<option value="false" selected>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the form after a refused save lacks %s", want)
		}
	}
	if strings.Contains(page, "SECRET") {
		t.Error("the page holds the key typed")
	}
}

// TestAdminModelPrice: a console model may have a price, checked by the
// config file's rules, in US dollars unless it says otherwise; the form
// takes it too and names a figure that is no number.
func TestAdminModelPrice(t *testing.T) {
	a := newApp(t)
	admin := a.newUser("admin@example.com", true)
	var got struct {
		Price *agent.ModelPrice `json:"price"`
	}
	admin.mustJSON("POST", "/api/admin/models", map[string]any{"name": "priced", "provider": "openai", "base_url": "https://llm.example.com/v1",
		"price": map[string]any{"input_per_mtok": 0.4, "output_per_mtok": 1.6}}, http.StatusCreated, &got)
	if got.Price == nil || *got.Price != (agent.ModelPrice{InputPerMTok: 0.4, OutputPerMTok: 1.6, Currency: "USD"}) {
		t.Fatalf("price = %+v, want 0.4/1.6 USD", got.Price)
	}
	if r := admin.do("POST", "/api/admin/models", map[string]any{"name": "bad-price", "provider": "openai", "base_url": "https://llm.example.com/v1",
		"price": map[string]any{"input_per_mtok": -1, "output_per_mtok": 1}}); r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "price.input_per_mtok") {
		t.Errorf("a negative price: %d %s, want 422 naming price.input_per_mtok", r.status, r.body)
	}
	form := url.Values{"_csrf": {admin.csrf}, "name": {"form-priced"}, "provider": {"openai"}, "base_url": {"https://llm.example.com/v1"}, "price_input": {"2.5"}, "price_output": {"10"}, "currency": {"eur"}}
	if r := admin.do("POST", "/admin/models", form); r.status != http.StatusOK {
		t.Fatalf("the form with a price: %d %.400s", r.status, r.body)
	}
	page := string(admin.do("GET", "/admin", nil).body)
	for _, want := range []string{`id="edit-form-priced-price-input" name="price_input" type="text" inputmode="decimal" value="2.5"`, `value="EUR"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the edit form lacks %s", want)
		}
	}
	form.Set("name", "form-bad")
	form.Set("price_input", "cheap")
	if r := admin.do("POST", "/admin/models", form); r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "a price must be a number") {
		t.Errorf("a price that is no number: %d, want 422 saying so", r.status)
	}
}
