// Package server is herd's HTTP side: Echo routes and handlers and the
// WebSocket hub; who a request is comes from server/auth, the generic
// limits from server/limits. Handlers are thin: parse, call one thing,
// respond; errors.go maps every package's errors to a status.
package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"

	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"herd/agent"
	"herd/agent/mcp"
	"herd/models"
	"herd/server/auth"
	"herd/server/hub"
	"herd/server/limits"
	"herd/server/metrics"
	"herd/server/purge"
	"herd/server/render"
	"herd/server/titles"
	"herd/views"
)

// Options builds a Server.
type Options struct {
	Store   *models.Store
	Runtime *agent.Runtime
	Hub     *hub.Hub
	// Settings is the token gate's owner; the hub reads the same one.
	Settings *Settings
	// Markdown renders text in pages; the hub renders frames with the
	// same one.
	Markdown *render.Markdown
	Metrics  Metrics // nil: no /metrics
	// MetricsToken serves /metrics on this handler to bearers of the token;
	// "" leaves it to the metrics address alone (docs/OPERATIONS.md).
	MetricsToken string
	// Storage reports the writer's storage fault, if any (readiness, new
	// runs); nil: none is ever reported.
	Storage interface{ Fault() *models.StorageFault }
	Static  fs.FS // app.css, app.js, …
	Logger  *slog.Logger
	Now     func() time.Time

	// MCP reports the MCP servers for the admin page and /api/admin/mcp;
	// nil: none are configured.
	MCP interface{ Status() []mcp.ServerStatus }

	// CommandsAdminOnly offers commands only to runs of admins' threads:
	// the sandbox runs commands on the host (docs/DESIGN.md §4, the shell
	// rule).
	CommandsAdminOnly bool

	// Auth is the authentication service; nil builds one from PublicURL,
	// AllowedHosts, SessionTTL, LoginPerMinute and BcryptCost.
	Auth *auth.Service
	// PublicURL is the origin behind a TLS proxy ("" = the request's host).
	PublicURL string
	// AllowedHosts are Host names served beside loopback and PublicURL's.
	AllowedHosts []string
	// TrustedProxies are the CIDRs whose X-Forwarded-For is believed.
	TrustedProxies     []string
	AllowSignup        bool
	SessionTTL         time.Duration
	LoginPerMinute     int
	RunsPerMinute      int
	BcryptCost         int // 0 = auth.DefaultBcryptCost; tests lower it
	MaxContentBytes    int // a message's content; 0 = 100 KB
	MaxBodyBytes       int64
	WebSocketReadLimit int64
	ThreadsPerMinute   int // thread creations per user; 0 = 20
	// UndoWindow is how long a deleted thread can be restored; 0 = 10 s.
	UndoWindow time.Duration
	// OnThreadPurged, when set, is told of every deleted thread removed
	// for good (tests wait on it).
	OnThreadPurged func(threadID string)
	// MaxSocketsPerUser caps a user's open WebSockets; 0 = 16.
	MaxSocketsPerUser int
	// WSConnectsPerMinute limits WebSocket connects per user (per IP
	// before sign-in); 0 = 60.
	WSConnectsPerMinute int
	// Cluster, when set, joins the instances serving one PostgreSQL
	// database: Stop and a card's cancel reach the run on any instance,
	// and ended sessions close their sockets on every instance.
	Cluster Peers
}

// Metrics is what the server takes of the registry (metrics.Metrics):
// /metrics on the main address, and its password checks counted.
type Metrics interface {
	Handler(token string) http.Handler
	PasswordChecked(kind string)
}

// MetricLabels are the label values of the server's counters, which the
// registry shows from 0 (metrics.New).
var MetricLabels = metrics.Labels{
	PasswordChecks: []string{auth.CheckSignIn, auth.CheckPasswordChange},
}

// DefaultMaxBodyBytes caps a request body unless Options say otherwise.
const DefaultMaxBodyBytes = 1 << 20

