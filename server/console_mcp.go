package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"herd/agent"
	"herd/agent/mcp"
	"herd/models"
)

// MCPApplier puts MCP servers in force: herd.yaml's, then the console's
// (*mcp.Servers.Set).
type MCPApplier func([]mcp.ServerConfig)

// storedMCP is an MCP server as the console stores it: its settings
// without the env and header values, which are sealed apart, together
// (docs/DESIGN.md §12).
type storedMCP struct {
	Name            string    `json:"name"`
	Command         string    `json:"command,omitempty"`
	Args            []string  `json:"args,omitempty"`
	URL             string    `json:"url,omitempty"`
	Tools           *[]string `json:"tools,omitempty"`
	DisallowedTools []string  `json:"disallowed_tools,omitempty"`
	TimeoutSeconds  int       `json:"timeout_seconds,omitempty"`
	Use             string    `json:"use,omitempty"`
}

// mcpSecrets are what a stored server seals: its env and header values.
type mcpSecrets struct {
	Env     map[string]string `json:"env,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

func mcpSpecOf(sc mcp.ServerConfig) storedMCP {
	return storedMCP{Name: sc.Name, Command: sc.Command, Args: sc.Args, URL: sc.URL, Tools: sc.Tools,
		DisallowedTools: sc.DisallowedTools, TimeoutSeconds: sc.TimeoutSeconds, Use: sc.Use}
}

func (sp storedMCP) config(sec mcpSecrets) mcp.ServerConfig {
	return mcp.ServerConfig{Name: sp.Name, Command: sp.Command, Args: sp.Args, Env: sec.Env, URL: sp.URL,
		Headers: sec.Headers, Tools: sp.Tools, DisallowedTools: sp.DisallowedTools, TimeoutSeconds: sp.TimeoutSeconds, Use: sp.Use}
}

// MCPEntry is an MCP server as the console shows it.
type MCPEntry struct {
	Config   mcp.ServerConfig
	FromFile bool
}

// MCPServers are herd.yaml's MCP servers (read-only), then the stored
// ones it does not shadow, their secrets opened. One that cannot be
// opened is left out and named in unreadable.
func (c *Console) MCPServers(ctx context.Context) (_ []MCPEntry, unreadable error) {
	stored, unreadable, err := c.storedMCPs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]MCPEntry, 0, len(c.o.MCP)+len(stored))
	for _, sc := range c.o.MCP {
		out = append(out, MCPEntry{Config: sc.WithDefaults(), FromFile: true})
	}
	for _, sc := range stored {
		if !c.mcpInFile(sc.Name) {
			out = append(out, MCPEntry{Config: sc})
		}
	}
	return out, unreadable
}

func (c *Console) mcpInFile(name string) bool {
	return slices.ContainsFunc(c.o.MCP, func(sc mcp.ServerConfig) bool { return sc.Name == name })
}

func (c *Console) storedMCPs(ctx context.Context) (_ []mcp.ServerConfig, unreadable, err error) {
	rows, err := c.o.Store.ConsoleEntries(ctx, models.EntryMCP)
	if err != nil {
		return nil, nil, err
	}
	out := make([]mcp.ServerConfig, 0, len(rows))
	var bad []error
	for _, r := range rows {
		var sp storedMCP
		if err := json.Unmarshal(r.Spec, &sp); err != nil {
			bad = append(bad, fmt.Errorf("console: MCP server %s: %w", r.Name, err))
			continue
		}
		var sec mcpSecrets
		plain, err := c.o.Secrets.Open(r.Sealed)
		if err == nil && plain != "" {
			err = json.Unmarshal([]byte(plain), &sec)
		}
		if err != nil {
			bad = append(bad, fmt.Errorf("console: MCP server %s's env and headers: %w", r.Name, err))
			continue
		}
		out = append(out, sp.config(sec).WithDefaults())
	}
	return out, errors.Join(bad...), nil
}

// ReloadMCP applies the MCP servers stored: at start, and when another
// instance changed them (the cluster). An unreadable one is left out
// and returned as an error beside the rest.
func (c *Console) ReloadMCP(ctx context.Context, apply MCPApplier) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applyMCPLocked(ctx, apply)
}

func (c *Console) applyMCPLocked(ctx context.Context, apply MCPApplier) error {
	entries, unreadable := c.MCPServers(ctx)
	if entries == nil {
		return unreadable
	}
	cfgs := make([]mcp.ServerConfig, len(entries))
	for i, e := range entries {
		cfgs[i] = e.Config
	}
	apply(cfgs)
	return unreadable
}

// checkMCP fills sc's defaults and validates it by the config file's
// rules (config.CheckMCPServer).
func (c *Console) checkMCP(sc *mcp.ServerConfig) error {
	*sc = sc.WithDefaults()
	if probs := c.o.CheckMCP(*sc); len(probs) > 0 {
		return entryError(probs)
	}
	return nil
}

// CreateMCP stores a new MCP server and applies it: a stdio server's
// process starts at once.
func (c *Console) CreateMCP(ctx context.Context, sc mcp.ServerConfig, apply MCPApplier) (mcp.ServerConfig, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mcpInFile(sc.Name) {
		return sc, ErrEntryExists
	}
	if err := c.checkMCP(&sc); err != nil {
		return sc, err
	}
	e, err := c.mcpEntry(sc)
	if err != nil {
		return sc, err
	}
	if err := c.o.Store.CreateConsoleEntry(ctx, e); err != nil {
		if errors.Is(err, models.ErrConflict) {
			return sc, ErrEntryExists
		}
		return sc, err
	}
	return sc, c.applyMCPLocked(ctx, apply)
}

// UpdateMCP changes a stored MCP server through edit, given it as it is;
// the name stays. Its session restarts with the new settings. It
// returns the server as stored now and as it was (for the audit log).
func (c *Console) UpdateMCP(ctx context.Context, name string, edit func(*mcp.ServerConfig) error, apply MCPApplier) (sc, was mcp.ServerConfig, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if was, err = c.storedMCP(ctx, name); err != nil {
		return was, was, err
	}
	sc = was
	sc.Env, sc.Headers = maps.Clone(was.Env), maps.Clone(was.Headers) // was stays as it was
	if err := edit(&sc); err != nil {
		return sc, was, err
	}
	sc.Name = name
	if err := c.checkMCP(&sc); err != nil {
		return sc, was, err
	}
	e, err := c.mcpEntry(sc)
	if err != nil {
		return sc, was, err
	}
	if err := c.o.Store.UpdateConsoleEntry(ctx, e); err != nil {
		return sc, was, err
	}
	return sc, was, c.applyMCPLocked(ctx, apply)
}

// DeleteMCP deletes a stored MCP server, unless a subagent type's tools
// name it, and stops its session. It returns the server deleted.
func (c *Console) DeleteMCP(ctx context.Context, name string, apply MCPApplier) (mcp.ServerConfig, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	was, err := c.storedMCP(ctx, name)
	if err != nil {
		return was, err
	}
	agents, err := c.Agents(ctx)
	if err != nil {
		return was, err
	}
	if users := typesNamingServer(agents, name); len(users) > 0 {
		return was, &EntryError{InUse: true, Reason: fmt.Sprintf("the subagent type %s uses the tools of MCP server %s: change its tools first", users[0], name)}
	}
	if err := c.o.Store.DeleteConsoleEntry(ctx, models.EntryMCP, name); err != nil {
		return was, err
	}
	return was, c.applyMCPLocked(ctx, apply)
}

func typesNamingServer(agents map[string]agent.AgentConfig, server string) []string {
	var out []string
	for _, name := range sortedKeys(agents) {
		if t := agents[name].Tools; t != nil && slices.ContainsFunc(*t, func(sel string) bool {
			s, _, ok := mcp.ParseSelector(sel)
			return ok && s == server
		}) {
			out = append(out, name)
		}
	}
	return out
}

// storedMCP is the stored server name: ErrFileEntry for one of the
// file, models.ErrNotFound for none.
func (c *Console) storedMCP(ctx context.Context, name string) (mcp.ServerConfig, error) {
	if c.mcpInFile(name) {
		return mcp.ServerConfig{}, ErrFileEntry
	}
	stored, _, err := c.storedMCPs(ctx)
	if err != nil {
		return mcp.ServerConfig{}, err
	}
	i := slices.IndexFunc(stored, func(sc mcp.ServerConfig) bool { return sc.Name == name })
	if i < 0 {
		return mcp.ServerConfig{}, fmt.Errorf("MCP server %s: %w", name, models.ErrNotFound)
	}
	return stored[i], nil
}

// MCPTestTarget is the server a Test connection reaches: the server
// name, herd.yaml's or the console's, when build is nil; else what build
// makes of that server (found false: there is none), checked. So an edit
// form tests its changes without the secrets typed again.
func (c *Console) MCPTestTarget(ctx context.Context, name string, build func(known mcp.ServerConfig, found bool) (mcp.ServerConfig, error)) (mcp.ServerConfig, error) {
	entries, err := c.MCPServers(ctx)
	if entries == nil && err != nil {
		return mcp.ServerConfig{}, err
	}
	i := slices.IndexFunc(entries, func(e MCPEntry) bool { return e.Config.Name == name })
	var known mcp.ServerConfig
	if i >= 0 {
		known = entries[i].Config
	}
	if build == nil {
		if i < 0 {
			return known, &EntryError{Field: "name", Reason: "name an MCP server of the list, or send a command or url and its settings"}
		}
		return known, nil
	}
	sc, err := build(known, i >= 0)
	if err != nil {
		return sc, err
	}
	if sc.Name == "" {
		sc.Name = "test"
	}
	return sc, c.checkMCP(&sc)
}

// mcpEntry is sc as stored, its env and headers sealed.
func (c *Console) mcpEntry(sc mcp.ServerConfig) (*models.ConsoleEntry, error) {
	spec, err := json.Marshal(mcpSpecOf(sc))
	if err != nil {
		return nil, err
	}
	sealed := ""
	if len(sc.Env) > 0 || len(sc.Headers) > 0 {
		plain, err := json.Marshal(mcpSecrets{Env: sc.Env, Headers: sc.Headers})
		if err != nil {
			return nil, err
		}
		sealed = c.o.Secrets.Seal(string(plain))
	}
	return &models.ConsoleEntry{Kind: models.EntryMCP, Name: sc.Name, Spec: spec, Sealed: sealed}, nil
}
