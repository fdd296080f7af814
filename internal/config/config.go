// Package config loads herd's configuration (docs/DESIGN.md §12): the built-in
// defaults, then an optional YAML file, then HERD_* environment variables,
// then the command-line flags, each layer overriding the one before.
package config

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"

	"github.com/goccy/go-yaml"

	"herd/agent"
	"herd/agent/mcp"
	"herd/agent/tools"
	"herd/server/sso"
)

// Config is herd's effective configuration. config.example.yaml documents
// every key and its default.
type Config struct {
	Server     ServerConfig          `yaml:"server"`
	Database   DatabaseConfig        `yaml:"database"`
	Cluster    ClusterConfig         `yaml:"cluster"`
	Runs       RunsConfig            `yaml:"runs"`
	Workspaces WorkspacesConfig      `yaml:"workspaces"`
	Files      FilesConfig           `yaml:"files"`
	Log        LogConfig             `yaml:"log"`
	Auth       AuthConfig            `yaml:"auth"`
	TokenUsage TokenUsageConfig      `yaml:"token_usage"`
	Audit      AuditConfig           `yaml:"audit"`
	Budgets    BudgetsConfig         `yaml:"budgets"`
	Metrics    MetricsConfig         `yaml:"metrics"`
	Models     []agent.ModelConfig   `yaml:"models"`
	Lead       agent.LeadConfig      `yaml:"lead"`
	Subagents  agent.SubagentsConfig `yaml:"subagents"`
	Sandbox    tools.SandboxConfig   `yaml:"sandbox"`
	MCP        mcp.Config            `yaml:"mcp"`

	// Warnings are problems Load tolerated (a HERD_ variable that resembles
	// no key), for main to log once the logger exists.
	Warnings []string `yaml:"-"`
}

// ServerConfig is where and how herd serves.
type ServerConfig struct {
	Addr                   string `yaml:"addr"`
	DataDir                string `yaml:"data_dir"`
	PublicURL              string `yaml:"public_url"`
	ShutdownTimeoutSeconds int    `yaml:"shutdown_timeout_seconds"`
	// DrainSeconds is how long a stop lets running runs finish before
	// interrupting them (docs/OPERATIONS.md "Rolling upgrade").
	DrainSeconds int `yaml:"drain_seconds"`
	// AllowedHosts are further Host header names herd answers to, beside
	// the loopback names and public_url's host (docs/OPERATIONS.md).
	AllowedHosts []string `yaml:"allowed_hosts"`
	// TrustedProxies are the CIDRs of reverse proxies whose
	// X-Forwarded-For herd believes for the client's address.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// The HTTP server's limits (docs/OPERATIONS.md "Connection limits").
	ReadHeaderTimeoutSeconds int `yaml:"read_header_timeout_seconds"`
	ReadTimeoutSeconds       int `yaml:"read_timeout_seconds"`
	WriteTimeoutSeconds      int `yaml:"write_timeout_seconds"`
	IdleTimeoutSeconds       int `yaml:"idle_timeout_seconds"`
	MaxConnections           int `yaml:"max_connections"`
	MaxSocketsPerUser        int `yaml:"max_sockets_per_user"`
	WSConnectsPerMinute      int `yaml:"ws_connects_per_minute"`
}

// Database drivers (docs/OPERATIONS.md "PostgreSQL").
const (
	DriverSQLite   = "sqlite"
	DriverPostgres = "postgres"
)

// DatabaseConfig is the store: SQLite in server.data_dir (the default), or
// the PostgreSQL database DSN names, which herd waits for at start for up
// to ConnectTimeoutSeconds while it cannot be reached.
type DatabaseConfig struct {
	Driver                string `yaml:"driver"`
	DSN                   string `yaml:"dsn"`
	ConnectTimeoutSeconds int    `yaml:"connect_timeout_seconds"`
}

// ClusterConfig tunes the instances sharing one PostgreSQL database
// (docs/OPERATIONS.md "Several instances"): each renews a lease every
// RenewSeconds that lasts LeaseSeconds; an instance whose lease ran out
// is dead, and a live one closes its runs.
type ClusterConfig struct {
	LeaseSeconds int `yaml:"lease_seconds"`
	RenewSeconds int `yaml:"renew_seconds"`
}

// RunsConfig is what becomes of a run its process left running (a crash,
// a deploy, a lost instance): Resume continues it from its checkpoint
// (docs/DESIGN.md §11), at most MaxResumes times (a crash loop then ends
// it failed); without Resume it is closed, interrupted.
type RunsConfig struct {
	Resume     bool `yaml:"resume"`
	MaxResumes int  `yaml:"max_resumes"`
}

// WorkspacesConfig is where thread workspaces live: Dir, or "workspaces"
// in server.data_dir when empty. Several instances need one shared Dir.
type WorkspacesConfig struct {
	Dir string `yaml:"dir"`
}