// Server is the HTTP handler of herd.
type Server struct {
	e             *echo.Echo
	store         *models.Store
	rt            *agent.Runtime
	runs          runControl // rt's runs, or every instance's (Cluster)
	hub           *hub.Hub
	pages         threadPages // hub, or every instance's (Cluster)
	settings      *Settings
	metrics       Metrics
	metricsToken  string
	storage       interface{ Fault() *models.StorageFault }
	log           *slog.Logger
	now           func() time.Time
	md            *render.Markdown
	assets        map[string]string
	static        fs.FS
	auth          *auth.Service
	allowSignup   bool
	sockets       *hub.Sockets
	runLimiter    *limits.Limiter
	threadLimiter *limits.Limiter
	connLimiter   *limits.Limiter
	socketCap     *limits.SocketCounter
	labels        map[string]string // model name → display name
	maxContent    int
	maxBody       int64
	adminCommands bool // CommandsAdminOnly
	purger        *purge.Purger
	titles        *titles.Titler
	draining      atomic.Bool // Drain: readyz fails
	undoWindow    time.Duration
	mcp           interface{ Status() []mcp.ServerStatus }
}

// New builds the server and its routes.
func New(o Options) (*Server, error) {
	if o.Settings == nil || o.Markdown == nil {
		return nil, errors.New("server: Options.Settings and Options.Markdown are required")
	}
	o = o.withDefaults()
	s := &Server{
		store:         o.Store,
		rt:            o.Runtime,
		hub:           o.Hub,
		settings:      o.Settings,
		metrics:       o.Metrics,
		metricsToken:  o.MetricsToken,
		storage:       o.Storage,
		log:           o.Logger,
		now:           o.Now,
		md:            o.Markdown,
		static:        o.Static,
		allowSignup:   o.AllowSignup,
		runLimiter:    limits.NewLimiter(o.RunsPerMinute, o.Now),
		threadLimiter: limits.NewLimiter(o.ThreadsPerMinute, o.Now),
		connLimiter:   limits.NewLimiter(o.WSConnectsPerMinute, o.Now),
		socketCap:     limits.NewSocketCounter(o.MaxSocketsPerUser),
		maxContent:    o.MaxContentBytes,
		maxBody:       o.MaxBodyBytes,
		adminCommands: o.CommandsAdminOnly,
		mcp:           o.MCP,
		runs:          o.Runtime,
		pages:         o.Hub,
	}
	others := s.buildShared(o)
	s.undoWindow = o.UndoWindow
	s.titles = titles.New(o.Runtime, o.Store, s.pages, others, s.log)
	s.labels = map[string]string{}
	for _, m := range o.Runtime.Models() {
		s.labels[m.Name] = m.Label()
	}
	if s.auth = o.Auth; s.auth == nil {
		var err error
		if s.auth, err = auth.New(context.Background(), authOptions(o, s.metrics)); err != nil {
			return nil, err
		}
	}
	if err := s.startHTTP(o); err != nil {
		return nil, err
	}
	return s, nil
}

// authOptions are the auth service's options of o; password checks are
// counted in m (nil: not counted).
func authOptions(o Options, m Metrics) auth.Options {
	ao := auth.Options{
		Store: o.Store, PublicURL: o.PublicURL, AllowedHosts: o.AllowedHosts,
		SessionTTL: o.SessionTTL, LoginPerMinute: o.LoginPerMinute, BcryptCost: o.BcryptCost,
		Now: o.Now, Logger: o.Logger,
	}
	if m != nil {
		ao.Checked = m.PasswordChecked
	}
	return ao
}

// Close stops the server's own background work (pending purges stay in
// the database). Call it after the HTTP server has stopped.
func (s *Server) Close() {
	s.titles.Close()
	s.purger.Close()
}

