package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"herd/agent"
	"herd/agent/demo"
	"herd/agent/tools"
	"herd/internal/config"
	"herd/internal/secrets"
	"herd/models"
	"herd/server/auth"
	"herd/server/files"
	"herd/server/hub"
	"herd/server/metrics"
	"herd/server/render"
	"herd/static"
)

// testApp is herd wired as main wires it, on a real SQLite file and a real
// loopback listener, with fast demo models.
type testApp struct {
	t        testing.TB
	closed   bool   // close is idempotent: benchmarks close apps themselves
	dir      string // the data directory: herd.db and workspaces/
	store    *models.Store
	writer   *models.Writer
	hub      *hub.Hub
	settings *Settings
	console  *Console
	metrics  *metrics.Metrics
	rt       *agent.Runtime
	srv      *Server
	opts     Options // srv's
	dbPath   string
	http     *httptest.Server
	// hijacked are the connections handed to WebSocket upgrades: dropAll
	// cuts them.
	hijackedMu sync.Mutex
	hijacked   []net.Conn
}

type appOption func(*appConfig)

type appConfig struct {
	models    []agent.ModelConfig
	subagents agent.SubagentsConfig
	hub       hub.Options
	tools     []tools.Tool
	tokens    bool
	provider  agent.Provider      // replaces every configured model's provider
	markdown  *render.Markdown    // nil: render.NewMarkdown()
	server    func(*Options)      // adjusts the server's options (limits)
	auth      func(*auth.Options) // adjusts its auth service's (a clock)
	lead      agent.LeadConfig
	mcp       agent.ToolSource
	demo      map[string][]demo.Option // by model name
	dir       string                   // the data directory; "": a new one
	files     func(*files.Options)     // adjusts the workspace files' options (limits)
}

// withFiles adjusts the options of the server's workspace files.
func withFiles(f func(*files.Options)) appOption { return func(c *appConfig) { c.files = f } }

// inDir serves from the data directory dir, as a restart of herd would.
func inDir(dir string) appOption { return func(c *appConfig) { c.dir = dir } }

func withModels(ms ...agent.ModelConfig) appOption {
	return func(c *appConfig) { c.models = ms }
}

// withDemo passes options to the demo provider of model name.
func withDemo(name string, opts ...demo.Option) appOption {
	return func(c *appConfig) {
		if c.demo == nil {
			c.demo = map[string][]demo.Option{}
		}
		c.demo[name] = append(c.demo[name], opts...)
	}
}

func withHub(o hub.Options) appOption { return func(c *appConfig) { c.hub = o } }

func demoModel(name string, latencyMS, chunkMS int) agent.ModelConfig {
	return agent.ModelConfig{Name: name, DisplayName: strings.ToUpper(name[:1]) + name[1:], Provider: "demo", Model: name, LatencyMS: latencyMS, ChunkMS: chunkMS}
}