// FilesConfig bounds what users upload into a workspace through the
// files API (docs/API.md "Files"), beside the workspace's limits
// (sandbox.limits): MaxUploadMB is one file's most, in MiB.
type FilesConfig struct {
	MaxUploadMB int `yaml:"max_upload_mb"`
}

// MetricsConfig is where /metrics is served: on its own address (Addr,
// loopback by default; "" for none), and on the main address only for a
// bearer Token.
type MetricsConfig struct {
	Addr  string `yaml:"addr"`
	Token string `yaml:"token"`
}

// LogConfig sets the slog level (debug, info, warn, error) and handler
// (text, json).
type LogConfig struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// AuthConfig governs sign-up, sessions, the login rate limit and single
// sign-on.
type AuthConfig struct {
	AllowSignup            bool `yaml:"allow_signup"`
	SessionHours           int  `yaml:"session_hours"`
	LoginAttemptsPerMinute int  `yaml:"login_attempts_per_minute"`
	RunsPerMinute          int  `yaml:"runs_per_minute"`
	ThreadsPerMinute       int  `yaml:"threads_per_minute"`
	// LocalPasswords is who may sign in with a password: all, admins or
	// off (sso.PasswordsAll, …).
	LocalPasswords string     `yaml:"local_passwords"`
	OIDC           OIDCConfig `yaml:"oidc"`
}

// OIDCConfig lists the OpenID Connect providers users sign in with
// (docs/OPERATIONS.md "Single sign-on").
type OIDCConfig struct {
	Providers []sso.ProviderConfig `yaml:"providers"`
}

// AuditConfig is the audit log's (docs/OPERATIONS.md "Audit log").
type AuditConfig struct {
	// RetentionDays is how long an entry is kept; 0 keeps them all.
	RetentionDays int `yaml:"retention_days"`
}

// TokenUsageConfig is the initial token-usage display setting; the admin's
// toggle, once used, is stored in the database and wins.
type TokenUsageConfig struct {
	Enabled bool `yaml:"enabled"`
}

// BudgetsConfig seeds the token budgets: Default holds for every user
// until an admin saves budgets on /admin/usage or PUT /api/admin/budgets,
// which are stored in the database and win (docs/DESIGN.md §6).
type BudgetsConfig struct {
	Default BudgetRule `yaml:"default"`
}

// BudgetRule is a token budget: Tokens per Period (day, week, month: UTC
// calendar periods, weeks from Monday); Tokens 0 is no budget.
type BudgetRule struct {
	Tokens int64  `yaml:"tokens"`
	Period string `yaml:"period"`
}

// Overrides are the command-line flags, which win over every other layer.
type Overrides struct {
	Addr    string // --addr; "" = not given
	DataDir string // --data-dir; "" = not given
	// NonKeyEnv names further HERD_ variables that main reads itself, so
	// Load does not reject them as mistyped keys. EnvAdminEmail and
	// EnvAdminPassword are always accepted.
	NonKeyEnv []string
}

// HERD_ variables that are not config keys: main reads them to create the
// admin at start on an empty instance (docs/DESIGN.md §10).
const (
	EnvAdminEmail    = "HERD_ADMIN_EMAIL"
	EnvAdminPassword = "HERD_ADMIN_PASSWORD"
	// EnvSecretKey is the key that seals stored secrets (base64 of 32
	// bytes), EnvSecretKeyPrevious the one before a rotation
	// (internal/secrets, docs/OPERATIONS.md "Secrets at rest").
	EnvSecretKey         = "HERD_SECRET_KEY"
	EnvSecretKeyPrevious = "HERD_SECRET_KEY_PREVIOUS"
)

// Load builds the effective configuration. defaults is the embedded
// config.example.yaml; path is the YAML file to read ("" for none);
// environ holds KEY=VALUE pairs (os.Environ()), read for HERD_* overrides
// and for api_key references; o holds the flags.
//
// Merging: a mapping in a later layer sets only the keys it names, so
// server.addr in the file leaves server.data_dir at its default. A list
// (models, tools) or a map (subagents.agents) is a single value: a later
// layer that gives one replaces it whole, so a file that defines its own
// agents does not inherit the demo researcher, and one that lists its
// models gets exactly those. null leaves a section untouched and sets any
// other key to its zero value (a pointer key to unset).
//
// Environment: every key path present after the file, list entries and map
// keys included, can be overridden by HERD_ + the path in upper case with
// "." and "-" turned into "_" (HERD_MODELS_0_API_KEY,
// HERD_SUBAGENTS_AGENTS_RESEARCHER_MODEL). A value is read as YAML into
// the key's type, so a list or map can be given whole, except that a
// string key takes the value verbatim. A HERD_ variable that names no key
// is an error when it is near one (within two edits of a real variable,
// or an entry missing from a list or map) and a warning in
// Config.Warnings otherwise, unless it is listed in Overrides.NonKeyEnv,
// is one of the Env* names, or is referenced by an api_key.
//
// An api_key of exactly $NAME or ${NAME} is read from environ. Load then
// fills model defaults (model = name; for openai base_url, stream_usage,
// max_retries, timeout_seconds; for demo usage) and validates everything.
// Subagent defaults stay unset: their precedence belongs to the runtime.
// A subagent model that comes from the built-in defaults but names a model
// the configuration no longer has (the demo researcher once the models are
// replaced) becomes inherit rather than an error the user never wrote.
//
// The error joins every problem found, each naming its source and key
// path; no error ever holds an api key.
func Load(defaults []byte, path string, environ []string, o Overrides) (*Config, error) {
	var file []byte
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		file = b
	}
	return load(defaults, path, file, environ, o)
}