// buildShared builds the parts that other instances share, when there
// are any (o.Cluster): runs, pages and title calls go through them, and
// the sockets and the purger tell them of each close and delete. It
// returns the other instances' title calls; nil on one instance.
func (s *Server) buildShared(o Options) titleCalling {
	var (
		relaySockets func(hub.SocketClose)
		relayPurge   func(string, time.Time)
		others       titleCalling
	)
	if c := o.Cluster; c != nil {
		s.pages, s.runs, others = c, c, c
		// Every instance purges every delete: whichever claims it first
		// (models.Store.PurgeThread).
		relayPurge = c.RelayPurge
		relaySockets = func(sc hub.SocketClose) { c.RelaySockets(sc.Code, sc.Text, sc.UserID, sc.Creds) }
	}
	s.sockets = hub.NewSockets(relaySockets)
	s.purger = purge.New(o.Store, s.now, s.log, func(id string) {
		s.removeWorkspace(id)
		if o.OnThreadPurged != nil {
			o.OnThreadPurged(id)
		}
	}, relayPurge)
	return others
}

// startHTTP makes the static assets' hashes and the Echo instance with
// its routes.
func (s *Server) startHTTP(o Options) error {
	assets, err := hashAssets(o.Static)
	if err != nil {
		return err
	}
	s.assets = assets
	s.e = echo.New()
	if s.e.IPExtractor, err = limits.IPExtractor(o.TrustedProxies); err != nil {
		return err
	}
	s.e.HideBanner = true
	s.e.HidePort = true
	s.e.HTTPErrorHandler = s.errorHandler
	s.routes()
	return nil
}