func newApp(t testing.TB, opts ...appOption) *testApp {
	t.Helper()
	cfg := &appConfig{
		models: []agent.ModelConfig{demoModel("demo-fast", 5, 1), demoModel("demo-deep", 10, 1)},
		tokens: true,
	}
	for _, o := range opts {
		o(cfg)
	}
	dir := cfg.dir
	if dir == "" {
		dir = t.TempDir()
	}
	store, err := models.Open(filepath.Join(dir, "herd.db"), models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := &testApp{t: t, dir: dir, store: store, metrics: metrics.New(MetricLabels)}
	if cfg.hub.OnDrop == nil {
		cfg.hub.OnDrop = a.metrics.OnDrop
	}
	a.settings, err = NewSettings(context.Background(), store, cfg.tokens)
	if err != nil {
		t.Fatal(err)
	}
	cfg.hub.TokenUsage = a.settings.TokenUsage
	if cfg.hub.Generation, err = store.RestoreGeneration(context.Background()); err != nil { // as main does
		t.Fatal(err)
	}
	md := cfg.markdown
	if md == nil {
		md = render.NewMarkdown()
	}
	a.hub = hub.New(store, md, cfg.hub)
	a.writer = store.NewWriter(models.WriterOptions{OnCommit: a.hub.OnCommit, OnBatch: a.metrics.OnBatch})
	llms := make([]*agent.Model, 0, len(cfg.models))
	for _, c := range cfg.models {
		llms = append(llms, &agent.Model{Config: c, Provider: demo.New(c, cfg.demo[c.Name]...)})
	}
	for _, m := range llms {
		if cfg.provider != nil {
			m.Provider = cfg.provider
		}
		// As providers.go wires it: the limit, then the metrics.
		m.Provider = agent.LimitRequests(m.Provider, m.Config.MaxConcurrentRequests)
		m.Provider = a.metrics.Instrument(m.Config.Name, m.Provider)
	}
	box, err := secrets.Load(dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	a.console = NewConsole(ConsoleOptions{Store: store, Secrets: box, Seed: llms, Agents: cfg.subagents.Agents,
		Build: testModelBuilder(a.metrics), Defaults: config.FillModelDefaults, Check: testCheckModel, CheckAgent: testCheckAgent, CheckMCP: testCheckMCP})
	// As main does: a stored model herd cannot read is left out.
	if llms, err = a.console.Built(context.Background()); llms == nil {
		t.Fatal(err)
	}
	if cfg.subagents.Agents, err = a.console.Agents(context.Background()); err != nil {
		t.Fatal(err)
	}
	toolset := cfg.tools
	if toolset == nil {
		toolset = tools.Workspace()
	}
	a.rt, err = agent.New(agent.Options{
		Models: llms, Subagents: cfg.subagents, WorkspaceRoot: filepath.Join(dir, "workspaces"),
		Tools: toolset, Journal: a.hub.Preparing(a.writer), History: store, Publisher: a.hub,
		Lead: cfg.lead, CommandsOffReason: "only admins may run commands on this host.", MCP: cfg.mcp,
		ToolImages: agent.NewToolImages(filepath.Join(dir, "tool-images")),
	})
	if err != nil {
		t.Fatal(err)
	}
	a.metrics.Watch(metrics.Sources{Runtime: a.rt, Hub: a.hub, Writer: a.writer})
	a.dbPath = filepath.Join(dir, "herd.db")
	fo := files.Options{Root: filepath.Join(dir, "workspaces")}
	if cfg.files != nil {
		cfg.files(&fo)
	}
	so := Options{Store: store, Runtime: a.rt, Hub: a.hub, Settings: a.settings, Console: a.console, Markdown: md, Metrics: a.metrics, Storage: a.writer, Static: static.FS, BcryptCost: 4, LoginPerMinute: 1000, RunsPerMinute: 10000,
		ThreadsPerMinute: 10000, MaxSocketsPerUser: 10000, WSConnectsPerMinute: 100000,
		Files: files.New(fo)}
	if ms, ok := cfg.mcp.(MCPServers); ok { // as main does: the runtime's and the console's
		so.MCP = ms
	}
	if cfg.server != nil {
		cfg.server(&so)
	}
	if cfg.auth != nil {
		ao := authOptions(so.withDefaults(), a.metrics)
		cfg.auth(&ao)
		if so.Auth, err = auth.New(context.Background(), ao); err != nil {
			t.Fatal(err)
		}
	}
	a.opts = so
	a.console.o.FileLimits = ConsoleLimits{Limits: a.rt.Limits(), RunsPerMinute: so.RunsPerMinute}
	a.srv, err = New(so)
	if err != nil {
		t.Fatal(err)
	}
	a.http = httptest.NewUnstartedServer(a.srv)
	a.http.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateHijacked {
			a.hijackedMu.Lock()
			a.hijacked = append(a.hijacked, c)
			a.hijackedMu.Unlock()
		}
	}
	a.http.Start()
	t.Cleanup(a.close)
	return a
}

func (a *testApp) close() {
	if a.closed {
		return
	}
	a.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.rt.Shutdown(ctx); err != nil {
		a.t.Errorf("runtime shutdown: %v", err)
	}
	if err := a.hub.Close(ctx); err != nil {
		a.t.Errorf("hub close: %v", err)
	}
	a.http.Close()
	a.srv.Close()
	a.writer.Close()
	_ = a.store.Close()
}

// user is a signed-in browser-like client: a cookie jar and its CSRF token.
type user struct {
	a     *testApp
	id    string
	email string
	csrf  string
	c     *http.Client
	admin bool
}

// newUser creates a user directly in the store and signs them in through
// the API.
func (a *testApp) newUser(email string, admin bool) *user {
	a.t.Helper()
	role := models.RoleUser
	if admin {
		role = models.RoleAdmin
	}
	hash, err := a.srv.auth.HashPassword("password123")
	if err != nil {
		a.t.Fatal(err)
	}
	if _, err := a.store.CreateUser(context.Background(), email, hash, role, false); err != nil {
		a.t.Fatal(err)
	}
	return a.signIn(email)
}

// signIn signs an existing user in through the API (password123, as
// newUser sets it).
func (a *testApp) signIn(email string) *user {
	a.t.Helper()
	u, err := a.store.UserByEmail(context.Background(), email)
	if err != nil {
		a.t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	cl := &user{a: a, id: u.ID, email: email, admin: u.Role == models.RoleAdmin, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	var out struct {
		CSRF string `json:"csrf_token"`
	}
	cl.mustJSON("POST", "/api/auth/login", map[string]string{"email": email, "password": "password123"}, http.StatusOK, &out)
	cl.csrf = out.CSRF
	return cl
}

// anonymous is a client with no session.
func (a *testApp) anonymous() *user {
	jar, _ := cookiejar.New(nil)
	return &user{a: a, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type response struct {
	status int
	body   []byte
	header http.Header
}

func (r response) errorCode() string {
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

// do sends a request; body may be nil, a string (sent as is) or a value
// (sent as JSON). The CSRF header is added unless noCSRF.
func (u *user) do(method, path string, body any, hdr ...string) response {
	u.a.t.Helper()
	var rd io.Reader
	ct := ""
	switch b := body.(type) {
	case nil:
	case string:
		rd, ct = strings.NewReader(b), "application/json"
	case []byte:
		rd, ct = bytes.NewReader(b), "application/json"
	case url.Values:
		rd, ct = strings.NewReader(b.Encode()), "application/x-www-form-urlencoded"
	case multipartBody:
		rd, ct = bytes.NewReader(b.data), b.contentType
	default:
		j, _ := json.Marshal(b)
		rd, ct = bytes.NewReader(j), "application/json"
	}
	req, err := http.NewRequest(method, u.a.http.URL+path, rd)
	if err != nil {
		u.a.t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if u.csrf != "" {
		req.Header.Set("X-CSRF-Token", u.csrf)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	return u.send(req)
}

// send sends req with u's cookies and reads the whole answer.
func (u *user) send(req *http.Request) response {
	u.a.t.Helper()
	resp, err := u.c.Do(req)
	if err != nil {
		u.a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: b, header: resp.Header}
}

func (u *user) mustJSON(method, path string, body any, want int, out any) {
	u.a.t.Helper()
	r := u.do(method, path, body)
	if r.status != want {
		u.a.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.body)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			u.a.t.Fatalf("%s %s: decode %s: %v", method, path, r.body, err)
		}
	}
}

func (u *user) newThread(title string) string {
	u.a.t.Helper()
	var th threadJSON
	u.mustJSON("POST", "/api/threads", map[string]string{"title": title}, http.StatusCreated, &th)
	return th.ID
}

// startRun sends a message and returns the run id.
func (u *user) startRun(threadID, content string) string {
	u.a.t.Helper()
	var out struct {
		RunID string `json:"run_id"`
	}
	u.mustJSON("POST", "/api/threads/"+threadID+"/runs", map[string]string{"content": content}, http.StatusAccepted, &out)
	return out.RunID
}

// waitIdle waits until the thread has no active run.
func (a *testApp) waitIdle(threadID string) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.rt.Wait(ctx, threadID); err != nil {
		a.t.Fatalf("run did not end: %v", err)
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// withAuth builds the app's auth service from the server's options,
// changed by f.
func withAuth(f func(*auth.Options)) appOption { return func(c *appConfig) { c.auth = f } }

// reauth gives a's server a new auth service from its options, changed
// by f if set (fresh limits, a new set-up token, the same form key), and
// the routes that use it.
func (a *testApp) reauth(f func(*auth.Options)) {
	a.t.Helper()
	o := a.opts.withDefaults()
	ao := authOptions(o, a.metrics)
	if f != nil {
		f(&ao)
	}
	svc, err := auth.New(context.Background(), ao)
	if err != nil {
		a.t.Fatal(err)
	}
	a.srv.auth = svc
	if err := a.srv.startHTTP(o); err != nil {
		a.t.Fatal(err)
	}
}

// The cookies' names on the wire (without __Host-).
const (
	sessionCookie = "herd_session"
	preCSRFCookie = "herd_csrf"
)