func load(defaults []byte, path string, file []byte, environ []string, o Overrides) (*Config, error) {
	l := &loader{failed: map[string]bool{}, origin: map[string]source{}}
	var c Config
	root := reflect.ValueOf(&c).Elem()
	l.decodeDocument(root, defaults, source{name: defaultsSource})
	if path != "" {
		l.decodeDocument(root, file, source{name: path})
	}
	env := parseEnviron(environ)
	unmatched := l.applyEnv(root, env)
	l.applyFlags(&c, o)
	refs := l.expandAPIKeys(&c, env)
	maps.Copy(refs, l.expandMCPSecrets(&c, env))
	maps.Copy(refs, l.expandClientSecrets(&c, env))
	allowed := append([]string{EnvAdminEmail, EnvAdminPassword, EnvSecretKey, EnvSecretKeyPrevious}, o.NonKeyEnv...)
	for _, u := range unmatched {
		switch {
		case slices.Contains(allowed, u.name) || refs[u.name]:
		case u.near:
			l.errs = append(l.errs, u.err)
		default:
			c.Warnings = append(c.Warnings, u.err.Error()+"; ignored")
		}
	}
	fillModelDefaults(&c)
	fillMCPDefaults(&c)
	l.inheritDanglingDefaultModels(&c)
	l.validate(&c)
	if err := l.err(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (l *loader) applyFlags(c *Config, o Overrides) {
	if o.Addr != "" {
		c.Server.Addr = o.Addr
		l.setOrigin("server.addr", source{name: "--addr", key: "server.addr"})
	}
	if o.DataDir != "" {
		c.Server.DataDir = o.DataDir
		l.setOrigin("server.data_dir", source{name: "--data-dir", key: "server.data_dir"})
	}
}

const redactedKey = "[redacted]"

// redacted returns a copy of c whose api keys are masked, for any output.
func (c Config) redacted() Config {
	c.Models = slices.Clone(c.Models)
	for i := range c.Models {
		if c.Models[i].APIKey != "" {
			c.Models[i].APIKey = redactedKey
		}
	}
	c.MCP.Servers = redactMCP(c.MCP.Servers)
	c.Auth.OIDC.Providers = slices.Clone(c.Auth.OIDC.Providers)
	for i := range c.Auth.OIDC.Providers {
		if c.Auth.OIDC.Providers[i].ClientSecret != "" {
			c.Auth.OIDC.Providers[i].ClientSecret = redactedKey
		}
	}
	return c
}

// String renders c as YAML with api keys masked, so printing a Config with
// %v cannot leak a key.
func (c Config) String() string {
	b, err := yaml.Marshal(c.redacted())
	if err != nil {
		return fmt.Sprintf("config: render: %v", err)
	}
	return string(b)
}

// LogValue logs c as nested groups named by key path, api keys masked.
func (c Config) LogValue() slog.Value {
	return logValue(reflect.ValueOf(c.redacted()))
}

func logValue(v reflect.Value) slog.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return slog.AnyValue(nil)
		}
		return logValue(v.Elem())
	case reflect.Struct:
		var attrs []slog.Attr
		for i := range v.NumField() {
			if name := yamlName(v.Type().Field(i)); name != "" {
				attrs = append(attrs, slog.Attr{Key: name, Value: logValue(v.Field(i))})
			}
		}
		return slog.GroupValue(attrs...)
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.Struct {
			return slog.AnyValue(v.Interface())
		}
		attrs := make([]slog.Attr, v.Len())
		for i := range attrs {
			attrs[i] = slog.Attr{Key: strconv.Itoa(i), Value: logValue(v.Index(i))}
		}
		return slog.GroupValue(attrs...)
	case reflect.Map:
		var attrs []slog.Attr
		for _, k := range sortedKeys(v) {
			attrs = append(attrs, slog.Attr{Key: k.String(), Value: logValue(v.MapIndex(k))})
		}
		return slog.GroupValue(attrs...)
	default:
		return slog.AnyValue(v.Interface())
	}
}
