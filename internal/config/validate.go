package config

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"herd/agent"
	"herd/agent/mcp"
	"herd/agent/tools"
	"herd/internal/loopback"
)

// Providers a model may use. agent has no names for them yet.
const (
	providerOpenAI    = "openai"
	providerAnthropic = "anthropic"
	providerDemo      = "demo"
)

// Model defaults filled in by Load (docs/DESIGN.md §12).
const (
	defaultOpenAIBaseURL = "https://api.openai.com/v1"
	defaultOpenAITimeout = 300
	defaultOpenAIRetries = 2
	// Anthropic's Messages API requires max_tokens on every request.
	defaultAnthropicBaseURL   = "https://api.anthropic.com"
	defaultAnthropicMaxTokens = 4096
)

// inheritModel runs a subagent on the model the lead uses for the run.
const inheritModel = "inherit"

var (
	modelName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)
	agentName = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	hostName  = regexp.MustCompile(`^(?i)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?$`)
)

// fillModelDefaults gives each model the values docs/DESIGN.md §12 promises, so
// providers need not know them. Options of the other provider stay unset.
func fillModelDefaults(c *Config) {
	for i := range c.Models {
		FillModelDefaults(&c.Models[i])
	}
}

// FillModelDefaults gives m the defaults a model of the config file gets
// (docs/DESIGN.md §12), for a model the admin console adds.
func FillModelDefaults(m *agent.ModelConfig) {
	if m.Model == "" {
		m.Model = m.Name
	}
	switch m.Provider {
	case providerOpenAI:
		if m.BaseURL == "" {
			m.BaseURL = defaultOpenAIBaseURL
		}
		if m.StreamUsage == nil {
			m.StreamUsage = new(true)
		}
		if m.Stream == "" {
			m.Stream = "auto"
		}
		if m.MaxRetries == nil {
			m.MaxRetries = new(defaultOpenAIRetries)
		}
		if m.TimeoutSeconds == 0 {
			m.TimeoutSeconds = defaultOpenAITimeout
		}
	case providerAnthropic:
		if m.BaseURL == "" {
			m.BaseURL = defaultAnthropicBaseURL
		}
		if m.MaxRetries == nil {
			m.MaxRetries = new(defaultOpenAIRetries)
		}
		if m.TimeoutSeconds == 0 {
			m.TimeoutSeconds = defaultOpenAITimeout
		}
		if m.MaxOutputTokens == 0 {
			m.MaxOutputTokens = defaultAnthropicMaxTokens
		}
	case providerDemo:
		if m.Usage == nil {
			m.Usage = new(true)
		}
	}
	if m.Price != nil && m.Price.Currency == "" {
		m.Price.Currency = "USD"
	}
}

// inheritDanglingDefaultModels turns a subagent model that only the
// built-in defaults name, and that the configured models no longer
// include, into inherit: replacing the models must not leave the operator
// an error about the demo researcher they never wrote.
func (l *loader) inheritDanglingDefaultModels(c *Config) {
	for _, name := range sortedNames(c.Subagents.Agents) {
		a := c.Subagents.Agents[name]
		key := "subagents.agents." + name + ".model"
		if a.Model == "" || a.Model == inheritModel || l.originOf(key).name != defaultsSource || hasModel(c.Models, a.Model) {
			continue
		}
		a.Model = inheritModel
		c.Subagents.Agents[name] = a
	}
}

func hasModel(models []agent.ModelConfig, name string) bool {
	return slices.ContainsFunc(models, func(m agent.ModelConfig) bool { return m.Name == name })
}

// invalid reports a problem with the merged value at key, naming the layer
// that set it, unless the value already failed to decode.
func (l *loader) invalid(key, format string, args ...any) {
	for k := key; ; {
		if l.failed[k] {
			return
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			break
		}
		k = k[:i]
	}
	l.add(l.originOf(key), key, format, args...)
}

func (l *loader) atLeast(key string, got, least int) {
	if got < least {
		l.invalid(key, "must be at least %d, got %d", least, got)
	}
}

func (l *loader) oneOf(key, got string, allowed ...string) {
	if !slices.Contains(allowed, got) {
		l.invalid(key, "must be one of %s, got %q", strings.Join(allowed, ", "), got)
	}
}

