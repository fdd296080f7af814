// Command herd serves the herd web app: chat with a lead LLM agent that
// delegates bounded work to subagents. main is the one composition root:
// configuration, wiring and graceful shutdown.
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"herd/agent"
	"herd/agent/mcp"
	"herd/agent/tools"
	"herd/internal/config"
	"herd/internal/secrets"
	"herd/models"
	"herd/server"
	"herd/server/cluster"
	"herd/server/files"
	"herd/server/hub"
	"herd/server/limits"
	"herd/server/metrics"
	"herd/server/render"
	"herd/static"
)

// defaultConfig is config.example.yaml: the built-in defaults are the
// documented example, so the two cannot drift.
//
//go:embed config.example.yaml
var defaultConfig []byte

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses the command line strictly (an unknown sub-command or a stray
// argument is an error, never a server start), then runs the sub-command.
// serve blocks until ctx ends (a signal), then shuts down gracefully. It
// returns the process exit code: 0, 1 on failure, 2 on bad usage.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	name, args := splitCommand(args)
	switch name {
	case "version":
		if len(args) > 0 {
			fmt.Fprintf(stderr, "herd: version takes no arguments, got %q\n", args[0])
			return 2
		}
		fmt.Fprintln(stdout, versionLine())
		return 0
	case "help":
		printHelp(stdout)
		return 0
	case "migrate":
		return runMigrate(ctx, args, environ, stdout, stderr)
	case "serve", "backup":
	default:
		fmt.Fprintf(stderr, "herd: unknown command %q; herd --help lists the commands\n", name)
		return 2
	}
	fs, flags := newFlagSet(stderr)
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		printHelp(stdout)
		return 0
	} else if err != nil {
		fmt.Fprintln(stderr, "herd: run herd --help for the commands, flags and variables")
		return 2
	}
	if name == "serve" && fs.NArg() > 0 {
		fmt.Fprintf(stderr, "herd: unexpected argument %q; herd --help lists the commands\n", fs.Arg(0))
		return 2
	}
	path := flags.config
	if path == "" {
		if _, err := os.Stat("herd.yaml"); err == nil {
			path = "herd.yaml"
		}
	}
	cfg, err := config.Load(defaultConfig, path, environ, config.Overrides{Addr: flags.addr, DataDir: flags.dataDir})
	if err != nil {
		fmt.Fprintf(stderr, "herd: %v\n", err)
		return 2
	}
	if name == "backup" {
		return runBackup(ctx, cfg, fs.Args(), stderr)
	}
	log := newLogger(cfg.Log, stderr)
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	if err := serve(ctx, cfg, environ, log); err != nil {
		log.Error("herd stopped", "err", err)
		return 1
	}
	return 0
}