// withDefaults fills in the options left at zero.
func (o Options) withDefaults() Options {
	if o.UndoWindow <= 0 {
		o.UndoWindow = defaultUndoWindow
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Storage == nil {
		o.Storage = noFaults{}
	}
	if o.RunsPerMinute <= 0 {
		o.RunsPerMinute = 30
	}
	if o.ThreadsPerMinute <= 0 {
		o.ThreadsPerMinute = 20
	}
	if o.MaxSocketsPerUser <= 0 {
		o.MaxSocketsPerUser = 16
	}
	if o.WSConnectsPerMinute <= 0 {
		o.WSConnectsPerMinute = 60
	}
	if o.MaxContentBytes <= 0 {
		o.MaxContentBytes = 100 << 10
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return o
}

type noFaults struct{}

func (noFaults) Fault() *models.StorageFault { return nil }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.e.ServeHTTP(w, r) }

// TokenUsageEnabled reports the effective token-usage setting.
func (s *Server) TokenUsageEnabled() bool { return s.settings.TokenUsage() }

// routes lists every route in one place: the middleware and the routes
// outside the app's session here, then the pages (pageRoutes) and the
// JSON API (apiRoutes), each listed whole just below.
func (s *Server) routes() {
	e := s.e
	e.Use(middleware.RequestID())
	e.Use(s.recoverPanics)
	e.Use(s.logRequests)
	e.Use(s.auth.CheckHost)
	e.Use(securityHeaders)
	e.Use(noStoreAPI)
	e.Use(limitBody(s.maxBody))

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	if s.metrics != nil && s.metricsToken != "" {
		e.GET("/metrics", echo.WrapHandler(s.metrics.Handler(s.metricsToken)))
	}
	e.GET("/static/*", s.serveStatic)

	app := e.Group("", s.auth.Authenticate, s.auth.CSRF)
	s.pageRoutes(app)
	s.apiRoutes(app.Group("/api"))
}

// pageRoutes lists the pages and the forms they post.
func (s *Server) pageRoutes(app *echo.Group) {
	app.GET("/setup", s.setupPage)
	app.POST("/setup", s.setupSubmit)
	app.GET("/login", s.loginPage)
	app.POST("/login", s.loginSubmit)
	app.GET("/signup", s.signupPage)
	app.POST("/signup", s.signupSubmit)
	app.POST("/logout", s.logoutSubmit)
	app.GET("/", s.threadListPage, auth.RequireUser)
	app.GET("/threads/new", s.threadNewPage, auth.RequireUser)
	app.GET("/threads/:id", s.threadPage, auth.RequireUser)
	app.GET("/threads/:id/messages", s.threadMessagesFragment, auth.RequireUser)
	app.POST("/threads/:id/rename", s.threadRenameSubmit, auth.RequireUser)
	app.POST("/threads/:id/delete", s.threadDeleteSubmit, auth.RequireUser)
	app.POST("/threads/:id/restore", s.threadRestoreSubmit, auth.RequireUser)
	app.GET("/settings", s.settingsPage, auth.RequireUser, auth.RequireSession)
	app.POST("/settings/preferences", s.preferencesSubmit, auth.RequireUser)
	app.POST("/settings/tokens", s.tokenCreateSubmit, auth.RequireUser, auth.RequireSession)
	app.POST("/settings/tokens/:id/delete", s.tokenDeleteSubmit, auth.RequireUser, auth.RequireSession)
	app.GET("/account", s.accountPage, auth.RequireUser, auth.RequireSession)
	app.POST("/account/password", s.passwordSubmit, auth.RequireUser, auth.RequireSession)
	app.POST("/account/sessions/delete", s.sessionsDeleteSubmit, auth.RequireUser, auth.RequireSession)
	app.POST("/account/sessions/:id/delete", s.sessionDeleteSubmit, auth.RequireUser, auth.RequireSession)
	app.GET("/admin", s.adminPage, auth.RequireAdmin)
	app.GET("/admin/usage", s.adminUsagePage, auth.RequireAdmin)
	app.POST("/admin/settings", s.adminSettingsSubmit, auth.RequireAdmin)
	app.POST("/admin/users", s.adminUserCreateSubmit, auth.RequireAdmin)
	app.POST("/admin/users/:id", s.adminUserUpdateSubmit, auth.RequireAdmin)
	app.POST("/admin/users/:id/delete", s.adminUserDeleteSubmit, auth.RequireAdmin)
}

// apiRoutes lists the JSON API (docs/API.md) under api, the /api group.
func (s *Server) apiRoutes(api *echo.Group) {
	api.POST("/auth/login", s.apiLogin)
	api.POST("/auth/logout", s.apiLogout, auth.RequireUser)
	api.GET("/auth/me", s.apiMe, auth.RequireUser)
	api.POST("/account/password", s.apiPassword, auth.RequireUser, auth.RequireSession)
	api.GET("/account/preferences", s.apiPreferences, auth.RequireUser)
	api.PUT("/account/preferences", s.apiPreferencesUpdate, auth.RequireUser)
	api.GET("/account/sessions", s.apiSessions, auth.RequireUser, auth.RequireSession)
	api.DELETE("/account/sessions", s.apiSessionsDelete, auth.RequireUser, auth.RequireSession)
	api.DELETE("/account/sessions/:id", s.apiSessionDelete, auth.RequireUser, auth.RequireSession)
	api.GET("/models", s.apiModels, auth.RequireUser)
	api.GET("/settings", s.apiSettings, auth.RequireUser)
	api.PUT("/admin/settings", s.apiAdminSettings, auth.RequireAdmin)
	api.GET("/admin/usage", s.apiAdminUsage, auth.RequireAdmin)
	api.GET("/admin/mcp", s.apiAdminMCP, auth.RequireAdmin)
	api.GET("/threads", s.apiThreads, auth.RequireUser)
	api.POST("/threads", s.apiThreadCreate, auth.RequireUser)
	api.GET("/threads/:id", s.apiThread, auth.RequireUser)
	api.GET("/threads/:id/messages", s.apiThreadMessages, auth.RequireUser)
	api.GET("/threads/:id/export", s.apiThreadExport, auth.RequireUser)
	api.PATCH("/threads/:id", s.apiThreadRename, auth.RequireUser)
	api.DELETE("/threads/:id", s.apiThreadDelete, auth.RequireUser)
	api.POST("/threads/:id/restore", s.apiThreadRestore, auth.RequireUser)
	api.POST("/threads/:id/runs", s.apiRunStart, auth.RequireUser)
	api.POST("/threads/:id/runs/:run_id/cancel", s.apiRunCancel, auth.RequireUser)
	api.POST("/threads/:id/runs/:run_id/retry", s.apiRunRetry, auth.RequireUser)
	api.POST("/threads/:id/messages/:message_id/edit", s.apiMessageEdit, auth.RequireUser)
	api.POST("/threads/:id/tasks/:task_id/cancel", s.apiTaskCancel, auth.RequireUser)
	api.GET("/threads/:id/events", s.apiEvents, auth.RequireUser)
	api.GET("/threads/:id/usage", s.apiUsage, auth.RequireUser)
	api.GET("/threads/:id/tool-images/:name", s.apiToolImage, auth.RequireUser)
	api.GET("/threads/:id/stream", s.stream, s.limitConnects, auth.RequireUser)
	api.GET("/tokens", s.apiTokens, auth.RequireUser, auth.RequireSession)
	api.POST("/tokens", s.apiTokenCreate, auth.RequireUser, auth.RequireSession)
	api.DELETE("/tokens/current", s.apiTokenRevokeSelf, auth.RequireUser)
	api.DELETE("/tokens/:id", s.apiTokenDelete, auth.RequireUser, auth.RequireSession)
	api.GET("/admin/users", s.apiAdminUsers, auth.RequireAdmin)
	api.POST("/admin/users", s.apiAdminUserCreate, auth.RequireAdmin)
	api.PATCH("/admin/users/:id", s.apiAdminUserUpdate, auth.RequireAdmin)
	api.DELETE("/admin/users/:id", s.apiAdminUserDelete, auth.RequireAdmin)
	api.Any("/*", func(echo.Context) error { return errNotFound("route") })
}

// limitBody caps every request body at max bytes, chunked ones included:
// a declared length over it is refused before anything is read, a chunked
// body once it passes max, both with 413 (docs/API.md). A form is parsed
// here, because the handlers' FormValue would drop the error and answer
// as if a field were missing.
func limitBody(max int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			if req.ContentLength > max {
				return errTooLarge("the request body is larger than 1 MB")
			}
			// The server's own writer, so that an overrun also closes the
			// connection instead of reading the rest.
			req.Body = http.MaxBytesReader(c.Response().Writer, req.Body, max)
			var err error
			switch mt, _, _ := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType)); mt {
			case echo.MIMEApplicationForm:
				err = req.ParseForm()
			case echo.MIMEMultipartForm:
				err = req.ParseMultipartForm(max)
			}
			if maxb := (*http.MaxBytesError)(nil); errors.As(err, &maxb) {
				return errTooLarge("the request body is larger than 1 MB")
			}
			return next(c)
		}
	}
}