func (l *loader) validate(c *Config) {
	l.validateServer(c.Server)
	l.validateDatabase(c.Database)
	l.validateCluster(c.Cluster)
	l.validateRuns(c.Runs)
	l.validateMetrics(c.Metrics, c.Sandbox)
	l.oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	l.oneOf("log.format", c.Log.Format, "text", "json")
	l.atLeast("auth.session_hours", c.Auth.SessionHours, 1)
	l.atLeast("auth.login_attempts_per_minute", c.Auth.LoginAttemptsPerMinute, 1)
	l.atLeast("auth.runs_per_minute", c.Auth.RunsPerMinute, 1)
	l.atLeast("auth.threads_per_minute", c.Auth.ThreadsPerMinute, 1)
	l.validateSSO(c.Auth)
	l.atLeast("server.max_sockets_per_user", c.Server.MaxSocketsPerUser, 1)
	l.atLeast("server.ws_connects_per_minute", c.Server.WSConnectsPerMinute, 1)
	l.atLeast("files.max_upload_mb", c.Files.MaxUploadMB, 1)
	l.atLeast("audit.retention_days", c.Audit.RetentionDays, 0)
	l.validateBudget("budgets.default", c.Budgets.Default)
	l.validateModels(c.Models)
	l.atLeast("lead.max_turns", c.Lead.MaxTurns, 1)
	l.atLeast("lead.max_active_runs_per_user", c.Lead.MaxActiveRunsPerUser, 1)
	l.validateSubagents(c.Subagents, c.Models, c.MCP.Servers)
	l.validateSandbox(c.Sandbox)
	l.validateMCP(c.MCP.Servers)
	l.validateTools("lead.tools", c.Lead.Tools, c.MCP.Servers)
}

func (l *loader) validateDatabase(d DatabaseConfig) {
	l.atLeast("database.connect_timeout_seconds", d.ConnectTimeoutSeconds, 0)
	switch d.Driver {
	case DriverSQLite:
		if d.DSN != "" {
			l.invalid("database.dsn", "is only for database.driver postgres (SQLite keeps herd.db in server.data_dir); set database.driver: postgres or remove the dsn")
		}
	case DriverPostgres:
		if strings.TrimSpace(d.DSN) == "" {
			l.invalid("database.dsn", "must name the PostgreSQL database when database.driver is postgres, e.g. postgres://herd@db.example.com:5432/herd (or set HERD_DATABASE_DSN)")
		} else if _, err := pgx.ParseConfig(d.DSN); err != nil {
			// pgx's error redacts the password.
			l.invalid("database.dsn", "is not a PostgreSQL connection string: %v", err)
		}
	default:
		l.invalid("database.driver", "must be sqlite or postgres, got %q", d.Driver)
	}
}

func (l *loader) validateRuns(r RunsConfig) {
	l.atLeast("runs.max_resumes", r.MaxResumes, 1)
}

func (l *loader) validateCluster(c ClusterConfig) {
	l.atLeast("cluster.renew_seconds", c.RenewSeconds, 1)
	// Two renewals fit in a lease, so one slow or lost renewal does not
	// make a live instance look dead.
	if c.RenewSeconds >= 1 && c.LeaseSeconds < 2*c.RenewSeconds+1 {
		l.invalid("cluster.lease_seconds", "must be more than twice cluster.renew_seconds (%d), got %d", c.RenewSeconds, c.LeaseSeconds)
	}
}

