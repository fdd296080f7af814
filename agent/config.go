package agent

// ModelConfig is one entry of the models list (docs/DESIGN.md §12).
type ModelConfig struct {
	Name        string `yaml:"name" json:"name"`
	DisplayName string `yaml:"display_name" json:"display_name"`
	Provider    string `yaml:"provider" json:"provider"` // "openai", "anthropic" or "demo"
	Model       string `yaml:"model" json:"model"`
	BaseURL     string `yaml:"base_url" json:"-"`
	APIKey      string `yaml:"api_key" json:"-"`
	StreamUsage *bool  `yaml:"stream_usage" json:"-"`
	// Stream is auto, true or false (openai; empty means auto).
	Stream        StreamMode `yaml:"stream" json:"-"`
	ContextWindow int        `yaml:"context_window" json:"-"`
	// MaxOutputTokens caps each answer (Anthropic's max_tokens).
	MaxOutputTokens int `yaml:"max_output_tokens" json:"-"`
	// ThinkingBudgetTokens turns on Anthropic's extended thinking with
	// this budget (0 = off; else at least 1024 and below max_output_tokens).
	ThinkingBudgetTokens int `yaml:"thinking_budget_tokens" json:"-"`
	TimeoutSeconds       int `yaml:"timeout_seconds" json:"-"`
	// MaxConcurrentRequests caps this model's calls in flight at once
	// (0 = unlimited), for a local server that serves one or two at a time.
	MaxConcurrentRequests int  `yaml:"max_concurrent_requests" json:"-"`
	MaxRetries            *int `yaml:"max_retries" json:"-"`
	// Vision says the model sees images: a message's attached images
	// reach it as image parts; other models get their paths and a note
	// (docs/DESIGN.md §3).
	Vision bool `yaml:"vision" json:"vision"`
	// Demo provider options.
	LatencyMS int `yaml:"latency_ms" json:"-"`
	// LatencyJitter spreads each response's latency over
	// latency_ms × (1 ± jitter), deterministically per request, as a real
	// provider's answers vary (0 = always latency_ms).
	LatencyJitter float64 `yaml:"latency_jitter" json:"-"`
	ChunkMS       int     `yaml:"chunk_ms" json:"-"`
	Usage         *bool   `yaml:"usage" json:"-"`
	FailAfter     int     `yaml:"fail_after" json:"-"`
	// Price, when set, is what the model's tokens cost: the admin's usage
	// page shows usage as cost too (docs/DESIGN.md §6).
	Price *ModelPrice `yaml:"price" json:"price,omitempty"`
}

// ModelPrice is a model's price per million input and output tokens, in
// Currency (an ISO 4217 code, USD when not given).
type ModelPrice struct {
	InputPerMTok  float64 `yaml:"input_per_mtok" json:"input_per_mtok"`
	OutputPerMTok float64 `yaml:"output_per_mtok" json:"output_per_mtok"`
	Currency      string  `yaml:"currency" json:"currency"`
}

// Cost is what in input and out output tokens cost at p.
func (p ModelPrice) Cost(in, out int64) float64 {
	return (float64(in)*p.InputPerMTok + float64(out)*p.OutputPerMTok) / 1e6
}

// StreamMode is a model's stream setting: "auto", "true" or "false". It
// reads YAML's true and false as their text, so they need no quotes.
type StreamMode string

// UnmarshalText takes the setting as written; validation checks it.
func (m *StreamMode) UnmarshalText(b []byte) error {
	*m = StreamMode(b)
	return nil
}

// Label is what the UI shows for the model: its display name, else its name.
func (m ModelConfig) Label() string {
	if m.DisplayName != "" {
		return m.DisplayName
	}
	return m.Name
}

// LeadConfig configures the lead loop.
type LeadConfig struct {
	MaxTurns     int    `yaml:"max_turns"`
	SystemPrompt string `yaml:"system_prompt"`
	// Tools allow-lists the lead's tools (nil: every built-in one); MCP
	// tools are given only by name, as mcp:<server>/<tool> or
	// mcp:<server>/* (docs/OPERATIONS.md, "MCP servers").
	Tools *[]string `yaml:"tools"`
	// MaxActiveRunsPerUser bounds one user's runs in progress across all
	// their threads.
	MaxActiveRunsPerUser int `yaml:"max_active_runs_per_user"`
	// ModelTitles lets a thread's model title it from its first message
	// in one short call (Runtime.Title); nil is on. The demo provider
	// never makes the call.
	ModelTitles *bool `yaml:"model_titles"`
}

// AgentConfig is one entry of subagents.agents: overrides for a built-in,
// or the definition of a custom subagent (docs/DESIGN.md §5). Pointer fields are
// unset when nil, so precedence can tell "absent" from "zero".
type AgentConfig struct {
	Description     string    `yaml:"description"`
	SystemPrompt    string    `yaml:"system_prompt"`
	Tools           *[]string `yaml:"tools"`
	DisallowedTools *[]string `yaml:"disallowed_tools"`
	Model           string    `yaml:"model"`
	MaxTurns        *int      `yaml:"max_turns"`
	TimeoutSeconds  *int      `yaml:"timeout_seconds"`
	TokenBudget     *int64    `yaml:"token_budget"`
}

// SubagentsConfig holds the delegation limits and the agents.
type SubagentsConfig struct {
	TimeoutSeconds           int                    `yaml:"timeout_seconds"`
	MaxTurns                 *int                   `yaml:"max_turns"`
	MaxRunning               int                    `yaml:"max_running"`
	MaxRunningPerUser        int                    `yaml:"max_running_per_user"`
	MaxConcurrentPerResponse int                    `yaml:"max_concurrent_per_response"`
	MaxTotalPerRun           int                    `yaml:"max_total_per_run"`
	QueueTimeoutSeconds      int                    `yaml:"queue_timeout_seconds"`
	SafetyMarginSeconds      int                    `yaml:"safety_margin_seconds"`
	CancelGraceSeconds       int                    `yaml:"cancel_grace_seconds"`
	LoopLimit                int                    `yaml:"loop_limit"`
	Agents                   map[string]AgentConfig `yaml:"agents"`
}

// withDefaults fills in the limits left at zero (config validation keeps
// them positive; tests and benchmarks leave some out).
func (cfg SubagentsConfig) withDefaults() SubagentsConfig {
	if cfg.MaxRunning <= 0 {
		cfg.MaxRunning = 32
	}
	if cfg.MaxRunningPerUser <= 0 {
		cfg.MaxRunningPerUser = min(8, cfg.MaxRunning)
	}
	if cfg.MaxConcurrentPerResponse <= 0 {
		cfg.MaxConcurrentPerResponse = 4
	}
	if cfg.MaxTotalPerRun <= 0 {
		cfg.MaxTotalPerRun = 12
	}
	if cfg.QueueTimeoutSeconds <= 0 {
		cfg.QueueTimeoutSeconds = 600
	}
	if cfg.TimeoutSeconds <= 0 {
		cfg.TimeoutSeconds = 1800
	}
	if cfg.LoopLimit < 2 {
		cfg.LoopLimit = 3
	}
	if cfg.CancelGraceSeconds <= 0 {
		cfg.CancelGraceSeconds = 5
	}
	return cfg
}