// noStoreAPI keeps every JSON API answer, errors included, out of
// browser and proxy caches: they hold one user's data. Pages say the same
// in render.
func noStoreAPI(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if strings.HasPrefix(c.Request().URL.Path, "/api/") {
			c.Response().Header().Set("Cache-Control", "no-store")
		}
		return next(c)
	}
}

// securityHeaders sets the CSP and friends on every response: no inline
// script or style anywhere, no framing, no sniffing.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		return next(c)
	}
}

func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("handler panicked", "path", c.Request().URL.Path, "panic", p)
				err = &apiError{http.StatusInternalServerError, "internal", "something went wrong on our side"}
			}
		}()
		return next(c)
	}
}

func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		req := c.Request()
		status := c.Response().Status
		level := slog.LevelDebug
		if status >= 500 {
			level = slog.LevelError
		} else if status >= 400 {
			level = slog.LevelInfo
		}
		attrs := []any{"method", req.Method, "path", req.URL.Path, "status", status, "dur", time.Since(start).Round(time.Microsecond), "request_id", c.Response().Header().Get(echo.HeaderXRequestID)}
		if id := c.Param("id"); id != "" && (strings.HasPrefix(req.URL.Path, "/api/threads/") || strings.HasPrefix(req.URL.Path, "/threads/")) {
			attrs = append(attrs, "thread", id)
		}
		s.log.Log(req.Context(), level, "http", attrs...)
		return nil
	}
}