// runBackup is `herd backup FILE`: a consistent copy of the database,
// safe to take while herd serves. It reads the database read-only and
// refuses a data directory that has none.
func runBackup(ctx context.Context, cfg *config.Config, args []string, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: herd backup [--config FILE] [--data-dir DIR] BACKUP_FILE")
		return 2
	}
	if cfg.Database.Driver == config.DriverPostgres {
		// The file copy below is SQLite's; PostgreSQL has its own tool,
		// consistent while herd serves as well.
		fmt.Fprintln(stderr, "herd: herd backup copies the SQLite database, but this herd uses PostgreSQL (database.driver: postgres);")
		fmt.Fprintln(stderr, `herd: back it up with pg_dump, e.g. pg_dump --format=custom --file herd.dump "$HERD_DATABASE_DSN" (docs/OPERATIONS.md)`)
		return 1
	}
	if err := models.Backup(ctx, filepath.Join(cfg.Server.DataDir, "herd.db"), args[0]); err != nil {
		fmt.Fprintf(stderr, "herd: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "herd: backup written to %s\n", args[0])
	return 0
}

func newLogger(c config.LogConfig, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// serve builds herd's parts in dependency order (the store, the hub and
// the writer; the runtime; the server), serves until ctx ends and shuts
// down gracefully.
func serve(ctx context.Context, cfg *config.Config, environ []string, log *slog.Logger) error {
	// The lock comes before anything else: a second server must change
	// nothing, neither run crash recovery over a live server's runs nor
	// probe the sandbox and create its cgroups.
	lock, err := lockDataDir(cfg.Server.DataDir)
	if err != nil {
		return err
	}
	defer lock.release()
	if err := resolveSandbox(cfg, log); err != nil {
		return err
	}
	// The key to the stored secrets is checked before anything opens: a
	// key file others may read stops herd here (docs/OPERATIONS.md,
	// "Secrets at rest").
	box, err := secrets.Load(cfg.Server.DataDir, lookup(environ, config.EnvSecretKey), lookup(environ, config.EnvSecretKeyPrevious))
	if err != nil {
		return err
	}
	// Listen first: an address in use stops herd before it opens anything.
	lns, err := openListeners(cfg)
	if err != nil {
		return err
	}
	defer lns.close()
	b, err := openBase(ctx, cfg, log)
	if err != nil {
		if ctx.Err() != nil {
			// Stopped (SIGTERM, Ctrl-C) while waiting for the database:
			// nothing was started, so nothing failed.
			log.Info("herd stopped before it started", "err", err)
			return nil
		}
		return err
	}
	defer b.close()
	b.owner = lock
	rt, err := startRuntime(ctx, cfg, b, box, log)
	if err != nil {
		return err
	}
	srv, err := newServer(ctx, cfg, environ, b, rt, log)
	if err != nil {
		return err
	}
	if b.cluster != nil {
		// The cluster hands the other instances' notices to this
		// instance's runtime, sockets and deletes.
		h := cluster.Handlers{Runs: rt, Sockets: srv, Deletes: srv, Console: srv}
		if err := b.cluster.Start(ctx, lns.app.Addr().String(), h); err != nil {
			return err
		}
	}
	return listen(ctx, cfg, log, lns, srv, b, rt)
}

// listeners are herd's bound addresses: the app's, and the metrics
// address's unless metrics.addr is empty.
type listeners struct{ app, metrics net.Listener }

func openListeners(cfg *config.Config) (*listeners, error) {
	app, err := net.Listen("tcp", cfg.Server.Addr)
	if err != nil {
		return nil, fmt.Errorf("server.addr: %w", err)
	}
	lns := &listeners{app: app}
	if cfg.Metrics.Addr != "" {
		if lns.metrics, err = net.Listen("tcp", cfg.Metrics.Addr); err != nil {
			_ = app.Close()
			return nil, fmt.Errorf("metrics.addr: %w", err)
		}
	}
	return lns, nil
}

// close closes what serving has not: http.Server closes its listener on
// shutdown.
func (l *listeners) close() {
	for _, ln := range []net.Listener{l.app, l.metrics} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// base is what the runtime and the server are built on: the store, the
// hub that broadcasts what the writer commits, and the services both read.
type base struct {
	store    *models.Store
	settings *server.Settings
	metrics  *metrics.Metrics
	md       *render.Markdown
	hub      *hub.Hub
	writer   *models.Writer
	owner    *dataDirLock     // the data directory's lock, which records the address
	cluster  *cluster.Cluster // the other instances on PostgreSQL; nil on SQLite
	mcp      *mcp.Servers     // herd.yaml's and the console's MCP servers
	console  *server.Console  // the models (…) added in the admin console
}

func openBase(ctx context.Context, cfg *config.Config, log *slog.Logger) (*base, error) {
	store, waited, err := openStore(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	settings, err := server.NewSettings(ctx, store, cfg.TokenUsage.Enabled)
	if err == nil {
		err = settings.LoadBudgets(ctx, server.BudgetRule(cfg.Budgets.Default))
	}
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	// Pages resume their streams with it, so that one from before a
	// restore reloads (docs/DESIGN.md §11).
	gen, err := store.RestoreGeneration(ctx)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	labels := server.MetricLabels
	labels.NoticeRefusals = cluster.RefusalReasons
	reg := metrics.New(labels)
	md := render.NewMarkdown()
	h := hub.New(store, md, hub.Options{Logger: log, OnDrop: reg.OnDrop, TokenUsage: settings.TokenUsage, Generation: gen})
	b := &base{store: store, settings: settings, metrics: reg, md: md, hub: h}
	onCommit := h.OnCommit
	if cfg.Database.Driver == config.DriverPostgres {
		if b.cluster, err = newCluster(cfg, b, waited > 0, log); err != nil {
			_ = store.Close()
			return nil, err
		}
		onCommit = b.cluster.OnCommit
	}
	wo := models.WriterOptions{OnCommit: onCommit, OnBatch: reg.OnBatch, Logger: log}
	if b.cluster != nil {
		// Every write of a run checks that this instance still holds its
		// lease (docs/DESIGN.md §14).
		wo.Fence, wo.OnFenced = b.cluster.Fence, b.cluster.Fenced
	}
	b.writer = store.NewWriter(wo)
	return b, nil
}

// newCluster joins the instances on the PostgreSQL database: what this
// one commits and streams reaches their clients, and theirs its clients
// (docs/OPERATIONS.md "Several instances").
// afterOutage says herd had to wait for the database to start.
func newCluster(cfg *config.Config, b *base, afterOutage bool, log *slog.Logger) (*cluster.Cluster, error) {
	sec := func(n int) time.Duration { return time.Duration(n) * time.Second }
	return cluster.New(cluster.Options{
		InstanceID: uuid.NewString(), Store: b.store, Hub: b.hub, Settings: b.settings,
		Lease: sec(cfg.Cluster.LeaseSeconds), Renew: sec(cfg.Cluster.RenewSeconds), Logger: log,
		OnRefused: b.metrics.OnNoticeRefused, AfterOutage: afterOutage,
	})
}

// publisher is where runs stream text and progress: the hub, through the
// cluster when there is one.
func (b *base) publisher() agent.Publisher {
	if b.cluster != nil {
		return b.cluster
	}
	return b.hub
}

// peers are the other instances the server reaches through the cluster;
// nil (no interface holding a nil *Cluster) on SQLite.
func (b *base) peers() server.Peers {
	if b.cluster != nil {
		return b.cluster
	}
	return nil
}

// lease is the lease runs are claimed under, recorded on each as the
// instance executing it and its fencing epoch; nil for SQLite's single
// instance.
func (b *base) lease() func() models.Fence {
	if b.cluster != nil {
		return b.cluster.Fence
	}
	return nil
}

// openStore opens the configured database. A PostgreSQL that cannot be
// reached yet (started with herd at boot, or restarting) is waited for,
// up to database.connect_timeout_seconds, until ctx ends (a signal).
// waited says how long it waited (0 when it did not).
func openStore(ctx context.Context, cfg *config.Config, log *slog.Logger) (*models.Store, time.Duration, error) {
	if cfg.Database.Driver != config.DriverPostgres {
		s, err := models.Open(filepath.Join(cfg.Server.DataDir, "herd.db"), models.Options{Logger: log})
		return s, 0, err
	}
	timeout := time.Duration(cfg.Database.ConnectTimeoutSeconds) * time.Second
	store, waited, err := models.OpenPostgresWaiting(ctx, cfg.Database.DSN, models.Options{Logger: log}, timeout)
	if err != nil {
		return nil, 0, err
	}
	attrs := []any{"driver", "postgres", "database", store.Name()}
	if waited > 0 {
		attrs = append(attrs, "waited", waited.Round(100*time.Millisecond))
	}
	log.Info("database", attrs...)
	return store, waited, nil
}

// close stops the writer first: it commits what is still queued, so the
// store must stay open until it returns.
func (b *base) close() {
	b.closeMCP()
	b.writer.Close()
	b.cluster.Close()
	_ = b.store.Close()
}

// startRuntime builds the agent runtime on the configured models and
// tools, then closes the runs a crash interrupted.
func startRuntime(ctx context.Context, cfg *config.Config, b *base, box *secrets.Box, log *slog.Logger) (*agent.Runtime, error) {
	llms, err := startConsole(ctx, cfg, b, box, log)
	if err != nil {
		return nil, err
	}
	// The subagent types: herd.yaml's, and those added in the console.
	sub := cfg.Subagents
	if sub.Agents, err = b.console.Agents(ctx); err != nil {
		return nil, err
	}
	toolset, err := buildTools(cfg.Sandbox)
	if err != nil {
		return nil, err
	}
	// The MCP servers: herd.yaml's, and those added in the console, which
	// may come at any time (docs/DESIGN.md §12), so there is always a set.
	b.mcp = mcp.New(cfg.MCP.Servers, mcp.Options{Logger: log, OutputLimit: cfg.Sandbox.OutputLimitBytes, Version: version})
	if err := b.console.ReloadMCP(ctx, b.mcp.Set); err != nil {
		log.Error("console: MCP servers left out", "err", err)
	}
	b.mcp.Start()
	rt, err := agent.New(agent.Options{
		MCP:           b.mcp,
		Models:        llms,
		Lead:          cfg.Lead,
		Subagents:     sub,
		WorkspaceRoot: workspaceRoot(cfg),
		ToolImages:    toolImages(cfg),
		Tools:         toolset,
		Journal:       b.hub.Preparing(b.writer),
		History:       b.store,
		Publisher:     b.publisher(),
		Claims:        b.store,
		Lease:         b.lease(),
		Resume:        agent.ResumeConfig{Enabled: cfg.Runs.Resume, MaxResumes: cfg.Runs.MaxResumes},
		BudgetOf:      server.ResumedBudgets(b.settings, b.store),
		Logger:        log,

		// What the lead of a run without commands (host mode, not an
		// admin) tells the user.
		CommandsOffReason: "this server runs commands directly on its host, without a sandbox, so only admins may run them.",
	})
	if err != nil {
		return nil, err
	}
	b.metrics.Watch(metrics.Sources{Runtime: rt, Hub: b.hub, Writer: b.writer, MCP: b.mcp})
	if b.cluster != nil {
		// Other instances' runs are live: the cluster closes only those
		// of instances whose lease has run out, this one's old self's
		// included (Cluster.Start).
		return rt, nil
	}
	runs, err := b.store.RunningRuns(ctx)
	if err != nil {
		return nil, fmt.Errorf("crash recovery: %w", err)
	}
	resumed, closed, err := rt.Continue(ctx, b.store, runs, agent.ResumeRestart)
	if err != nil {
		return nil, fmt.Errorf("crash recovery: %w", err)
	}
	if resumed > 0 {
		log.Warn("crash recovery resumed interrupted runs", "runs", resumed)
	}
	if closed > 0 {
		log.Warn("crash recovery closed interrupted runs", "runs", closed)
	}
	return rt, nil
}

// startConsole builds the admin console over the config file's models
// and returns those runs start with: the file's, then the console's
// (docs/DESIGN.md §12). It first re-seals what a previous key sealed (a
// rotation, docs/OPERATIONS.md). A stored model that cannot be built is
// logged and left out, never a reason not to start.
func startConsole(ctx context.Context, cfg *config.Config, b *base, box *secrets.Box, log *slog.Logger) ([]*agent.Model, error) {
	seed, err := buildModels(cfg.Models, log)
	if err != nil {
		return nil, err
	}
	for _, m := range seed {
		m.Provider = b.metrics.Instrument(m.Config.Name, m.Provider)
	}
	b.console = server.NewConsole(server.ConsoleOptions{
		Store: b.store, Secrets: box, Seed: seed, Agents: cfg.Subagents.Agents,
		FileLimits: server.ConsoleLimits{RunsPerMinute: cfg.Auth.RunsPerMinute, Limits: agent.Limits{
			MaxTurns: cfg.Lead.MaxTurns, MaxActiveRunsPerUser: cfg.Lead.MaxActiveRunsPerUser,
			MaxRunning: cfg.Subagents.MaxRunning, MaxRunningPerUser: cfg.Subagents.MaxRunningPerUser,
		}},
		Build: modelBuilder(log, b.metrics.Instrument), Defaults: config.FillModelDefaults, Check: checkModel,
		CheckAgent: checkAgent, CheckMCP: checkMCP, MCP: cfg.MCP.Servers,
	})
	n, err := b.console.Reseal(ctx)
	if err != nil {
		return nil, fmt.Errorf("re-seal the stored secrets with the new key: %w", err)
	}
	if n > 0 {
		log.Info("stored secrets re-sealed with the current key", "entries", n)
	}
	llms, err := b.console.Built(ctx)
	if llms == nil {
		return nil, err
	}
	if err != nil {
		log.Error("a model added in the admin console is left out", "err", err)
	}
	return llms, nil
}

// workspaceRoot is where thread workspaces live: workspaces.dir, or
// "workspaces" in the data directory.
func workspaceRoot(cfg *config.Config) string {
	if cfg.Workspaces.Dir != "" {
		return cfg.Workspaces.Dir
	}
	return filepath.Join(cfg.Server.DataDir, "workspaces")
}

// toolImages keeps the images tools return beside the workspaces, in
// workspaces.dir/.tool-images, which every instance on one database shares
// (docs/OPERATIONS.md "Several instances"): a page on any instance shows
// an image a run on another kept. Files rather than database rows: an
// image is up to 2 MiB, read by the browser with conditional requests,
// and kept out of the database, its backups and its write path. Images an
// older herd kept in DATA_DIR/tool-images are still served from there.
// No thread is named .tool-images (thread ids are UUIDs), and a sandbox
// sees only its own thread's workspace.
func toolImages(cfg *config.Config) *agent.ToolImages {
	return agent.NewToolImages(filepath.Join(workspaceRoot(cfg), ".tool-images"), filepath.Join(cfg.Server.DataDir, "tool-images"))
}

// resolveSandbox turns sandbox.mode auto into the mode this machine
// supports, stores it in cfg (host mode means only admins' runs get bash),
// applies the start-up rule of docs/DESIGN.md §4 and logs in one line
// what the sandbox enforces and who can run commands.
func resolveSandbox(cfg *config.Config, log *slog.Logger) error {
	resolved, report, err := tools.Resolve(cfg.Sandbox)
	if err != nil {
		return err
	}
	cfg.Sandbox = resolved
	if err := tools.CheckBashAllowed(cfg.Sandbox, cfg.Server.Addr, cfg.Server.PublicURL); err != nil {
		return err
	}
	log.Info("sandbox", report.Attrs()...)
	if report.Warning != "" {
		log.Warn(report.Warning)
	}
	return nil
}

// buildTools is the workspace tools, and bash when the sandbox allows it.
func buildTools(sandbox tools.SandboxConfig) ([]tools.Tool, error) {
	toolset := tools.WorkspaceTools(sandbox)
	if sandbox.AllowHostBash || sandbox.Mode == tools.SandboxBwrap {
		bash, err := tools.NewBash(sandbox)
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		toolset = append(toolset, bash)
	}
	return toolset, nil
}

// newServer builds the HTTP server, makes sure the configured admin
// exists and drops expired sessions.
func newServer(ctx context.Context, cfg *config.Config, environ []string, b *base, rt *agent.Runtime, log *slog.Logger) (*server.Server, error) {
	srv, err := server.New(server.Options{
		Store:               b.store,
		Runtime:             rt,
		Hub:                 b.hub,
		Settings:            b.settings,
		Console:             b.console,
		Markdown:            b.md,
		Metrics:             b.metrics,
		Storage:             b.writer,
		MCP:                 b.mcp,
		Static:              static.FS,
		Logger:              log,
		PublicURL:           cfg.Server.PublicURL,
		AllowedHosts:        cfg.Server.AllowedHosts,
		TrustedProxies:      cfg.Server.TrustedProxies,
		AllowSignup:         cfg.Auth.AllowSignup,
		OIDCProviders:       cfg.Auth.OIDC.Providers,
		LocalPasswords:      cfg.Auth.LocalPasswords,
		SessionTTL:          time.Duration(cfg.Auth.SessionHours) * time.Hour,
		LoginPerMinute:      cfg.Auth.LoginAttemptsPerMinute,
		RunsPerMinute:       cfg.Auth.RunsPerMinute,
		MetricsToken:        cfg.Metrics.Token,
		ThreadsPerMinute:    cfg.Auth.ThreadsPerMinute,
		MaxSocketsPerUser:   cfg.Server.MaxSocketsPerUser,
		WSConnectsPerMinute: cfg.Server.WSConnectsPerMinute,
		Cluster:             b.peers(),
		Files: files.New(files.Options{
			Root: workspaceRoot(cfg), Limits: cfg.Sandbox.Limits, Owner: cfg.Sandbox.RunAs,
			MaxUploadMB: cfg.Files.MaxUploadMB, Logger: log,
		}),
		ReadTimeout:    time.Duration(cfg.Server.ReadTimeoutSeconds) * time.Second,
		WriteTimeout:   time.Duration(cfg.Server.WriteTimeoutSeconds) * time.Second,
		AuditRetention: time.Duration(cfg.Audit.RetentionDays) * 24 * time.Hour,
		// On the host a command runs as the server's own user, with its
		// environment and data: a trust boundary only admins may cross.
		CommandsAdminOnly: cfg.Sandbox.Mode == tools.SandboxHost,
	})
	if err != nil {
		return nil, err
	}
	if err := srv.EnsureAdmin(ctx, lookup(environ, config.EnvAdminEmail), lookup(environ, config.EnvAdminPassword)); err != nil {
		return nil, err
	}
	if err := b.store.DeleteExpiredSessions(ctx); err != nil {
		return nil, err
	}
	if err := srv.ResumeDeletes(ctx); err != nil {
		return nil, err
	}
	return srv, nil
}

// listen serves srv on the app's listener, and /metrics on the metrics
// listener when there is one, until ctx ends or serving fails, then shuts
// down.
func listen(ctx context.Context, cfg *config.Config, log *slog.Logger, lns *listeners, srv *server.Server, b *base, rt *agent.Runtime) error {
	app := newHTTPServer(lns.app, cfg.Server, cfg.Server.MaxConnections, srv, log)
	b.metrics.WatchConns(app.limit)
	servers := []*httpServer{app}
	if lns.metrics != nil {
		servers = append(servers, newHTTPServer(lns.metrics, cfg.Server, metricsConnections, metricsMux(b.metrics, cfg.Metrics.Token), log))
		log.Info("metrics are listening", "url", "http://"+lns.metrics.Addr().String()+"/metrics", "token", cfg.Metrics.Token != "")
	}
	served := make(chan error, len(servers))
	for _, s := range servers {
		go func() { served <- s.srv.Serve(s.limit) }()
	}
	if err := b.owner.record(lns.app.Addr().String()); err != nil {
		log.Warn("could not record the address in the data directory's lock file", "err", err)
	}
	log.Info("herd is listening", "url", "http://"+lns.app.Addr().String(), "data_dir", cfg.Server.DataDir, "models", len(rt.Models()))
	announceSetup(ctx, cfg, log, srv, lns.app.Addr())

	select {
	case <-ctx.Done():
		drain(cfg, log, srv, rt, servers)
	case err := <-served:
		served <- err
	}
	return shutdown(cfg, log, b, rt, srv, servers, served)
}

// drain lets the running runs finish, for up to server.drain_seconds,
// before shutdown interrupts the rest (docs/OPERATIONS.md "Rolling
// upgrade"): /readyz fails and new runs are refused, so a proxy sends new
// work to another instance, and kept-alive connections close after their
// next answer, so a client's next request is routed afresh. Sockets stay
// open and see their runs end. A second signal ends the wait at once.
func drain(cfg *config.Config, log *slog.Logger, srv *server.Server, rt *agent.Runtime, servers []*httpServer) {
	srv.Drain()
	for _, s := range servers {
		s.srv.SetKeepAlivesEnabled(false)
	}
	grace := time.Duration(cfg.Server.DrainSeconds) * time.Second
	runs := rt.ActiveRuns()
	if grace <= 0 || runs == 0 {
		return
	}
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	log.Info("stopping: no new runs; the running ones may finish (send the signal again to interrupt them now)", "runs", runs, "drain", grace)
	drained := make(chan error, 1)
	go func() { drained <- rt.Drain(ctx) }()
	select {
	case err := <-drained:
		if err != nil {
			log.Warn("stopping: runs still going after server.drain_seconds are interrupted", "runs", rt.ActiveRuns())
		} else {
			log.Info("stopping: every run has finished")
		}
	case <-again:
		cancel()
		<-drained
		log.Warn("stopping: a second signal interrupts the runs still going", "runs", rt.ActiveRuns())
	}
}

// announceSetup prints the one-time set-up link while no user exists:
// only who can read herd's output can create the first admin.
func announceSetup(ctx context.Context, cfg *config.Config, log *slog.Logger, srv *server.Server, addr net.Addr) {
	base := cfg.Server.PublicURL
	if base == "" {
		base = "http://" + server.BrowsableAddr(addr.String())
	}
	link, err := srv.SetupURL(ctx, base)
	if err != nil {
		log.Error("set-up link", "err", err)
	} else if link != "" {
		log.Info("no account yet: open " + link + " to create the admin (a one-time link; a restart prints a new one)")
	}
}

// metricsConnections caps the metrics listener: a scraper or two.
const metricsConnections = 16

// httpServer is one listener and the server on it.
type httpServer struct {
	srv   *http.Server
	limit *limits.ConnLimit
}

// newHTTPServer builds a server on ln with the configured timeouts and at
// most maxConns connections (docs/OPERATIONS.md "Connection limits"). The
// timeouts bound plain requests only: a WebSocket upgrade clears the
// connection's deadlines and the hub sets its own (server/hub/hub.go), and a
// hijacked socket keeps its slot until it closes.
func newHTTPServer(ln net.Listener, c config.ServerConfig, maxConns int, h http.Handler, log *slog.Logger) *httpServer {
	sec := func(n int) time.Duration { return time.Duration(n) * time.Second }
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: sec(c.ReadHeaderTimeoutSeconds),
		ReadTimeout:       sec(c.ReadTimeoutSeconds),
		WriteTimeout:      sec(c.WriteTimeoutSeconds),
		IdleTimeout:       sec(c.IdleTimeoutSeconds),
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	limit := limits.LimitConns(ln, maxConns)
	limit.Install(srv, server.DefaultMaxBodyBytes)
	return &httpServer{srv: srv, limit: limit}
}

// metricsMux serves /metrics alone, behind the token when one is set.
func metricsMux(m *metrics.Metrics, token string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler(token))
	return mux
}

func shutdown(cfg *config.Config, log *slog.Logger, b *base, rt *agent.Runtime, srv *server.Server, servers []*httpServer, served <-chan error) error {
	// Graceful shutdown (docs/DESIGN.md §11): refuse new runs and release
	// the running ones for resuming (or, with runs.resume off, cancel them
	// while sockets still carry their terminal frames), then close the
	// sockets with going-away, stop HTTP and flush the database.
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.Server.ShutdownTimeoutSeconds)*time.Second)
	defer cancel()
	var errs []error
	if cfg.Runs.Resume {
		// The runs outlive the stop: nothing more of them is written, and
		// the next start (or, on PostgreSQL, another instance, once this
		// one retires) resumes them from there.
		n, err := rt.Release(sctx)
		if err != nil {
			errs = append(errs, err)
		}
		if n > 0 {
			log.Info("stopping: runs released, to resume at the next start or on another instance", "runs", n)
		}
	} else if err := rt.Shutdown(sctx); err != nil {
		errs = append(errs, err)
	}
	b.closeMCP()
	if err := b.hub.Close(sctx); err != nil {
		errs = append(errs, err)
	}
	for _, s := range servers {
		if err := s.srv.Shutdown(sctx); err != nil {
			errs = append(errs, err)
		}
	}
	for range servers {
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	srv.Close()
	b.writer.Close()
	return errors.Join(errs...)
}

// closeMCP ends every MCP session, stopping stdio servers' processes,
// once no run can call them.
func (b *base) closeMCP() {
	if b.mcp != nil {
		b.mcp.Close()
	}
}

func lookup(environ []string, key string) string {
	for i := len(environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(environ[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}