func (l *loader) validateServer(s ServerConfig) {
	if _, port, err := net.SplitHostPort(s.Addr); err != nil {
		l.invalid("server.addr", "must be host:port, got %q", s.Addr)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		l.invalid("server.addr", "port must be a number from 0 to 65535, got %q", port)
	}
	if strings.TrimSpace(s.DataDir) == "" {
		l.invalid("server.data_dir", "must not be empty")
	}
	if s.PublicURL != "" {
		u, err := url.Parse(s.PublicURL)
		if err != nil || !isHTTPURL(u) || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			l.invalid("server.public_url", "must be an http(s) origin such as https://herd.example.com, got %q", s.PublicURL)
		}
	}
	l.atLeast("server.shutdown_timeout_seconds", s.ShutdownTimeoutSeconds, 1)
	l.atLeast("server.drain_seconds", s.DrainSeconds, 0)
	for i, h := range s.AllowedHosts {
		if !validHostName(h) {
			l.invalid("server.allowed_hosts."+strconv.Itoa(i), "must be a host name or IP address without scheme, port or path, got %q", h)
		}
	}
	for i, p := range s.TrustedProxies {
		if _, _, err := net.ParseCIDR(p); err != nil {
			l.invalid("server.trusted_proxies."+strconv.Itoa(i), "must be a CIDR such as 10.0.0.0/8 or 127.0.0.1/32, got %q", p)
		}
	}
	l.atLeast("server.read_header_timeout_seconds", s.ReadHeaderTimeoutSeconds, 1)
	if s.ReadTimeoutSeconds < max(s.ReadHeaderTimeoutSeconds, 1) {
		l.invalid("server.read_timeout_seconds", "must be at least server.read_header_timeout_seconds (%d), got %d", max(s.ReadHeaderTimeoutSeconds, 1), s.ReadTimeoutSeconds)
	}
	l.atLeast("server.write_timeout_seconds", s.WriteTimeoutSeconds, 1)
	l.atLeast("server.idle_timeout_seconds", s.IdleTimeoutSeconds, 1)
	// A few connections are always busy (a browser's WebSocket, its page
	// loads); below this the cap would queue ordinary use.
	l.atLeast("server.max_connections", s.MaxConnections, minConnections)
}

const (
	minConnections     = 8
	minMetricsTokenLen = 16
)

// validateMetrics keeps /metrics private: a metrics address that others
// can reach needs a token, and a token must not be guessable. Sandboxed
// commands that share the host's network (sandbox.network: host) reach
// every loopback address of the machine, the metrics listener included,
// so then it needs a token too. herd refuses to start rather than make
// one up: a generated token would still have to reach the scraper, would
// change at each restart, and printed in the log it would be read by
// whoever reads the log. Host mode is left out: its commands, admins'
// only, can read the configuration and the token with it.
func (l *loader) validateMetrics(m MetricsConfig, sandbox tools.SandboxConfig) {
	if m.Token != "" && len(m.Token) < minMetricsTokenLen {
		l.invalid("metrics.token", "must be at least %d characters (or empty), got %d", minMetricsTokenLen, len(m.Token))
	}
	if m.Addr == "" {
		return
	}
	if m.Token == "" && sandbox.Network == tools.NetworkHost && sandbox.Mode != tools.SandboxHost {
		l.invalid("sandbox.network", "is host, so sandboxed commands share this machine's network and could read /metrics on metrics.addr (%s), which has no token; "+
			"set metrics.token (better HERD_METRICS_TOKEN), or metrics.addr to \"\" for no metrics listener, or sandbox.network to none", m.Addr)
	}
	host, port, err := net.SplitHostPort(m.Addr)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		l.invalid("metrics.addr", "must be host:port or empty, got %q", m.Addr)
		return
	}
	if m.Token == "" && !loopback.Host(host) {
		l.invalid("metrics.addr", "%q is reachable from other machines and /metrics shows usage figures; listen on 127.0.0.1 or set metrics.token", m.Addr)
	}
}

// validHostName accepts what a Host header names: a DNS name or an IP
// address (IPv6 with or without brackets), without a port.
func validHostName(h string) bool {
	if net.ParseIP(strings.Trim(h, "[]")) != nil {
		return true
	}
	return hostName.MatchString(h)
}