// render writes a templ component.
func (s *Server) render(c echo.Context, status int, comp templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().WriteHeader(status)
	return comp.Render(c.Request().Context(), c.Response())
}

// page is what every page needs.
func (s *Server) page(c echo.Context, title string) views.Page {
	p := views.Page{Title: title, Assets: s.assets, CSRF: s.auth.PageCSRF(c)}
	if u := auth.User(c); u != nil {
		p.User = &views.User{ID: u.ID, Email: u.Email, Admin: u.IsAdmin()}
		p.Theme = u.Theme
	}
	return p
}

// hashAssets maps each static file to a URL carrying its content hash.
func hashAssets(static fs.FS) (map[string]string, error) {
	out := map[string]string{}
	if static == nil {
		return out, nil
	}
	err := fs.WalkDir(static, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(static, path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[path] = "/static/" + path + "?v=" + hex.EncodeToString(sum[:6])
		return nil
	})
	return out, err
}

func (s *Server) serveStatic(c echo.Context) error {
	name := c.Param("*")
	if s.static == nil || name == "" || strings.Contains(name, "..") {
		return errNotFound("file")
	}
	if _, err := fs.Stat(s.static, name); err != nil {
		return errNotFound("file")
	}
	// Hashed URLs never change. ES modules import each other by plain
	// relative URL (/static/cards.js), which a new binary may change: those
	// are revalidated on every load, cheaply, by the same content hash as
	// an ETag (http.ServeFileFS answers a matching If-None-Match with 304).
	_, sum, _ := strings.Cut(s.assets[name], "?v=")
	if sum != "" {
		c.Response().Header().Set("ETag", `"`+sum+`"`)
	}
	if v := c.QueryParam("v"); v != "" && v == sum {
		c.Response().Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		c.Response().Header().Set("Cache-Control", "no-cache")
	}
	http.ServeFileFS(c.Response(), c.Request(), s.static, name)
	return nil
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers within its 2 s deadline whether herd can take work:
// 503 while the writer is retrying through a storage fault or the probe
// finds the disk full or the database locked, 200 again by itself once
// the fault passes (docs/DESIGN.md §10). It never queues behind the
// writer.
func (s *Server) readyz(c echo.Context) error {
	if s.draining.Load() {
		return errDraining
	}
	if err := s.storageReady(c.Request().Context()); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

// errDraining is readyz's answer once the instance is stopping: a proxy
// sends new work to another instance.
var errDraining = &apiError{http.StatusServiceUnavailable, "draining", "this instance is stopping and takes no new runs"}

// Drain marks the server as stopping (docs/OPERATIONS.md "Rolling
// upgrade"): /readyz fails from now on, so a proxy stops sending it
// requests, while its runs finish and its sockets stay open. The runtime
// refuses new runs itself (agent.Runtime.Drain).
func (s *Server) Drain() { s.draining.Store(true) }

// storageReady is nil when the database can be written now, else the 503
// that says why.
func (s *Server) storageReady(ctx context.Context) error {
	f := s.storage.Fault()
	if f == nil {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := s.store.Probe(ctx); err != nil {
			f, _ = models.AsStorageFault(err)
		}
	}
	if f == nil {
		return nil
	}
	return storageUnavailable(f)
}

func storageUnavailable(f *models.StorageFault) *apiError {
	return &apiError{http.StatusServiceUnavailable, "storage_unavailable",
		"herd cannot write to its database right now: " + f.Reason + "; try again shortly"}
}
