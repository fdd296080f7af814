package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"herd/agent"
	"herd/agent/tools"
)

// readExample returns config.example.yaml, which main embeds as the
// built-in defaults.
func readExample(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// loadYAML loads the example defaults, then file as herd.yaml unless it is
// empty, then env and o.
func loadYAML(t testing.TB, file string, env []string, o Overrides) (*Config, error) {
	t.Helper()
	path := ""
	if file != "" {
		path = "herd.yaml"
	}
	return load(readExample(t), path, []byte(file), env, o)
}

// errorLines splits a joined error into its problems.
func errorLines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

func TestLoadDefaults(t *testing.T) {
	got, err := loadYAML(t, "", nil, Overrides{})
	if err != nil {
		t.Fatalf("load defaults: %v", err)
	}
	want := &Config{
		Server: ServerConfig{Addr: "127.0.0.1:8080", DataDir: "./data", PublicURL: "", ShutdownTimeoutSeconds: 15, DrainSeconds: 30, AllowedHosts: []string{}, TrustedProxies: []string{},
			ReadHeaderTimeoutSeconds: 10, ReadTimeoutSeconds: 60, WriteTimeoutSeconds: 120, IdleTimeoutSeconds: 120, MaxConnections: 256,
			MaxSocketsPerUser: 16, WSConnectsPerMinute: 60},
		Database:   DatabaseConfig{Driver: "sqlite", ConnectTimeoutSeconds: 60},
		Cluster:    ClusterConfig{LeaseSeconds: 10, RenewSeconds: 3},
		Runs:       RunsConfig{Resume: true, MaxResumes: 3},
		Files:      FilesConfig{MaxUploadMB: 100},
		Metrics:    MetricsConfig{Addr: "127.0.0.1:9180"},
		Log:        LogConfig{Level: "info", Format: "text"},
		Auth:       AuthConfig{AllowSignup: false, SessionHours: 720, LoginAttemptsPerMinute: 10, RunsPerMinute: 30, ThreadsPerMinute: 20, LocalPasswords: "all"},
		TokenUsage: TokenUsageConfig{Enabled: true},
		Audit:      AuditConfig{RetentionDays: 365},
		Budgets:    BudgetsConfig{Default: BudgetRule{Period: "week"}},
		Models: []agent.ModelConfig{
			{Name: "demo-fast", DisplayName: "Demo Fast", Provider: "demo", Model: "demo-fast", ContextWindow: 8192, Vision: true, LatencyMS: 300, LatencyJitter: 0.5, ChunkMS: 30, Usage: new(true)},
			{Name: "demo-deep", DisplayName: "Demo Deep", Provider: "demo", Model: "demo-deep", ContextWindow: 8192, Vision: true, LatencyMS: 700, LatencyJitter: 0.5, ChunkMS: 45, Usage: new(true)},
		},
		Lead: agent.LeadConfig{MaxTurns: 25, MaxActiveRunsPerUser: 3, ModelTitles: new(true)},
		Subagents: agent.SubagentsConfig{
			TimeoutSeconds:           1800,
			MaxRunning:               32,
			MaxRunningPerUser:        8,
			MaxConcurrentPerResponse: 4,
			MaxTotalPerRun:           12,
			QueueTimeoutSeconds:      600,
			SafetyMarginSeconds:      60,
			CancelGraceSeconds:       5,
			LoopLimit:                3,
			Agents: map[string]agent.AgentConfig{
				"researcher": {
					Description:    "A careful investigator for questions that need reading and comparing several sources in the workspace.",
					SystemPrompt:   "You investigate one question thoroughly and write a short, sourced report.",
					Tools:          &[]string{"ls", "read_file", "write_file"},
					Model:          "demo-deep",
					MaxTurns:       new(20),
					TimeoutSeconds: new(900),
					TokenBudget:    new(int64(0)),
				},
			},
		},
		Sandbox: tools.SandboxConfig{
			Mode: "auto", Network: "none", User: "nobody", AllowHostBash: true, BashTimeoutSeconds: 120, OutputLimitBytes: 30000,
			Limits: tools.SandboxLimits{Processes: 256, MemoryMB: 2048, CPUSeconds: 120, CPUs: 1, FileSizeMB: 512, TmpMB: 256,
				WorkspaceMB: 1024, WorkspaceFiles: 100_000, MinFreeMB: 256, CommandsPerUser: 4},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults:\ngot  %s\nwant %s", got, want)
	}
}

// schemaPaths lists every key path of t, with * for a list index or a map
// key.
func schemaPaths(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		var paths []string
		for i := range t.NumField() {
			if name := yamlName(t.Field(i)); name != "" {
				p := joinKey(prefix, name)
				paths = append(paths, p)
				paths = append(paths, schemaPaths(t.Field(i).Type, p)...)
			}
		}
		return paths
	case reflect.Slice, reflect.Map:
		return schemaPaths(t.Elem(), prefix+".*")
	}
	return nil
}

// exampleKeys collects the key paths raw holds, in schemaPaths' form.
func exampleKeys(raw any, t reflect.Type, prefix string, out map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		m, _ := raw.(yaml.MapSlice)
		for _, item := range m {
			name := fmt.Sprint(item.Key)
			if f, ok := fieldByName(t, name); ok {
				out[joinKey(prefix, name)] = true
				exampleKeys(item.Value, f.Type, joinKey(prefix, name), out)
			}
		}
	case reflect.Slice:
		list, _ := raw.([]any)
		for _, e := range list {
			exampleKeys(e, t.Elem(), prefix+".*", out)
		}
	case reflect.Map:
		m, _ := raw.(yaml.MapSlice)
		for _, item := range m {
			exampleKeys(item.Value, t.Elem(), prefix+".*", out)
		}
	}
}

// commentedKey matches a commented-out key line such as "  #   api_key: x",
// capturing the indentation before the #, the key line after "# " and the
// key.
var commentedKey = regexp.MustCompile(`^(\s*)# ?(\s*(?:- )?([a-z_]+):(?:\s.*)?)$`)

// TestExampleDocumentsEveryKey keeps config.example.yaml complete: every
// key path of Config must appear in it as a key, commented out or not, and
// every key it shows must decode.
func TestExampleDocumentsEveryKey(t *testing.T) {
	// Prose can look like a key ("# host: bash runs on this machine"), so
	// only the names the schema uses are taken for commented-out keys.
	names := map[string]bool{}
	for _, p := range schemaPaths(reflect.TypeFor[Config](), "") {
		names[p[strings.LastIndexByte(p, '.')+1:]] = true
	}
	var lines []string
	for line := range strings.Lines(string(readExample(t))) {
		line = strings.TrimRight(line, "\n")
		if m := commentedKey.FindStringSubmatch(line); m != nil && names[m[3]] {
			lines = append(lines, m[1]+m[2])
		} else if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			lines = append(lines, line)
		}
	}
	uncommented := strings.Join(lines, "\n")
	raw, err := parseYAML([]byte(uncommented))
	if err != nil {
		t.Fatalf("parse the example with its keys uncommented: %v\n%s", err, uncommented)
	}

	l := &loader{failed: map[string]bool{}, origin: map[string]source{}}
	var c Config
	l.decodeInto(reflect.ValueOf(&c).Elem(), raw, nil, source{name: "uncommented example"}, false)
	if err := l.err(); err != nil {
		t.Errorf("a key shown in the example does not decode:\n%v", err)
	}

	documented := map[string]bool{}
	exampleKeys(raw, reflect.TypeFor[Config](), "", documented)
	for _, p := range schemaPaths(reflect.TypeFor[Config](), "") {
		if !documented[p] {
			t.Errorf("config.example.yaml does not show the key %s", p)
		}
	}
}

