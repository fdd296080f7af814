// Package server is herd's HTTP side: every route (routes.go), the
// middleware (middleware.go) and thin handlers by resource (threads.go,
// runs.go, answers.go, account.go, admin.go, tokens.go, …): parse, call
// one thing, respond. errors.go maps every package's errors to a status.
// Who a request is comes from server/auth, the live frames from
// server/hub, the limits from server/limits; main composes them.
package server

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"herd/agent"
	"herd/internal/lapse"
	"herd/models"
	"herd/server/auth"
	"herd/server/files"
	"herd/server/hub"
	"herd/server/limits"
	"herd/server/metrics"
	"herd/server/purge"
	"herd/server/render"
	"herd/server/sso"
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

	// Console keeps the models (…) an admin adds in the console and
	// applies them to Runtime; required.
	Console *Console

	// MCP holds the MCP servers: reported on the admin page and
	// /api/admin/mcp, changed and tested by the console; nil: none can
	// be (tests).
	MCP MCPServers

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
	TrustedProxies []string
	// OIDCProviders are the single sign-on providers (auth.oidc), and
	// LocalPasswords who may still sign in with a password (sso.Passwords*;
	// "" = all).
	OIDCProviders      []sso.ProviderConfig
	LocalPasswords     string
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
	// Files serves the threads' workspace files (uploads, downloads,
	// zips); required.
	Files *files.Workspaces
	// AuditRetention is how long the audit log keeps an entry; 0 keeps
	// every entry (config audit.retention_days).
	AuditRetention time.Duration
	// OnAuditPurged, when set, is told how many entries each purge of
	// the audit log removed (tests wait on it).
	OnAuditPurged func(removed int64)
	// ReadTimeout and WriteTimeout are the HTTP server's: an upload or a
	// download sets its deadline that far ahead again as it moves, so
	// only one that stalls is cut. 0: 60 s and 120 s.
	ReadTimeout, WriteTimeout time.Duration
}

// Metrics is what the server takes of the registry (metrics.Metrics):
// /metrics on the main address, and its password checks counted.
type Metrics interface {
	Handler(token string) http.Handler
	PasswordChecked(kind string)
	// AuditFailed counts an audit entry that could not be written.
	AuditFailed()
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
	e            *echo.Echo
	store        *models.Store
	rt           *agent.Runtime
	runs         runControl // rt's runs, or every instance's (Cluster)
	hub          *hub.Hub
	pages        threadPages // hub, or every instance's (Cluster)
	settings     *Settings
	metrics      Metrics
	metricsToken string
	storage      interface{ Fault() *models.StorageFault }
	rejoining    func() bool // the cluster is rejoining (Peers.Rejoining); nil on one instance
	log          *slog.Logger
	// storageFails logs the requests that fail on storage once a lapse
	// and a count a minute: in an outage every open page retries (issue
	// 24).
	storageFails   *lapse.Lapse
	now            func() time.Time
	md             *render.Markdown
	assets         map[string]string
	static         fs.FS
	auth           *auth.Service
	sso            *sso.Service
	publicURL      string
	localPasswords string
	allowSignup    bool
	sockets        *hub.Sockets
	runLimiter     *limits.Limiter
	threadLimiter  *limits.Limiter
	connLimiter    *limits.Limiter
	socketCap      *limits.SocketCounter
	console        *Console
	maxContent     int
	maxBody        int64
	adminCommands  bool // CommandsAdminOnly
	purger         *purge.Purger
	titles         *titles.Titler
	draining       atomic.Bool // Drain: readyz fails
	undoWindow     time.Duration
	mcp            MCPServers
	files          *files.Workspaces
	readTimeout    time.Duration
	writeTimeout   time.Duration
	// instance is the cluster's id of this instance ("" alone), which
	// its audit entries carry.
	instance string
	// auditFailures counts the audit entries that failed to be written
	// (audit).
	auditFailures atomic.Int64
	retention     *auditRetention
}

// New builds the server and its routes.
func New(o Options) (*Server, error) {
	if o.Settings == nil || o.Markdown == nil || o.Files == nil {
		return nil, errors.New("server: Options.Settings, Options.Markdown and Options.Files are required")
	}
	o = o.withDefaults()
	s := &Server{
		store:          o.Store,
		rt:             o.Runtime,
		hub:            o.Hub,
		settings:       o.Settings,
		metrics:        o.Metrics,
		metricsToken:   o.MetricsToken,
		storage:        o.Storage,
		log:            o.Logger,
		storageFails:   lapse.New(o.Logger, "requests fail on storage; answering 503"),
		now:            o.Now,
		md:             o.Markdown,
		static:         o.Static,
		allowSignup:    o.AllowSignup && sso.PasswordAllowed(o.LocalPasswords, false),
		publicURL:      strings.TrimRight(o.PublicURL, "/"),
		localPasswords: cmp.Or(o.LocalPasswords, sso.PasswordsAll),
		runLimiter:     limits.NewLimiter(o.RunsPerMinute, o.Now),
		threadLimiter:  limits.NewLimiter(o.ThreadsPerMinute, o.Now),
		connLimiter:    limits.NewLimiter(o.WSConnectsPerMinute, o.Now),
		socketCap:      limits.NewSocketCounter(o.MaxSocketsPerUser),
		maxContent:     o.MaxContentBytes,
		maxBody:        o.MaxBodyBytes,
		adminCommands:  o.CommandsAdminOnly,
		mcp:            o.MCP,
		runs:           o.Runtime,
		pages:          o.Hub,
		files:          o.Files,
		readTimeout:    o.ReadTimeout,
		writeTimeout:   o.WriteTimeout,
	}
	others := s.buildShared(o)
	s.undoWindow = o.UndoWindow
	s.titles = titles.New(o.Runtime, o.Store, s.pages, others, s.log)
	if s.console = o.Console; s.console == nil {
		return nil, errors.New("server: a console is required")
	}
	// The limits the console stored win over herd.yaml's from the start.
	if err := s.console.ReloadLimits(context.Background(), s.applyLimits); err != nil {
		return nil, err
	}
	if s.auth = o.Auth; s.auth == nil {
		var err error
		if s.auth, err = auth.New(context.Background(), authOptions(o, s.metrics)); err != nil {
			return nil, err
		}
	}
	s.sso = sso.New(sso.Options{
		Providers: o.OIDCProviders, Store: o.Store, SecureCookies: strings.HasPrefix(o.PublicURL, "https://"),
		Now: o.Now, Logger: o.Logger,
	})
	if err := s.startHTTP(o); err != nil {
		return nil, err
	}
	s.retention = s.keepAudit(o.AuditRetention, o.OnAuditPurged)
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
	s.retention.Close()
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
		s.rejoining = c.Rejoining
		s.instance = c.ID()
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
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 60 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 120 * time.Second
	}
	return o
}

type noFaults struct{}

func (noFaults) Fault() *models.StorageFault { return nil }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.e.ServeHTTP(w, r) }

// TokenUsageEnabled reports the effective token-usage setting.
func (s *Server) TokenUsageEnabled() bool { return s.settings.TokenUsage() }

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
		p.EnterKey = u.EnterKey
	}
	return p
}