func isHTTPURL(u *url.URL) bool {
	return (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.Opaque == ""
}

func (l *loader) validateModels(models []agent.ModelConfig) {
	if len(models) == 0 {
		l.invalid("models", "must list at least one model")
	}
	first := map[string]int{}
	for i, m := range models {
		key := "models." + strconv.Itoa(i)
		if prev, dup := first[m.Name]; dup && m.Name != "" {
			l.invalid(key+".name", "%q is already the name of models.%d", m.Name, prev)
		} else {
			first[m.Name] = i
		}
		for _, f := range CheckModel(m) {
			l.invalid(key+"."+f.Field, "%s", f.Message)
		}
	}
}

// FieldError is a field of one entry that validation refuses: the field
// as the config file names it, and why.
type FieldError struct{ Field, Message string }

func (e FieldError) Error() string { return e.Field + " " + e.Message }

// fieldChecks collects the FieldErrors of one entry.
type fieldChecks []FieldError

func (c *fieldChecks) invalid(field, format string, args ...any) {
	*c = append(*c, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (c *fieldChecks) atLeast(field string, got, least int) {
	if got < least {
		c.invalid(field, "must be at least %d, got %d", least, got)
	}
}

func (c *fieldChecks) oneOf(field, got string, allowed ...string) {
	if !slices.Contains(allowed, got) {
		c.invalid(field, "must be one of %s, got %q", strings.Join(allowed, ", "), got)
	}
}

// CheckModel checks one model, its defaults filled in
// (FillModelDefaults), by the config file's rules: the file's models and
// the admin console's are held to the same ones (docs/DESIGN.md §12).
// Unique names are the caller's to check.
func CheckModel(m agent.ModelConfig) []FieldError {
	var c fieldChecks
	switch {
	case m.Name == "":
		c.invalid("name", "must not be empty")
	case !modelName.MatchString(m.Name):
		c.invalid("name", "must match %s, got %q", modelName, m.Name)
	}
	c.oneOf("provider", m.Provider, providerOpenAI, providerAnthropic, providerDemo)
	if m.Provider == providerOpenAI || m.Provider == providerAnthropic {
		if u, err := url.Parse(m.BaseURL); err != nil || !isHTTPURL(u) {
			c.invalid("base_url", "must be an absolute http(s) URL, got %q", m.BaseURL)
		}
	}
	if m.Provider == providerOpenAI {
		c.oneOf("stream", string(m.Stream), "auto", "true", "false")
	}
	if m.Provider == providerAnthropic {
		if m.APIKey == "" {
			c.invalid("api_key", "is required for provider anthropic (a key, or $ENV_VAR)")
		}
		// The anthropic provider always streams.
		if m.Stream != "" && m.Stream != "auto" && m.Stream != "true" {
			c.invalid("stream", "provider anthropic always streams: must be auto or true, got %q", m.Stream)
		}
	}
	c.checkThinking(m)
	c.atLeast("max_output_tokens", m.MaxOutputTokens, 0)
	c.atLeast("max_concurrent_requests", m.MaxConcurrentRequests, 0)
	c.checkWindow(m)
	c.atLeast("timeout_seconds", m.TimeoutSeconds, 0)
	if m.MaxRetries != nil {
		c.atLeast("max_retries", *m.MaxRetries, 0)
	}
	c.atLeast("latency_ms", m.LatencyMS, 0)
	if m.LatencyJitter < 0 || m.LatencyJitter > 1 {
		c.invalid("latency_jitter", "must be from 0 to 1, got %v", m.LatencyJitter)
	}
	c.atLeast("chunk_ms", m.ChunkMS, 0)
	c.atLeast("fail_after", m.FailAfter, 0)
	if m.Price != nil {
		c.checkPrice(*m.Price)
	}
	return c
}

// currencyCode is an ISO 4217 code, as a price's currency is written.
var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// checkPrice checks a model's price: figures per million tokens, not
// negative (0 is free), and a currency code.
func (c *fieldChecks) checkPrice(p agent.ModelPrice) {
	if p.InputPerMTok < 0 || math.IsNaN(p.InputPerMTok) || math.IsInf(p.InputPerMTok, 0) {
		c.invalid("price.input_per_mtok", "must be a price per million input tokens, 0 or more, got %v", p.InputPerMTok)
	}
	if p.OutputPerMTok < 0 || math.IsNaN(p.OutputPerMTok) || math.IsInf(p.OutputPerMTok, 0) {
		c.invalid("price.output_per_mtok", "must be a price per million output tokens, 0 or more, got %v", p.OutputPerMTok)
	}
	if !currencyCode.MatchString(p.Currency) {
		c.invalid("price.currency", "must be a three-letter currency code such as USD or EUR, got %q", p.Currency)
	}
}

// minContextWindow catches a window written in thousands (128 for 128k):
// below it no conversation would fit.
const minContextWindow = 512

// checkWindow checks context_window (0 = unknown) against
// max_output_tokens, which the window must leave room beside.
func (c *fieldChecks) checkWindow(m agent.ModelConfig) {
	switch cw := m.ContextWindow; {
	case cw < 0 || (cw > 0 && cw < minContextWindow):
		c.invalid("context_window", "must be 0 (unknown) or at least %d tokens, got %d", minContextWindow, cw)
	case cw > 0 && m.MaxOutputTokens >= cw:
		c.invalid("max_output_tokens", "must be less than context_window (%d), got %d", cw, m.MaxOutputTokens)
	}
}

func (l *loader) validateSubagents(s agent.SubagentsConfig, models []agent.ModelConfig, servers []mcp.ServerConfig) {
	l.atLeast("subagents.timeout_seconds", s.TimeoutSeconds, 1)
	if s.MaxTurns != nil {
		l.atLeast("subagents.max_turns", *s.MaxTurns, 1)
	}
	l.atLeast("subagents.max_running", s.MaxRunning, 1)
	l.atLeast("subagents.max_running_per_user", s.MaxRunningPerUser, 1)
	l.atLeast("subagents.max_concurrent_per_response", s.MaxConcurrentPerResponse, 1)
	l.atLeast("subagents.max_total_per_run", s.MaxTotalPerRun, 1)
	l.atLeast("subagents.queue_timeout_seconds", s.QueueTimeoutSeconds, 1)
	l.atLeast("subagents.safety_margin_seconds", s.SafetyMarginSeconds, 0)
	l.atLeast("subagents.cancel_grace_seconds", s.CancelGraceSeconds, 1)
	// A limit of 1 would cap a subagent at its first tool call.
	l.atLeast("subagents.loop_limit", s.LoopLimit, 2)
	for _, name := range sortedNames(s.Agents) {
		l.report("subagents.agents."+name, CheckAgent(name, s.Agents[name], models, servers))
	}
}

// report reports each problem of the entry at key (a problem of no
// field is the entry's own).
func (l *loader) report(key string, probs []FieldError) {
	for _, f := range probs {
		k := key
		if f.Field != "" {
			k += "." + f.Field
		}
		l.invalid(k, "%s", f.Message)
	}
}

func (l *loader) validateTools(key string, tools *[]string, servers []mcp.ServerConfig) {
	var c fieldChecks
	c.checkTools("", tools, servers)
	l.report(key, c)
}

// CheckAgent checks subagent type name by the config file's rules
// against the models and MCP servers there are: the file's types and
// the admin console's are held to the same ones (docs/DESIGN.md §12).
// A problem with no Field is the name's.
func CheckAgent(name string, a agent.AgentConfig, models []agent.ModelConfig, servers []mcp.ServerConfig) []FieldError {
	var c fieldChecks
	if !agentName.MatchString(name) {
		c.invalid("", "agent name must match %s", agentName)
	}
	if name == agent.SubagentGeneral || name == agent.SubagentBash {
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"description", a.Description != ""},
			{"system_prompt", a.SystemPrompt != ""},
			{"tools", a.Tools != nil},
			{"disallowed_tools", a.DisallowedTools != nil},
		} {
			if f.set {
				c.invalid(f.name, "cannot be set for the built-in subagent %s (only model, max_turns, timeout_seconds and token_budget can)", name)
			}
		}
	} else if strings.TrimSpace(a.Description) == "" {
		c.invalid("description", "a custom subagent needs a description for the lead to choose it by")
	}
	if a.Model != "" && a.Model != inheritModel && !hasModel(models, a.Model) {
		names := make([]string, len(models))
		for i, m := range models {
			names[i] = m.Name
		}
		c.invalid("model", "unknown model %q (must be inherit or one of: %s)", a.Model, strings.Join(names, ", "))
	}
	c.checkTools("tools", a.Tools, servers)
	c.checkTools("disallowed_tools", a.DisallowedTools, servers)
	if a.MaxTurns != nil {
		c.atLeast("max_turns", *a.MaxTurns, 1)
	}
	if a.TimeoutSeconds != nil {
		c.atLeast("timeout_seconds", *a.TimeoutSeconds, 1)
	}
	if a.TokenBudget != nil && *a.TokenBudget < 0 {
		c.invalid("token_budget", "must be at least 0, got %d", *a.TokenBudget)
	}
	return c
}

// checkTools checks a tools list at field ("" for the entry itself).
func (c *fieldChecks) checkTools(field string, tools *[]string, servers []mcp.ServerConfig) {
	if tools == nil {
		return
	}
	known := agent.ToolNames()
	for i, t := range *tools {
		f := strconv.Itoa(i)
		if field != "" {
			f = field + "." + f
		}
		if !c.mcpSelector(f, t, servers) && !slices.Contains(known, t) {
			c.invalid(f, "unknown tool %q (known: %s, or mcp:<server>/<tool>)", t, strings.Join(known, ", "))
		}
	}
}

func (l *loader) validateSandbox(s tools.SandboxConfig) {
	l.oneOf("sandbox.mode", s.Mode, tools.SandboxAuto, tools.SandboxBwrap, tools.SandboxHost)
	l.oneOf("sandbox.network", s.Network, tools.NetworkNone, tools.NetworkHost)
	l.atLeast("sandbox.bash_timeout_seconds", s.BashTimeoutSeconds, 1)
	l.atLeast("sandbox.output_limit_bytes", s.OutputLimitBytes, 1024)
	// Below these a command cannot start at all: bwrap, bash and the
	// dynamic loader need a few processes and some address space.
	l.atLeast("sandbox.limits.processes", s.Limits.Processes, 8)
	l.atLeast("sandbox.limits.memory_mb", s.Limits.MemoryMB, 64)
	l.atLeast("sandbox.limits.cpu_seconds", s.Limits.CPUSeconds, 1)
	l.atLeast("sandbox.limits.file_size_mb", s.Limits.FileSizeMB, 1)
	l.atLeast("sandbox.limits.tmp_mb", s.Limits.TmpMB, 1)
	l.atLeast("sandbox.limits.workspace_mb", s.Limits.WorkspaceMB, 1)
	l.atLeast("sandbox.limits.workspace_files", s.Limits.WorkspaceFiles, 16)
	l.atLeast("sandbox.limits.min_free_mb", s.Limits.MinFreeMB, 1)
	l.atLeast("sandbox.limits.commands_per_user", s.Limits.CommandsPerUser, 1)
	if s.Limits.CPUs < 0.01 || s.Limits.CPUs > 1024 {
		l.invalid("sandbox.limits.cpus", "must be between 0.01 and 1024, got %g", s.Limits.CPUs)
	}
	if strings.TrimSpace(s.User) == "" {
		l.invalid("sandbox.user", "must name an account (a user name, a uid, or uid:gid), got %q", s.User)
	}
}

func sortedNames(agents map[string]agent.AgentConfig) []string {
	return slices.Sorted(maps.Keys(agents))
}

// checkThinking checks thinking_budget_tokens against the Messages API:
// at least its minimum of 1024, and below max_tokens, which it is part of.
func (c *fieldChecks) checkThinking(m agent.ModelConfig) {
	budget := m.ThinkingBudgetTokens
	switch {
	case budget == 0:
	case m.Provider != providerAnthropic:
		c.invalid("thinking_budget_tokens", "is only for provider anthropic (OpenAI-compatible servers send their reasoning unasked), got %d", budget)
	case budget < 1024:
		c.invalid("thinking_budget_tokens", "must be 0 (off) or at least 1024 (the API's minimum), got %d", budget)
	case budget >= cmp.Or(m.MaxOutputTokens, defaultAnthropicMaxTokens):
		c.invalid("thinking_budget_tokens", "must be below max_output_tokens (%d): thinking is part of each answer's max_tokens, got %d", cmp.Or(m.MaxOutputTokens, defaultAnthropicMaxTokens), budget)
	}
}

// validateBudget checks a budget as PUT /api/admin/budgets does.
func (l *loader) validateBudget(key string, r BudgetRule) {
	if r.Tokens < 0 {
		l.invalid(key+".tokens", "must be 0 (no budget) or more, got %d", r.Tokens)
	}
	if r.Tokens > 0 || r.Period != "" {
		l.oneOf(key+".period", r.Period, "day", "week", "month")
	}
}