func TestPrecedence(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		env      []string
		o        Overrides
		wantAddr string
		wantDir  string
	}{
		{name: "defaults", wantAddr: "127.0.0.1:8080", wantDir: "./data"},
		{
			name:     "file over defaults, key by key",
			file:     "server:\n  addr: 127.0.0.1:9000\n",
			wantAddr: "127.0.0.1:9000", wantDir: "./data",
		},
		{
			name:     "env over file",
			file:     "server:\n  addr: 127.0.0.1:9000\n  data_dir: /srv/file\n",
			env:      []string{"HERD_SERVER_ADDR=127.0.0.1:9001"},
			wantAddr: "127.0.0.1:9001", wantDir: "/srv/file",
		},
		{
			name:     "flags over env",
			file:     "server:\n  addr: 127.0.0.1:9000\n  data_dir: /srv/file\n",
			env:      []string{"HERD_SERVER_ADDR=127.0.0.1:9001", "HERD_SERVER_DATA_DIR=/srv/env"},
			o:        Overrides{Addr: "127.0.0.1:9002", DataDir: "/srv/flag"},
			wantAddr: "127.0.0.1:9002", wantDir: "/srv/flag",
		},
		{
			name:     "empty flags override nothing",
			env:      []string{"HERD_SERVER_DATA_DIR=/srv/env"},
			o:        Overrides{Addr: "127.0.0.1:9002"},
			wantAddr: "127.0.0.1:9002", wantDir: "/srv/env",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.file != "" {
				path = filepath.Join(t.TempDir(), "herd.yaml")
				if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, err := Load(readExample(t), path, tt.env, tt.o)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if c.Server.Addr != tt.wantAddr || c.Server.DataDir != tt.wantDir {
				t.Errorf("got addr %q, data_dir %q; want %q, %q", c.Server.Addr, c.Server.DataDir, tt.wantAddr, tt.wantDir)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := Load(readExample(t), path, nil, Overrides{})
	if err == nil || !strings.HasPrefix(err.Error(), "config: ") || !strings.Contains(err.Error(), path) {
		t.Errorf("got %v, want a config error naming %s", err, path)
	}
}

func TestMerge(t *testing.T) {
	tests := []struct {
		name  string
		file  string
		env   []string
		check func(*Config) string // "" when c is as expected
	}{
		{
			name: "a file's models list replaces the default list",
			file: "models:\n  - name: gpt\n    provider: openai\n",
			check: func(c *Config) string {
				if len(c.Models) != 1 || c.Models[0].Name != "gpt" {
					return fmt.Sprintf("models = %+v, want only gpt", c.Models)
				}
				return ""
			},
		},
		{
			name: "a file's agents map replaces the default map",
			file: "subagents:\n  agents:\n    mine:\n      description: d\n",
			check: func(c *Config) string {
				if got := slices.Sorted(maps.Keys(c.Subagents.Agents)); !slices.Equal(got, []string{"mine"}) {
					return fmt.Sprintf("agents = %v, want [mine]", got)
				}
				return ""
			},
		},
		{
			name: "an empty agents map removes the defaults",
			file: "subagents:\n  agents: {}\n",
			check: func(c *Config) string {
				if len(c.Subagents.Agents) != 0 {
					return fmt.Sprintf("agents = %v, want none", c.Subagents.Agents)
				}
				return ""
			},
		},
		{
			name: "a section merges key by key",
			file: "subagents:\n  max_running: 8\n",
			check: func(c *Config) string {
				s := c.Subagents
				if s.MaxRunning != 8 || s.MaxConcurrentPerResponse != 4 || s.MaxTotalPerRun != 12 || s.Agents["researcher"].Model != "demo-deep" {
					return fmt.Sprintf("subagents = %+v, want max_running 8 and the other defaults", s)
				}
				return ""
			},
		},
		{
			name: "a null section changes nothing",
			file: "server:\n",
			check: func(c *Config) string {
				if c.Server.Addr != "127.0.0.1:8080" || c.Server.ShutdownTimeoutSeconds != 15 {
					return fmt.Sprintf("server = %+v, want the defaults", c.Server)
				}
				return ""
			},
		},
		{
			name: "a null list of tools means all tools",
			file: "subagents:\n  agents:\n    mine:\n      description: d\n      tools: null\n",
			check: func(c *Config) string {
				if c.Subagents.Agents["mine"].Tools != nil {
					return "tools set, want nil"
				}
				return ""
			},
		},
		{
			name: "anchors and merge keys",
			file: "models:\n  - &base {name: a, provider: demo, latency_ms: 7}\n  - <<: *base\n    name: b\n",
			check: func(c *Config) string {
				if len(c.Models) != 2 || c.Models[1].Name != "b" || c.Models[1].LatencyMS != 7 {
					return fmt.Sprintf("models = %+v, want b to inherit latency 7 from a", c.Models)
				}
				return ""
			},
		},
		{
			name: "an integral float is an integer",
			file: "sandbox:\n  output_limit_bytes: 4096.0\n",
			check: func(c *Config) string {
				if c.Sandbox.OutputLimitBytes != 4096 {
					return fmt.Sprintf("output_limit_bytes = %d, want 4096", c.Sandbox.OutputLimitBytes)
				}
				return ""
			},
		},
		{
			name: "env whole list, then an entry of the new list",
			env:  []string{"HERD_MODELS_0_LATENCY_MS=5", "HERD_MODELS=[{name: x, provider: demo}, {name: y, provider: demo}]"},
			check: func(c *Config) string {
				if len(c.Models) != 2 || c.Models[0].Name != "x" || c.Models[0].LatencyMS != 5 || c.Models[1].Name != "y" {
					return fmt.Sprintf("models = %+v, want x (latency 5) and y", c.Models)
				}
				return ""
			},
		},
		{
			name: "env list index",
			env:  []string{"HERD_MODELS_1_DISPLAY_NAME=Deep Thought"},
			check: func(c *Config) string {
				if c.Models[1].DisplayName != "Deep Thought" || c.Models[0].DisplayName != "Demo Fast" {
					return fmt.Sprintf("models = %+v", c.Models)
				}
				return ""
			},
		},
		{
			name: "env map key",
			env:  []string{"HERD_SUBAGENTS_AGENTS_RESEARCHER_MODEL=demo-fast"},
			check: func(c *Config) string {
				if r := c.Subagents.Agents["researcher"]; r.Model != "demo-fast" || *r.MaxTurns != 20 {
					return fmt.Sprintf("researcher = %+v, want model demo-fast and the rest kept", r)
				}
				return ""
			},
		},
		{
			name: "env map key with a dash",
			file: "subagents:\n  agents:\n    general-purpose: {max_turns: 50}\n",
			env:  []string{"HERD_SUBAGENTS_AGENTS_GENERAL_PURPOSE_MODEL=demo-deep"},
			check: func(c *Config) string {
				if g := c.Subagents.Agents[agent.SubagentGeneral]; g.Model != "demo-deep" || *g.MaxTurns != 50 {
					return fmt.Sprintf("general-purpose = %+v, want demo-deep with max_turns 50", g)
				}
				return ""
			},
		},
		{
			name: "env mapping merges into a struct entry",
			env:  []string{"HERD_SUBAGENTS_AGENTS_RESEARCHER={model: demo-fast, max_turns: 3}"},
			check: func(c *Config) string {
				if r := c.Subagents.Agents["researcher"]; r.Model != "demo-fast" || *r.MaxTurns != 3 || r.Description == "" {
					return fmt.Sprintf("researcher = %+v, want model and max_turns set, description kept", r)
				}
				return ""
			},
		},
		{
			name: "env whole tools list replaces it",
			env:  []string{"HERD_SUBAGENTS_AGENTS_RESEARCHER_TOOLS=[ls]"},
			check: func(c *Config) string {
				if tools := c.Subagents.Agents["researcher"].Tools; tools == nil || !slices.Equal(*tools, []string{"ls"}) {
					return fmt.Sprintf("tools = %v, want [ls]", tools)
				}
				return ""
			},
		},
		{
			name: "env bool, pointer and verbatim string",
			env: []string{
				"HERD_TOKEN_USAGE_ENABLED=false",
				"HERD_AUDIT_RETENTION_DAYS=0",
				"HERD_SUBAGENTS_MAX_TURNS=7",
				"HERD_MODELS_1_LATENCY_JITTER=0.25",
				`HERD_LEAD_SYSTEM_PROMPT="Be brief": always.`,
			},
			check: func(c *Config) string {
				if c.TokenUsage.Enabled || c.Audit.RetentionDays != 0 || c.Subagents.MaxTurns == nil || *c.Subagents.MaxTurns != 7 || c.Lead.SystemPrompt != `"Be brief": always.` || c.Models[1].LatencyJitter != 0.25 {
					return fmt.Sprintf("token_usage %v, max_turns %v, system_prompt %q", c.TokenUsage.Enabled, c.Subagents.MaxTurns, c.Lead.SystemPrompt)
				}
				return ""
			},
		},
		{
			name: "model defaults",
			file: "models:\n  - {name: gpt, provider: openai}\n  - {name: local, provider: openai, model: llama3, base_url: 'http://localhost:11434/v1', stream_usage: false, stream: false, max_retries: 0, timeout_seconds: 60}\n  - {name: d, provider: demo, usage: false}\n  - {name: claude, provider: anthropic, model: claude-sonnet-4-5, api_key: k}\n",
			check: func(c *Config) string {
				gpt, local, d, claude := c.Models[0], c.Models[1], c.Models[2], c.Models[3]
				switch {
				case claude.BaseURL != "https://api.anthropic.com" || claude.MaxOutputTokens != 4096 || *claude.MaxRetries != 2 || claude.TimeoutSeconds != 300 || claude.StreamUsage != nil:
					return fmt.Sprintf("claude = %+v, want the anthropic defaults", claude)
				case gpt.Model != "gpt" || gpt.BaseURL != "https://api.openai.com/v1" || !*gpt.StreamUsage || gpt.Stream != "auto" || *gpt.MaxRetries != 2 || gpt.TimeoutSeconds != 300 || gpt.DisplayName != "":
					return fmt.Sprintf("gpt = %+v, want the openai defaults", gpt)
				case local.Model != "llama3" || local.BaseURL != "http://localhost:11434/v1" || *local.StreamUsage || local.Stream != "false" || *local.MaxRetries != 0 || local.TimeoutSeconds != 60:
					return fmt.Sprintf("local = %+v, want its own values kept", local)
				case *d.Usage || d.StreamUsage != nil || d.Stream != "" || d.MaxRetries != nil:
					return fmt.Sprintf("d = %+v, want usage false and no openai options", d)
				}
				return ""
			},
		},
		{
			name: "a default agent's model falls back to inherit once the models are replaced",
			env:  []string{"HERD_MODELS=[{name: gpt, provider: openai}]"},
			check: func(c *Config) string {
				if m := c.Subagents.Agents["researcher"].Model; m != "inherit" {
					return fmt.Sprintf("researcher model = %q, want inherit", m)
				}
				return ""
			},
		},
		{
			name: "api_key $NAME and ${NAME}",
			file: "models:\n  - {name: a, provider: openai, api_key: $KEY_A}\n  - {name: b, provider: openai, api_key: '${HERD_KEY_B}'}\n  - {name: c, provider: openai, api_key: sk-$literal}\n",
			env:  []string{"KEY_A=sk-a", "HERD_KEY_B=sk-b"},
			check: func(c *Config) string {
				if got := []string{c.Models[0].APIKey, c.Models[1].APIKey, c.Models[2].APIKey}; !slices.Equal(got, []string{"sk-a", "sk-b", "sk-$literal"}) {
					return fmt.Sprintf("api keys = %q", got)
				}
				return ""
			},
		},
		{
			name:  "non-key HERD_ variables",
			env:   []string{"HERD_ADMIN_EMAIL=a@example.com", "HERD_ADMIN_PASSWORD=pw", "HERD_EXTRA=1", "PATH=/bin"},
			check: func(*Config) string { return "" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadYAML(t, tt.file, tt.env, Overrides{NonKeyEnv: []string{"HERD_EXTRA"}})
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if msg := tt.check(c); msg != "" {
				t.Error(msg)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	const mcpServers = "mcp:\n  servers: ["
	const openai = "models:\n  - {name: gpt, provider: openai, "
	const agents = "subagents:\n  agents:\n    "
	tests := []struct {
		name string
		file string
		env  []string
		o    Overrides
		// want are the exact problems reported, in order.
		want []string
	}{
		// Decoding the file.
		{name: "unknown key", file: "subagents:\n  max_runing: 3\n", want: []string{`config: herd.yaml: unknown key "subagents.max_runing" (did you mean "subagents.max_running"?)`}},
		{name: "unknown top-level key", file: "sever: {}\n", want: []string{`config: herd.yaml: unknown key "sever" (did you mean "server"?)`}},
		{name: "unknown key far from any", file: "telemetry: on\n", want: []string{`config: herd.yaml: unknown key "telemetry"`}},
		{name: "unknown key in a list entry", file: "models:\n  - {nme: x, name: x, provider: demo}\n", want: []string{`config: herd.yaml: unknown key "models.0.nme" (did you mean "models.0.name"?)`}},
		{name: "unknown key in a map entry", file: agents + "x: {description: d, modle: inherit}\n", want: []string{`config: herd.yaml: unknown key "subagents.agents.x.modle" (did you mean "subagents.agents.x.model"?)`}},
		{name: "not an integer", file: "subagents:\n  max_running: lots\n", want: []string{`config: herd.yaml: subagents.max_running: expected an integer, got "lots"`}},
		{name: "not an integral number", file: "lead:\n  max_turns: 2.5\n", want: []string{`config: herd.yaml: lead.max_turns: expected an integer, got 2.5`}},
		{name: "not a boolean", file: "token_usage:\n  enabled: yes\n", want: []string{`config: herd.yaml: token_usage.enabled: expected true or false, got "yes"`}},
		{name: "vision not a boolean", file: "models:\n  - {name: x, provider: demo, vision: images}\n", want: []string{`config: herd.yaml: models.0.vision: expected true or false, got "images"`}},
		{name: "not a string", file: "server:\n  addr: [a]\n", want: []string{`config: herd.yaml: server.addr: expected a string, got a list`}},
		{name: "not a mapping", file: "server: 5\n", want: []string{`config: herd.yaml: server: expected a mapping, got 5`}},
		{name: "not a list", file: "models: {a: 1}\n", want: []string{`config: herd.yaml: models: expected a list, got a mapping`}},
		{name: "not a list of tools", file: agents + "x: {description: d, tools: ls}\n", want: []string{`config: herd.yaml: subagents.agents.x.tools: expected a list, got "ls"`}},
		{name: "document not a mapping", file: "[1, 2]\n", want: []string{`config: herd.yaml: expected a mapping, got a list`}},
		{name: "two documents", file: "lead: {max_turns: 1}\n---\nlead: {max_turns: 2}\n", want: []string{`config: herd.yaml: more than one YAML document`}},
		{name: "syntax error", file: "server: {addr: x\n", want: []string{`config: herd.yaml: [1:9] could not find flow mapping end token '}'`}},
		{name: "duplicate key", file: "log: {level: info}\nlog: {level: warn}\n", want: []string{`config: herd.yaml: [2:1] mapping key "log" already defined at [1:1]`}},
		{
			name: "a bad value is reported once, not again by validation",
			file: "models:\n  - {name: [x], provider: demo}\n",
			want: []string{`config: herd.yaml: models.0.name: expected a string, got a list`},
		},
		{
			name: "every problem at once",
			file: "subagents:\n  max_runing: 3\n  loop_limit: x\nlog:\n  level: loud\n",
			env:  []string{"HERD_LEAD_MAX_TURNS=0"},
			want: []string{
				`config: herd.yaml: unknown key "subagents.max_runing" (did you mean "subagents.max_running"?)`,
				`config: herd.yaml: subagents.loop_limit: expected an integer, got "x"`,
				`config: herd.yaml: log.level: must be one of debug, info, warn, error, got "loud"`,
				`config: HERD_LEAD_MAX_TURNS: must be at least 1, got 0`,
			},
		},

		// The environment.
		{name: "env not an integer", env: []string{"HERD_SUBAGENTS_MAX_RUNNING=x"}, want: []string{`config: HERD_SUBAGENTS_MAX_RUNNING: expected an integer, got "x"`}},
		{name: "env vision not a boolean", env: []string{"HERD_MODELS_0_VISION=sometimes"}, want: []string{`config: HERD_MODELS_0_VISION: expected true or false, got "sometimes"`}},
		{name: "env not a boolean", env: []string{"HERD_AUTH_ALLOW_SIGNUP=maybe"}, want: []string{`config: HERD_AUTH_ALLOW_SIGNUP: expected true or false, got "maybe"`}},
		{name: "env unknown, near a key", env: []string{"HERD_SUBAGENT_MAX_RUNNING=3"}, want: []string{`config: HERD_SUBAGENT_MAX_RUNNING: matches no config key (did you mean HERD_SUBAGENTS_MAX_RUNNING?)`}},
		{name: "env list entry missing", env: []string{"HERD_MODELS_7_NAME=x"}, want: []string{`config: HERD_MODELS_7_NAME: matches no config key: models has no such entry (set it whole with HERD_MODELS)`}},
		{name: "env map entry missing", env: []string{"HERD_SUBAGENTS_AGENTS_BASH_MODEL=demo-fast"}, want: []string{`config: HERD_SUBAGENTS_AGENTS_BASH_MODEL: matches no config key: subagents.agents has no such entry (set it whole with HERD_SUBAGENTS_AGENTS)`}},
		{name: "env bad YAML", env: []string{"HERD_MODELS=[{name: x"}, want: []string{`config: HERD_MODELS: invalid YAML: [1:2] could not find flow mapping end token '}'`}},
		{name: "env unknown key in a whole value", env: []string{"HERD_MODELS=[{nme: x, name: x, provider: demo}]"}, want: []string{`config: HERD_MODELS: unknown key "models.0.nme" (did you mean "models.0.name"?)`}},
		{name: "env bad type in a whole value", env: []string{"HERD_SUBAGENTS={max_running: x}"}, want: []string{`config: HERD_SUBAGENTS: subagents.max_running: expected an integer, got "x"`}},
		{
			name: "env name of two keys",
			file: agents + "a-b: {description: d}\n    a_b: {description: d}\n",
			env:  []string{"HERD_SUBAGENTS_AGENTS_A_B_MODEL=inherit"},
			want: []string{`config: HERD_SUBAGENTS_AGENTS_A_B_MODEL: names more than one key (subagents.agents.a-b.model, subagents.agents.a_b.model); set their parent whole instead`},
		},
		{name: "validation names the env variable", env: []string{"HERD_SUBAGENTS_MAX_RUNNING=0"}, want: []string{`config: HERD_SUBAGENTS_MAX_RUNNING: must be at least 1, got 0`}},
		{name: "validation names the flag", o: Overrides{Addr: "nope"}, want: []string{`config: --addr: must be host:port, got "nope"`}},

		// api_key references.
		{name: "api_key variable unset", file: openai + "api_key: $OPENAI_API_KEY}\n", want: []string{`config: herd.yaml: models.0.api_key: environment variable OPENAI_API_KEY is not set`}},
		{name: "api_key variable empty", file: openai + "api_key: '${OPENAI_API_KEY}'}\n", env: []string{"OPENAI_API_KEY="}, want: []string{`config: herd.yaml: models.0.api_key: environment variable OPENAI_API_KEY is not set`}},

		// Validation: server, log, auth.
		{name: "addr without port", file: "server: {addr: localhost}\n", want: []string{`config: herd.yaml: server.addr: must be host:port, got "localhost"`}},
		{name: "addr named port", file: "server: {addr: 'localhost:http'}\n", want: []string{`config: herd.yaml: server.addr: port must be a number from 0 to 65535, got "http"`}},
		{name: "addr port range", file: "server: {addr: '127.0.0.1:65536'}\n", want: []string{`config: herd.yaml: server.addr: port must be a number from 0 to 65535, got "65536"`}},
		{name: "data_dir empty", file: "server: {data_dir: ''}\n", want: []string{`config: herd.yaml: server.data_dir: must not be empty`}},
		{name: "public_url path", file: "server: {public_url: 'https://example.com/herd'}\n", want: []string{`config: herd.yaml: server.public_url: must be an http(s) origin such as https://herd.example.com, got "https://example.com/herd"`}},
		{name: "public_url scheme", file: "server: {public_url: 'ftp://example.com'}\n", want: []string{`config: herd.yaml: server.public_url: must be an http(s) origin such as https://herd.example.com, got "ftp://example.com"`}},
		{name: "public_url relative", file: "server: {public_url: example.com}\n", want: []string{`config: herd.yaml: server.public_url: must be an http(s) origin such as https://herd.example.com, got "example.com"`}},
		{name: "public_url query", file: "server: {public_url: 'https://example.com/?a=1'}\n", want: []string{`config: herd.yaml: server.public_url: must be an http(s) origin such as https://herd.example.com, got "https://example.com/?a=1"`}},
		{name: "allowed_hosts with port", file: "server: {allowed_hosts: ['herd.lan:8080']}\n", want: []string{`config: herd.yaml: server.allowed_hosts.0: must be a host name or IP address without scheme, port or path, got "herd.lan:8080"`}},
		{name: "trusted_proxies not a CIDR", file: "server: {trusted_proxies: [10.0.0.1]}\n", want: []string{`config: herd.yaml: server.trusted_proxies.0: must be a CIDR such as 10.0.0.0/8 or 127.0.0.1/32, got "10.0.0.1"`}},
		{name: "shutdown timeout", file: "server: {shutdown_timeout_seconds: 0}\n", want: []string{`config: herd.yaml: server.shutdown_timeout_seconds: must be at least 1, got 0`}},
		{name: "read header timeout", file: "server: {read_header_timeout_seconds: 0}\n", want: []string{`config: herd.yaml: server.read_header_timeout_seconds: must be at least 1, got 0`}},
		{name: "read timeout below the header timeout", file: "server: {read_timeout_seconds: 5}\n", want: []string{`config: herd.yaml: server.read_timeout_seconds: must be at least server.read_header_timeout_seconds (10), got 5`}},
		{name: "write timeout", file: "server: {write_timeout_seconds: 0}\n", want: []string{`config: herd.yaml: server.write_timeout_seconds: must be at least 1, got 0`}},
		{name: "idle timeout", file: "server: {idle_timeout_seconds: -1}\n", want: []string{`config: herd.yaml: server.idle_timeout_seconds: must be at least 1, got -1`}},
		{name: "max connections", file: "server: {max_connections: 2}\n", want: []string{`config: herd.yaml: server.max_connections: must be at least 8, got 2`}},
		{name: "metrics addr", file: "metrics: {addr: 'localhost'}\n", want: []string{`config: herd.yaml: metrics.addr: must be host:port or empty, got "localhost"`}},
		{name: "public metrics addr without a token", file: "metrics: {addr: ':9180'}\n", want: []string{`config: herd.yaml: metrics.addr: ":9180" is reachable from other machines and /metrics shows usage figures; listen on 127.0.0.1 or set metrics.token`}},
		{name: "short metrics token", env: []string{"HERD_METRICS_TOKEN=short"}, want: []string{`config: HERD_METRICS_TOKEN: must be at least 16 characters (or empty), got 5`}},
		{name: "log level", file: "log: {level: verbose}\n", want: []string{`config: herd.yaml: log.level: must be one of debug, info, warn, error, got "verbose"`}},
		{name: "log format", file: "log: {format: xml}\n", want: []string{`config: herd.yaml: log.format: must be one of text, json, got "xml"`}},
		{name: "budget period", file: "budgets: {default: {tokens: 100, period: year}}\n", want: []string{`config: herd.yaml: budgets.default.period: must be one of day, week, month, got "year"`}},
		{name: "budget tokens", file: "budgets: {default: {tokens: -1}}\n", want: []string{`config: herd.yaml: budgets.default.tokens: must be 0 (no budget) or more, got -1`}},
		{name: "price", file: "models: [{name: a, provider: demo, price: {input_per_mtok: -1, output_per_mtok: 2, currency: dollars}}]\n", want: []string{`config: herd.yaml: models.0.price.input_per_mtok: must be a price per million input tokens, 0 or more, got -1`, `config: herd.yaml: models.0.price.currency: must be a three-letter currency code such as USD or EUR, got "dollars"`}},
		{name: "session hours", file: "auth: {session_hours: 0}\n", want: []string{`config: herd.yaml: auth.session_hours: must be at least 1, got 0`}},
		{name: "audit retention", env: []string{"HERD_AUDIT_RETENTION_DAYS=-1"}, want: []string{`config: HERD_AUDIT_RETENTION_DAYS: must be at least 0, got -1`}},
		{name: "login attempts", file: "auth: {login_attempts_per_minute: 0}\n", want: []string{`config: herd.yaml: auth.login_attempts_per_minute: must be at least 1, got 0`}},
		{name: "runs per minute", file: "auth: {runs_per_minute: 0}\n", want: []string{`config: herd.yaml: auth.runs_per_minute: must be at least 1, got 0`}},
		{name: "threads per minute", file: "auth: {threads_per_minute: 0}\n", want: []string{`config: herd.yaml: auth.threads_per_minute: must be at least 1, got 0`}},
		{name: "sockets per user", file: "server: {max_sockets_per_user: 0}\n", want: []string{`config: herd.yaml: server.max_sockets_per_user: must be at least 1, got 0`}},
		{name: "renew seconds", file: "cluster: {renew_seconds: 0}\n", want: []string{`config: herd.yaml: cluster.renew_seconds: must be at least 1, got 0`}},
		{name: "lease not above two renewals", file: "cluster: {lease_seconds: 6, renew_seconds: 3}\n", want: []string{`config: herd.yaml: cluster.lease_seconds: must be more than twice cluster.renew_seconds (3), got 6`}},
		{name: "connects per minute", file: "server: {ws_connects_per_minute: -1}\n", want: []string{`config: herd.yaml: server.ws_connects_per_minute: must be at least 1, got -1`}},

		// Validation: models.
		{name: "no models", file: "models: []\n", want: []string{`config: herd.yaml: models: must list at least one model`}},
		{name: "model name empty", file: "models: [{provider: demo}]\n", want: []string{`config: herd.yaml: models.0.name: must not be empty`}},
		{name: "model name characters", file: "models: [{name: 'my model', provider: demo}]\n", want: []string{`config: herd.yaml: models.0.name: must match ^[A-Za-z0-9][A-Za-z0-9._:-]*$, got "my model"`}},
		{name: "model name taken", file: "models: [{name: a, provider: demo}, {name: a, provider: demo}]\n", want: []string{`config: herd.yaml: models.1.name: "a" is already the name of models.0`}},
		{name: "provider", file: "models: [{name: a, provider: claude}]\n", want: []string{`config: herd.yaml: models.0.provider: must be one of openai, anthropic, demo, got "claude"`}},
		{name: "anthropic api_key", file: "models: [{name: a, provider: anthropic}]\n", want: []string{`config: herd.yaml: models.0.api_key: is required for provider anthropic (a key, or $ENV_VAR)`}},
		{name: "anthropic base_url", file: "models: [{name: a, provider: anthropic, api_key: k, base_url: 'api.anthropic.com'}]\n", want: []string{`config: herd.yaml: models.0.base_url: must be an absolute http(s) URL, got "api.anthropic.com"`}},
		{name: "anthropic stream", file: "models: [{name: a, provider: anthropic, api_key: k, stream: false}]\n", want: []string{`config: herd.yaml: models.0.stream: provider anthropic always streams: must be auto or true, got "false"`}},
		{name: "thinking on openai", file: openai + "thinking_budget_tokens: 2048}\n", want: []string{`config: herd.yaml: models.0.thinking_budget_tokens: is only for provider anthropic (OpenAI-compatible servers send their reasoning unasked), got 2048`}},
		{name: "thinking below the minimum", file: "models: [{name: a, provider: anthropic, api_key: k, thinking_budget_tokens: 1000}]\n", want: []string{`config: herd.yaml: models.0.thinking_budget_tokens: must be 0 (off) or at least 1024 (the API's minimum), got 1000`}},
		{name: "thinking at max tokens", file: "models: [{name: a, provider: anthropic, api_key: k, thinking_budget_tokens: 4096}]\n", want: []string{`config: herd.yaml: models.0.thinking_budget_tokens: must be below max_output_tokens (4096): thinking is part of each answer's max_tokens, got 4096`}},
		{name: "thinking above max tokens", file: "models: [{name: a, provider: anthropic, api_key: k, max_output_tokens: 2000, thinking_budget_tokens: 3000}]\n", want: []string{`config: herd.yaml: models.0.thinking_budget_tokens: must be below max_output_tokens (2000): thinking is part of each answer's max_tokens, got 3000`}},
		{name: "max_output_tokens", file: openai + "max_output_tokens: -1}\n", want: []string{`config: herd.yaml: models.0.max_output_tokens: must be at least 0, got -1`}},
		{name: "base_url", file: openai + "base_url: 'localhost:11434/v1'}\n", want: []string{`config: herd.yaml: models.0.base_url: must be an absolute http(s) URL, got "localhost:11434/v1"`}},
		{name: "context_window", file: openai + "context_window: -1}\n", want: []string{`config: herd.yaml: models.0.context_window: must be 0 (unknown) or at least 512 tokens, got -1`}},
		{name: "context_window in thousands", file: openai + "context_window: 128}\n", want: []string{`config: herd.yaml: models.0.context_window: must be 0 (unknown) or at least 512 tokens, got 128`}},
		{name: "max_output_tokens over the window", file: openai + "context_window: 8192, max_output_tokens: 8192}\n", want: []string{`config: herd.yaml: models.0.max_output_tokens: must be less than context_window (8192), got 8192`}},
		{name: "model timeout", file: openai + "timeout_seconds: -1}\n", want: []string{`config: herd.yaml: models.0.timeout_seconds: must be at least 0, got -1`}},
		{name: "max_retries", file: openai + "max_retries: -1}\n", want: []string{`config: herd.yaml: models.0.max_retries: must be at least 0, got -1`}},
		{name: "stream", file: openai + "stream: sometimes}\n", want: []string{`config: herd.yaml: models.0.stream: must be one of auto, true, false, got "sometimes"`}},
		{name: "latency_ms", file: "models: [{name: a, provider: demo, latency_ms: -1}]\n", want: []string{`config: herd.yaml: models.0.latency_ms: must be at least 0, got -1`}},
		{name: "latency_jitter", file: "models: [{name: a, provider: demo, latency_jitter: 1.5}]\n", want: []string{`config: herd.yaml: models.0.latency_jitter: must be from 0 to 1, got 1.5`}},
		{name: "chunk_ms", file: "models: [{name: a, provider: demo, chunk_ms: -1}]\n", want: []string{`config: herd.yaml: models.0.chunk_ms: must be at least 0, got -1`}},
		{name: "fail_after", file: "models: [{name: a, provider: demo, fail_after: -1}]\n", want: []string{`config: herd.yaml: models.0.fail_after: must be at least 0, got -1`}},

		// Validation: lead and subagent limits.
		{name: "lead max_turns", file: "lead: {max_turns: 0}\n", want: []string{`config: herd.yaml: lead.max_turns: must be at least 1, got 0`}},
		{name: "subagent timeout", file: "subagents: {timeout_seconds: 0}\n", want: []string{`config: herd.yaml: subagents.timeout_seconds: must be at least 1, got 0`}},
		{name: "subagent max_turns", file: "subagents: {max_turns: 0}\n", want: []string{`config: herd.yaml: subagents.max_turns: must be at least 1, got 0`}},
		{name: "max_running", file: "subagents: {max_running: 0}\n", want: []string{`config: herd.yaml: subagents.max_running: must be at least 1, got 0`}},
		{name: "max_running_per_user", file: "subagents: {max_running_per_user: 0}\n", want: []string{`config: herd.yaml: subagents.max_running_per_user: must be at least 1, got 0`}},
		{name: "lead max_active_runs_per_user", file: "lead: {max_active_runs_per_user: 0}\n", want: []string{`config: herd.yaml: lead.max_active_runs_per_user: must be at least 1, got 0`}},
		{name: "max_concurrent_per_response", file: "subagents: {max_concurrent_per_response: 0}\n", want: []string{`config: herd.yaml: subagents.max_concurrent_per_response: must be at least 1, got 0`}},
		{name: "max_total_per_run", file: "subagents: {max_total_per_run: 0}\n", want: []string{`config: herd.yaml: subagents.max_total_per_run: must be at least 1, got 0`}},
		{name: "queue_timeout_seconds", file: "subagents: {queue_timeout_seconds: 0}\n", want: []string{`config: herd.yaml: subagents.queue_timeout_seconds: must be at least 1, got 0`}},
		{name: "safety_margin_seconds", file: "subagents: {safety_margin_seconds: -1}\n", want: []string{`config: herd.yaml: subagents.safety_margin_seconds: must be at least 0, got -1`}},
		{name: "cancel_grace_seconds", file: "subagents: {cancel_grace_seconds: 0}\n", want: []string{`config: herd.yaml: subagents.cancel_grace_seconds: must be at least 1, got 0`}},
		{name: "loop_limit", file: "subagents: {loop_limit: 1}\n", want: []string{`config: herd.yaml: subagents.loop_limit: must be at least 2, got 1`}},

		// Validation: agents.
		{name: "agent name", file: agents + "Helper: {description: d}\n", want: []string{`config: herd.yaml: subagents.agents.Helper: agent name must match ^[a-z][a-z0-9_-]*$`}},
		{
			name: "built-in fields",
			file: agents + "general-purpose: {description: d, system_prompt: p}\n    bash: {tools: [bash], disallowed_tools: []}\n",
			want: []string{
				`config: herd.yaml: subagents.agents.bash.tools: cannot be set for the built-in subagent bash (only model, max_turns, timeout_seconds and token_budget can)`,
				`config: herd.yaml: subagents.agents.bash.disallowed_tools: cannot be set for the built-in subagent bash (only model, max_turns, timeout_seconds and token_budget can)`,
				`config: herd.yaml: subagents.agents.general-purpose.description: cannot be set for the built-in subagent general-purpose (only model, max_turns, timeout_seconds and token_budget can)`,
				`config: herd.yaml: subagents.agents.general-purpose.system_prompt: cannot be set for the built-in subagent general-purpose (only model, max_turns, timeout_seconds and token_budget can)`,
			},
		},
		{name: "custom agent description", file: agents + "x: {model: inherit}\n", want: []string{`config: herd.yaml: subagents.agents.x.description: a custom subagent needs a description for the lead to choose it by`}},
		{name: "agent model", file: agents + "x: {description: d, model: gpt-5}\n", want: []string{`config: herd.yaml: subagents.agents.x.model: unknown model "gpt-5" (must be inherit or one of: demo-fast, demo-deep)`}},
		{
			name: "an agent model the file names must exist",
			file: "models: [{name: gpt, provider: openai}]\n" + agents + "x: {description: d, model: demo-deep}\n",
			want: []string{`config: herd.yaml: subagents.agents.x.model: unknown model "demo-deep" (must be inherit or one of: gpt)`},
		},
		{name: "agent tools", file: agents + "x: {description: d, tools: [ls, grep]}\n", want: []string{`config: herd.yaml: subagents.agents.x.tools.1: unknown tool "grep" (known: task, bash, ls, read_file, write_file, str_replace, or mcp:<server>/<tool>)`}},
		{name: "agent disallowed_tools", file: agents + "x: {description: d, disallowed_tools: [rm]}\n", want: []string{`config: herd.yaml: subagents.agents.x.disallowed_tools.0: unknown tool "rm" (known: task, bash, ls, read_file, write_file, str_replace, or mcp:<server>/<tool>)`}},
		{name: "agent max_turns", file: agents + "bash: {max_turns: 0}\n", want: []string{`config: herd.yaml: subagents.agents.bash.max_turns: must be at least 1, got 0`}},
		{name: "agent timeout", file: agents + "x: {description: d, timeout_seconds: 0}\n", want: []string{`config: herd.yaml: subagents.agents.x.timeout_seconds: must be at least 1, got 0`}},
		{name: "agent token_budget", file: agents + "x: {description: d, token_budget: -1}\n", want: []string{`config: herd.yaml: subagents.agents.x.token_budget: must be at least 0, got -1`}},

		// Validation: sandbox.
		{name: "sandbox mode", file: "sandbox: {mode: docker}\n", want: []string{`config: herd.yaml: sandbox.mode: must be one of auto, bwrap, host, got "docker"`}},
		{name: "bash timeout", file: "sandbox: {bash_timeout_seconds: 0}\n", want: []string{`config: herd.yaml: sandbox.bash_timeout_seconds: must be at least 1, got 0`}},
		{name: "output limit", file: "sandbox: {output_limit_bytes: 1023}\n", want: []string{`config: herd.yaml: sandbox.output_limit_bytes: must be at least 1024, got 1023`}},
		{name: "sandbox network", file: "sandbox: {network: bridge}\n", want: []string{`config: herd.yaml: sandbox.network: must be one of none, host, got "bridge"`}},
		{name: "host network with metrics and no token", file: "sandbox: {network: host}\n", want: []string{`config: herd.yaml: sandbox.network: is host, so sandboxed commands share this machine's network and could read /metrics on metrics.addr (127.0.0.1:9180), which has no token; set metrics.token (better HERD_METRICS_TOKEN), or metrics.addr to "" for no metrics listener, or sandbox.network to none`}},
		{name: "host network in bwrap mode with metrics and no token", env: []string{"HERD_SANDBOX_MODE=bwrap", "HERD_SANDBOX_NETWORK=host", "HERD_METRICS_ADDR=[::1]:9999"}, want: []string{`config: HERD_SANDBOX_NETWORK: is host, so sandboxed commands share this machine's network and could read /metrics on metrics.addr ([::1]:9999), which has no token; set metrics.token (better HERD_METRICS_TOKEN), or metrics.addr to "" for no metrics listener, or sandbox.network to none`}},
		{name: "sandbox user", file: "sandbox: {user: ' '}\n", want: []string{`config: herd.yaml: sandbox.user: must name an account (a user name, a uid, or uid:gid), got " "`}},
		{name: "sandbox limits", file: "sandbox:\n  limits: {processes: 7, memory_mb: 63, cpu_seconds: 0, file_size_mb: 0, tmp_mb: 0, workspace_mb: 0, workspace_files: 15, min_free_mb: 0, commands_per_user: 0, cpus: 0}\n", want: []string{
			`config: herd.yaml: sandbox.limits.processes: must be at least 8, got 7`,
			`config: herd.yaml: sandbox.limits.memory_mb: must be at least 64, got 63`,
			`config: herd.yaml: sandbox.limits.cpu_seconds: must be at least 1, got 0`,
			`config: herd.yaml: sandbox.limits.file_size_mb: must be at least 1, got 0`,
			`config: herd.yaml: sandbox.limits.tmp_mb: must be at least 1, got 0`,
			`config: herd.yaml: sandbox.limits.workspace_mb: must be at least 1, got 0`,
			`config: herd.yaml: sandbox.limits.workspace_files: must be at least 16, got 15`,
			`config: herd.yaml: sandbox.limits.min_free_mb: must be at least 1, got 0`,
			`config: herd.yaml: sandbox.limits.commands_per_user: must be at least 1, got 0`,
			`config: herd.yaml: sandbox.limits.cpus: must be between 0.01 and 1024, got 0`,
		}},

		// Validation: mcp.
		{name: "mcp no transport", file: mcpServers + "{name: a}]\n", want: []string{`config: herd.yaml: mcp.servers.0: needs a command (stdio) or a url (streamable HTTP)`}},
		{name: "mcp two transports", file: mcpServers + "{name: a, command: x, url: 'http://127.0.0.1:1/mcp'}]\n", want: []string{`config: herd.yaml: mcp.servers.0: set command (stdio) or url (streamable HTTP), not both`}},
		{name: "mcp bad name", file: mcpServers + "{name: My_Files, command: x}]\n", want: []string{`config: herd.yaml: mcp.servers.0.name: must match ^[a-z0-9]([a-z0-9-]{0,23})$ (lower-case letters, digits and -, at most 24), got "My_Files"`}},
		{name: "mcp duplicate name", file: mcpServers + "{name: a, command: x}, {name: a, command: y}]\n", want: []string{`config: herd.yaml: mcp.servers.1.name: "a" names two servers`}},
		{name: "mcp url", file: mcpServers + "{name: a, url: 'ftp://h/mcp'}]\n", want: []string{`config: herd.yaml: mcp.servers.0.url: must be an http:// or https:// URL with a host and no user info`}},
		{name: "mcp url with user info", file: mcpServers + "{name: a, url: 'http://u:p@h/mcp'}]\n", want: []string{`config: herd.yaml: mcp.servers.0.url: must be an http:// or https:// URL with a host and no user info`}},
		{name: "mcp headers on stdio", file: mcpServers + "{name: a, command: x, headers: {X-A: b}}]\n", want: []string{`config: herd.yaml: mcp.servers.0.headers: only an HTTP server (url) has headers; a stdio server takes env`}},
		{name: "mcp env on http", file: mcpServers + "{name: a, url: 'http://h/mcp', env: {A: b}}]\n", want: []string{`config: herd.yaml: mcp.servers.0: args and env are for a stdio server (command); an HTTP server takes headers`}},
		{name: "mcp reserved header", file: mcpServers + "{name: a, url: 'http://h/mcp', headers: {mcp-session-id: x}}]\n", want: []string{`config: herd.yaml: mcp.servers.0.headers: mcp-session-id is set by the MCP client itself`}},
		{name: "mcp use and timeout", file: mcpServers + "{name: a, command: x, use: everyone, timeout_seconds: -1}]\n", want: []string{
			`config: herd.yaml: mcp.servers.0.timeout_seconds: must be at least 1, got -1`,
			`config: herd.yaml: mcp.servers.0.use: must be one of all, admins, got "everyone"`,
		}},
		{name: "mcp empty tool name", file: mcpServers + "{name: a, command: x, tools: [''], disallowed_tools: [' ']}]\n", want: []string{
			`config: herd.yaml: mcp.servers.0.tools.0: a tool name cannot be empty`,
			`config: herd.yaml: mcp.servers.0.disallowed_tools.0: a tool name cannot be empty`,
		}},
		{name: "mcp secret variable missing", file: mcpServers + "{name: a, url: 'http://h/mcp', headers: {Authorization: 'Bearer ${NO_SUCH_TOKEN}'}}]\n", want: []string{`config: herd.yaml: mcp.servers.0.headers.Authorization: environment variable NO_SUCH_TOKEN is not set`}},
		{name: "mcp tool of no server", file: mcpServers + "{name: files, command: x}]\nlead: {tools: [ls, 'mcp:search/*']}\n", want: []string{`config: herd.yaml: lead.tools.1: "mcp:search/*" names no MCP server (configured: files)`}},
		{name: "mcp tool with no servers", file: agents + "x: {description: d, tools: ['mcp:files/read']}\n", want: []string{`config: herd.yaml: subagents.agents.x.tools.0: "mcp:files/read" names an MCP server, but mcp.servers is empty`}},
		{name: "mcp tool malformed", file: mcpServers + "{name: files, command: x}]\nlead: {tools: ['mcp:files']}\n", want: []string{`config: herd.yaml: lead.tools.0: "mcp:files" must be mcp:<server>/<tool> or mcp:<server>/*`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadYAML(t, tt.file, tt.env, tt.o)
			if err == nil {
				t.Fatalf("loaded %s\nwant errors %q", c, tt.want)
			}
			if c != nil {
				t.Errorf("got a config with the error")
			}
			if got := errorLines(err); !slices.Equal(got, tt.want) {
				t.Errorf("errors:\ngot  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestValid(t *testing.T) {
	tests := []struct {
		name string
		file string
		env  []string
		o    Overrides
	}{
		{name: "built-in with its four fields", file: "subagents:\n  agents:\n    bash: {model: demo-fast, max_turns: 5, timeout_seconds: 60, token_budget: 1000}\n"},
		{name: "custom agent on inherit with tools", file: "subagents:\n  agents:\n    x: {description: d, model: inherit, tools: [ls, bash], disallowed_tools: [task]}\n"},
		{name: "public url with slash", file: "server: {public_url: 'https://herd.example.com/'}\n"},
		{name: "allowed hosts and proxies", file: "server: {allowed_hosts: [herd.lan, 192.168.1.20, '[::1]', 'fe80::1'], trusted_proxies: [127.0.0.1/32, 10.0.0.0/8, '::1/128']}\n"},
		{name: "any interface, port 0", o: Overrides{Addr: ":0"}},
		{name: "ipv6 origin", env: []string{"HERD_SERVER_ADDR=[::1]:8080", "HERD_SERVER_PUBLIC_URL=http://[::1]:8080"}},
		{name: "empty file", file: "# nothing yet\n"},
		{name: "mcp servers named by lead and agent", file: "mcp:\n  servers:\n    - {name: files, command: npx, args: [-y, x], env: {A: b}, tools: [read], disallowed_tools: [write]}\n    - {name: search, url: 'https://s.example.com/mcp', headers: {Authorization: 'Bearer ${TOK}'}, use: admins, timeout_seconds: 5}\nlead: {tools: [ls, bash, 'mcp:files/*']}\nsubagents: {agents: {x: {description: d, tools: ['mcp:search/web_search'], disallowed_tools: ['mcp:files/write']}}}\n", env: []string{"TOK=t"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := loadYAML(t, tt.file, tt.env, tt.o); err != nil {
				t.Errorf("load: %v", err)
			}
		})
	}
}

func TestSecretsStayHidden(t *testing.T) {
	const secret = "sk-SECRET-4f2a9c81"
	tests := []struct {
		name string
		file string
		env  []string
	}{
		{name: "key in the file beside an error", file: "models: [{name: gpt, provider: openai, api_key: " + secret + "}]\nlead: {max_turns: 0}\n"},
		{name: "key of the wrong type", file: "models: [{name: gpt, provider: openai, api_key: 48151623}]\n"},
		{name: "key in a list", file: "models: [{name: gpt, provider: openai, api_key: [" + secret + "]}]\n"},
		{name: "key from an env override beside an error", env: []string{"HERD_MODELS_0_API_KEY=" + secret, "HERD_LEAD_MAX_TURNS=0"}},
		{name: "key in a whole env value", env: []string{"HERD_MODELS=[{name: gpt, provider: openai, api_key: " + secret + ", nme: x}]"}},
		{name: "key in a broken env value", env: []string{"HERD_MODELS=[{name: gpt, provider: openai, api_key: " + secret + "}"}},
		{name: "mcp header beside an error", file: "mcp: {servers: [{name: a, url: 'http://h/mcp', headers: {Authorization: " + secret + "}}]}\nlead: {max_turns: 0}\n"},
		{name: "mcp header of the wrong type", file: "mcp: {servers: [{name: a, url: 'http://h/mcp', headers: {Authorization: [" + secret + "]}}]}\n"},
		{name: "mcp env not a mapping", file: "mcp: {servers: [{name: a, command: x, env: " + secret + "}]}\n"},
		{name: "mcp url beside an error", file: "mcp: {servers: [{name: a, url: 'http://h/mcp?api_key=" + secret + "'}]}\nlead: {max_turns: 0}\n"},
		{name: "mcp url of the wrong type", file: "mcp: {servers: [{name: a, url: 48151623}]}\n"},
		{name: "mcp url not http", file: "mcp: {servers: [{name: a, url: 'ftp://h/" + secret + "'}]}\n"},
		{name: "mcp header with a newline", env: []string{"HERD_MCP_SERVERS=[{name: a, url: 'http://h/mcp', headers: {X-Key: \"" + secret + "\\n\"}}]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadYAML(t, tt.file, tt.env, Overrides{})
			if err == nil {
				t.Fatal("loaded, want an error")
			}
			for _, s := range []string{secret, "48151623"} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error shows the key: %v", err)
				}
			}
		})
	}
}

func TestRedacted(t *testing.T) {
	const secret = "sk-SECRET-4f2a9c81"
	tests := []struct {
		name string
		env  []string
	}{
		{name: "env override", env: []string{"HERD_MODELS_0_API_KEY=" + secret}},
		{name: "$VAR reference", env: []string{"HERD_MODELS=[{name: gpt, provider: openai, api_key: $OPENAI_API_KEY}]", "OPENAI_API_KEY=" + secret}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadYAML(t, "", tt.env, Overrides{})
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if c.Models[0].APIKey != secret {
				t.Fatalf("api key = %q, want the secret, for the provider", c.Models[0].APIKey)
			}
			var jsonLog, textLog bytes.Buffer
			slog.New(slog.NewJSONHandler(&jsonLog, nil)).Info("config", "config", c)
			slog.New(slog.NewTextHandler(&textLog, nil)).Info("config", "config", *c)
			for name, out := range map[string]string{
				"String":    c.String(),
				"%v":        fmt.Sprintf("%v %+v", c, *c),
				"slog JSON": jsonLog.String(),
				"slog text": textLog.String(),
			} {
				if strings.Contains(out, secret) || !strings.Contains(out, redactedKey) || !strings.Contains(out, c.Models[0].Name) {
					t.Errorf("%s = %s\nwant the config with the key masked", name, out)
				}
			}
			if c.Models[0].APIKey != secret {
				t.Errorf("rendering changed the key to %q", c.Models[0].APIKey)
			}
		})
	}
}

// MCP env and header values, which hold tokens, and URLs past the host,
// which may, are masked in every rendering of the config and kept for
// the client.
func TestMCPSecretsRedacted(t *testing.T) {
	const secret = "tok-SECRET-99c1"
	file := "mcp:\n  servers:\n    - {name: search, url: 'https://s.example.com/mcp', headers: {Authorization: 'Bearer ${SEARCH_TOKEN}'}}\n    - {name: files, command: x, env: {API_KEY: '${FILES_KEY}'}}\n" +
		"    - {name: keyed, url: 'https://k.example.com/t/path-SECRET-5e1a/mcp?api_key=query-SECRET-7b2c'}\n"
	c, err := loadYAML(t, file, []string{"SEARCH_TOKEN=" + secret, "FILES_KEY=" + secret}, Overrides{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if got := c.MCP.Servers[0].Headers["Authorization"]; got != "Bearer "+secret {
		t.Errorf("header = %q, want the expanded secret", got)
	}
	if got := c.MCP.Servers[1].Env["API_KEY"]; got != secret {
		t.Errorf("env = %q, want the expanded secret", got)
	}
	if s := c.MCP.Servers[1]; s.Use != "admins" || s.TimeoutSeconds != 60 || c.MCP.Servers[0].Use != "all" {
		t.Errorf("defaults: stdio use %q timeout %d, http use %q; want admins, 60, all", s.Use, s.TimeoutSeconds, c.MCP.Servers[0].Use)
	}
	var jsonLog bytes.Buffer
	slog.New(slog.NewJSONHandler(&jsonLog, nil)).Info("config", "config", c)
	for name, out := range map[string]string{"String": c.String(), "%v": fmt.Sprintf("%v", *c), "slog": jsonLog.String()} {
		if strings.Contains(out, secret) || strings.Contains(out, "path-SECRET") || strings.Contains(out, "query-SECRET") ||
			!strings.Contains(out, "search") || !strings.Contains(out, "https://k.example.com/[redacted]") {
			t.Errorf("%s = %s\nwant the servers with their secrets masked", name, out)
		}
	}
	if got := c.MCP.Servers[2].URL; got != "https://k.example.com/t/path-SECRET-5e1a/mcp?api_key=query-SECRET-7b2c" {
		t.Errorf("url = %q: rendering changed it", got)
	}
	if c.MCP.Servers[1].Env["API_KEY"] != secret {
		t.Error("rendering changed the secret")
	}
}

func FuzzLoad(f *testing.F) {
	const secret = "sk-fuzz-7f3a9c81"
	f.Add(readExample(f))
	f.Add([]byte("models:\n  - {name: gpt, provider: openai, api_key: $FUZZ_KEY}\n"))
	f.Add([]byte("models:\n  - &m {name: a, provider: demo}\n  - <<: *m\n    name: b\nsubagents: {agents: {x: {description: d, model: a, tools: [ls]}}}\n"))
	f.Add([]byte("subagents:\n  max_running: lots\n  agents: {bash: {description: x}}\n"))
	f.Add([]byte("server: {addr: [}\n"))
	f.Add([]byte("a: &a [*a]\nserver: *a\n"))
	f.Add([]byte("---\n---\n"))
	// Inputs that once made the YAML library panic (goccy/go-yaml#540, #274).
	f.Add([]byte("true :\n"))
	f.Add([]byte("10.:\n"))
	f.Add([]byte("{? {? \n"))
	f.Add([]byte("models:\n- name: c\n- \n"))
	defaults := readExample(f)
	env := []string{"FUZZ_KEY=" + secret, "HERD_MODELS_0_LATENCY_MS=1"}
	f.Fuzz(func(t *testing.T, file []byte) {
		c, err := load(defaults, "fuzz.yaml", file, env, Overrides{})
		if err != nil {
			for _, line := range errorLines(err) {
				if !strings.HasPrefix(line, "config: ") {
					t.Errorf("error line without the config prefix: %q", line)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error shows the key: %v", err)
			}
			return
		}
		if len(c.Models) == 0 {
			t.Error("loaded with no models")
		}
		if strings.Contains(c.String(), secret) {
			t.Errorf("String shows the key: %s", c)
		}
	})
}

// A HERD_ variable that resembles no key is warned about, not refused: a
// shared environment may hold HERD_ settings of other programs.
func TestUnknownEnvIsAWarning(t *testing.T) {
	c, err := loadYAML(t, "", []string{"HERD_TELEMETRY=on", "HERD_ADMIN_EMAIL=a@example.com"}, Overrides{})
	if err != nil {
		t.Fatalf("an unrelated HERD_ variable stopped the load: %v", err)
	}
	want := []string{"config: HERD_TELEMETRY: matches no config key; ignored"}
	if !slices.Equal(c.Warnings, want) {
		t.Errorf("warnings %q, want %q", c.Warnings, want)
	}
	if _, err := loadYAML(t, "", []string{"HERD_SUBAGENT_MAX_RUNNING=3"}, Overrides{}); err == nil {
		t.Error("a near-miss of a real key loaded; it must stay an error naming the key")
	}
}

func TestVariablesNameRealKeys(t *testing.T) {
	names, err := Variables(readExample(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"HERD_SERVER_ADDR", "HERD_SUBAGENTS_MAX_RUNNING", "HERD_MODELS", "HERD_SUBAGENTS_AGENTS", "HERD_SANDBOX_MODE"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s missing from %v", want, names)
		}
	}
	// Each listed variable is accepted by Load, so the help cannot name a
	// variable herd refuses.
	for _, n := range names {
		if n == "HERD_MODELS" || n == "HERD_SUBAGENTS_AGENTS" || n == "HERD_LEAD_SYSTEM_PROMPT" {
			continue
		}
		if _, err := loadYAML(t, "", []string{n + "=" + "1"}, Overrides{}); err != nil && strings.Contains(err.Error(), "matches no config key") {
			t.Errorf("%s: %v", n, err)
		}
	}
}

func TestMetricsAddressWithTokenOrEmpty(t *testing.T) {
	for _, c := range []struct {
		name string
		file string
		env  []string
		want MetricsConfig
	}{
		{name: "no metrics listener", file: "metrics: {addr: ''}\n", want: MetricsConfig{}},
		{name: "a public address with a token", file: "metrics: {addr: '0.0.0.0:9180'}\n", env: []string{"HERD_METRICS_TOKEN=0123456789abcdef"}, want: MetricsConfig{Addr: "0.0.0.0:9180", Token: "0123456789abcdef"}},
		{name: "localhost", file: "metrics: {addr: 'localhost:9999'}\n", want: MetricsConfig{Addr: "localhost:9999"}},
		// Commands on the host's network: a token, or no listener. Host
		// mode's commands read the configuration anyway.
		{name: "host network with a token", file: "sandbox: {network: host}\n", env: []string{"HERD_METRICS_TOKEN=0123456789abcdef"}, want: MetricsConfig{Addr: "127.0.0.1:9180", Token: "0123456789abcdef"}},
		{name: "host network without a listener", file: "sandbox: {network: host}\nmetrics: {addr: ''}\n", want: MetricsConfig{}},
		{name: "host network in host mode", file: "sandbox: {mode: host, network: host}\n", want: MetricsConfig{Addr: "127.0.0.1:9180"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := loadYAML(t, c.file, c.env, Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Metrics != c.want {
				t.Errorf("metrics = %+v, want %+v", got.Metrics, c.want)
			}
		})
	}
}

// TestDatabaseConfig: the driver, the DSN from the file or
// HERD_DATABASE_DSN, the start-up wait, and a clear error for each
// mistake.
func TestDatabaseConfig(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		env        []string
		want       DatabaseConfig
		err        string
	}{
		{name: "default", want: DatabaseConfig{Driver: "sqlite", ConnectTimeoutSeconds: 60}},
		{name: "postgres from the file", file: "database: {driver: postgres, dsn: 'postgres://herd@db:5432/herd'}",
			want: DatabaseConfig{Driver: "postgres", DSN: "postgres://herd@db:5432/herd", ConnectTimeoutSeconds: 60}},
		{name: "dsn from the environment", file: "database: {driver: postgres}", env: []string{"HERD_DATABASE_DSN=host=/run/pg user=herd dbname=herd"},
			want: DatabaseConfig{Driver: "postgres", DSN: "host=/run/pg user=herd dbname=herd", ConnectTimeoutSeconds: 60}},
		{name: "driver from the environment", env: []string{"HERD_DATABASE_DRIVER=postgres", "HERD_DATABASE_DSN=postgres://h/d"},
			want: DatabaseConfig{Driver: "postgres", DSN: "postgres://h/d", ConnectTimeoutSeconds: 60}},
		{name: "connect timeout from the environment", env: []string{"HERD_DATABASE_DRIVER=postgres", "HERD_DATABASE_DSN=postgres://h/d", "HERD_DATABASE_CONNECT_TIMEOUT_SECONDS=5"},
			want: DatabaseConfig{Driver: "postgres", DSN: "postgres://h/d", ConnectTimeoutSeconds: 5}},
		{name: "connect timeout 0 tries once", file: "database: {connect_timeout_seconds: 0}", want: DatabaseConfig{Driver: "sqlite"}},
		{name: "negative connect timeout", file: "database: {connect_timeout_seconds: -1}", err: "database.connect_timeout_seconds: must be at least 0, got -1"},
		{name: "unknown driver", file: "database: {driver: mysql}", err: `database.driver: must be sqlite or postgres, got "mysql"`},
		{name: "postgres without a dsn", file: "database: {driver: postgres}", err: "database.dsn: must name the PostgreSQL database"},
		{name: "a dsn for sqlite", env: []string{"HERD_DATABASE_DSN=postgres://h/d"}, err: "HERD_DATABASE_DSN: is only for database.driver postgres"},
		{name: "a bad dsn, password kept out", file: "database: {driver: postgres, dsn: 'postgres://herd:s3cret@db:notaport/herd'}", err: "database.dsn: is not a PostgreSQL connection string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := loadYAML(t, tc.file, tc.env, Overrides{})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Database != tc.want {
				t.Errorf("database = %+v, want %+v", got.Database, tc.want)
			}
		})
	}
}

// TestPriceCurrencyDefault: a price without a currency is in US dollars,
// for a model of any provider.
func TestPriceCurrencyDefault(t *testing.T) {
	for _, provider := range []string{"demo", "openai"} {
		cfg, err := loadYAML(t, "models: [{name: a, provider: "+provider+", api_key: k, price: {input_per_mtok: 1, output_per_mtok: 2}}]\n", nil, Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		if p := cfg.Models[0].Price; p == nil || p.Currency != "USD" {
			t.Errorf("%s: price %+v, want its currency USD", provider, p)
		}
	}
}
