package mcp

import "time"

// Who may use a server's tools (ServerConfig.Use).
const (
	UseAll    = "all"
	UseAdmins = "admins"
)

// DefaultTimeoutSeconds bounds one tool call when a server sets no
// timeout_seconds.
const DefaultTimeoutSeconds = 60

// Config is the mcp section: the servers whose tools agents may be given
// (docs/OPERATIONS.md, "MCP servers").
type Config struct {
	Servers []ServerConfig `yaml:"servers"`
}

// ServerConfig is one MCP server. Exactly one transport is set: Command
// (stdio: herd starts it as a child process) or URL (streamable HTTP).
// Env and header values may name environment variables as ${NAME}; config
// loading replaces them, and they are never shown (they hold tokens).
type ServerConfig struct {
	Name string `yaml:"name"`
	// stdio
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	// streamable HTTP
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Tools allow-lists the server's tools by their own names (nil: all);
	// DisallowedTools removes some.
	Tools           *[]string `yaml:"tools"`
	DisallowedTools []string  `yaml:"disallowed_tools"`
	// TimeoutSeconds bounds one tool call, and the connection's start.
	TimeoutSeconds int `yaml:"timeout_seconds"`
	// Use is all or admins: whose runs may see the server's tools.
	Use string `yaml:"use"`
}

// Stdio reports whether the server runs as a child process.
func (c ServerConfig) Stdio() bool { return c.Command != "" }

// Transport names the server's transport for people: stdio or http.
func (c ServerConfig) Transport() string {
	if c.Stdio() {
		return "stdio"
	}
	return "http"
}

// WithDefaults fills what the entry leaves out: the timeout, and use,
// which is admins for a stdio server (it runs on the host as herd's user)
// and all for an HTTP one.
func (c ServerConfig) WithDefaults() ServerConfig {
	if c.TimeoutSeconds == 0 {
		c.TimeoutSeconds = DefaultTimeoutSeconds
	}
	if c.Use == "" {
		c.Use = UseAll
		if c.Stdio() {
			c.Use = UseAdmins
		}
	}
	return c
}

func (c ServerConfig) timeout() time.Duration {
	return time.Duration(c.TimeoutSeconds) * time.Second
}
