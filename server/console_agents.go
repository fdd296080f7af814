package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	"herd/agent"
	"herd/agent/mcp"
	"herd/models"
)

// agentSpec is a subagent type as the console stores and sends it:
// agent.AgentConfig's fields and its name.
type agentSpec struct {
	Name            string    `json:"name"`
	Description     string    `json:"description,omitempty"`
	SystemPrompt    string    `json:"system_prompt,omitempty"`
	Tools           *[]string `json:"tools,omitempty"`
	DisallowedTools *[]string `json:"disallowed_tools,omitempty"`
	Model           string    `json:"model,omitempty"`
	MaxTurns        *int      `json:"max_turns,omitempty"`
	TimeoutSeconds  *int      `json:"timeout_seconds,omitempty"`
	TokenBudget     *int64    `json:"token_budget,omitempty"`
}

func agentSpecOf(name string, a agent.AgentConfig) agentSpec {
	return agentSpec{Name: name, Description: a.Description, SystemPrompt: a.SystemPrompt, Tools: a.Tools,
		DisallowedTools: a.DisallowedTools, Model: a.Model, MaxTurns: a.MaxTurns, TimeoutSeconds: a.TimeoutSeconds, TokenBudget: a.TokenBudget}
}

func (sp agentSpec) config() agent.AgentConfig {
	return agent.AgentConfig{Description: sp.Description, SystemPrompt: sp.SystemPrompt, Tools: sp.Tools,
		DisallowedTools: sp.DisallowedTools, Model: sp.Model, MaxTurns: sp.MaxTurns, TimeoutSeconds: sp.TimeoutSeconds, TokenBudget: sp.TokenBudget}
}

// AgentEntry is a subagent type as the console shows it.
type AgentEntry struct {
	Name     string
	Config   agent.AgentConfig
	FromFile bool
}

// AgentTypes are herd.yaml's subagent types (read-only), then those the
// console stored, by name within each.
func (c *Console) AgentTypes(ctx context.Context) ([]AgentEntry, error) {
	stored, err := c.storedAgents(ctx)
	if err != nil {
		return nil, err
	}
	var out []AgentEntry
	for _, name := range sortedKeys(c.o.Agents) {
		out = append(out, AgentEntry{Name: name, Config: c.o.Agents[name], FromFile: true})
	}
	for _, name := range sortedKeys(stored) {
		if _, inFile := c.o.Agents[name]; !inFile {
			out = append(out, AgentEntry{Name: name, Config: stored[name]})
		}
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := slices.Collect(maps.Keys(m))
	sort.Strings(keys)
	return keys
}

func (c *Console) storedAgents(ctx context.Context) (map[string]agent.AgentConfig, error) {
	rows, err := c.o.Store.ConsoleEntries(ctx, models.EntryAgent)
	if err != nil {
		return nil, err
	}
	out := make(map[string]agent.AgentConfig, len(rows))
	for _, r := range rows {
		var sp agentSpec
		if err := json.Unmarshal(r.Spec, &sp); err != nil {
			return nil, fmt.Errorf("console: subagent type %s: %w", r.Name, err)
		}
		out[r.Name] = sp.config()
	}
	return out, nil
}

// Agents are the subagent types runs use: herd.yaml's, and the
// console's it does not shadow.
func (c *Console) Agents(ctx context.Context) (map[string]agent.AgentConfig, error) {
	entries, err := c.AgentTypes(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]agent.AgentConfig, len(entries))
	for _, e := range entries {
		out[e.Name] = e.Config
	}
	return out, nil
}

// checkAgent validates a by the config file's rules against the models
// of the moment.
func (c *Console) checkAgent(ctx context.Context, name string, a agent.AgentConfig) error {
	entries, err := c.Models(ctx)
	if entries == nil {
		return err
	}
	ms := make([]agent.ModelConfig, len(entries))
	for i, e := range entries {
		ms[i] = e.Config
	}
	servers, err := c.MCPServers(ctx)
	if servers == nil && err != nil {
		return err
	}
	sc := make([]mcp.ServerConfig, len(servers))
	for i, e := range servers {
		sc[i] = e.Config
	}
	probs := c.o.CheckAgent(name, a, ms, sc)
	if len(probs) == 0 {
		return nil
	}
	return entryError(probs)
}

// CreateAgent stores a new subagent type and applies it.
func (c *Console) CreateAgent(ctx context.Context, name string, a agent.AgentConfig, rt ModelSetter) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, inFile := c.o.Agents[name]; inFile {
		return ErrEntryExists
	}
	if err := c.checkAgent(ctx, name, a); err != nil {
		return err
	}
	spec, _ := json.Marshal(agentSpecOf(name, a))
	err := c.o.Store.CreateConsoleEntry(ctx, &models.ConsoleEntry{Kind: models.EntryAgent, Name: name, Spec: spec})
	if errors.Is(err, models.ErrConflict) {
		return ErrEntryExists
	}
	if err != nil {
		return err
	}
	return c.applyLocked(ctx, rt)
}

// UpdateAgent changes a stored subagent type through edit.
// It returns the type as stored now and as it was (for the audit log).
func (c *Console) UpdateAgent(ctx context.Context, name string, edit func(*agent.AgentConfig) error, rt ModelSetter) (a, was agent.AgentConfig, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if was, err = c.storedAgent(ctx, name); err != nil {
		return was, was, err
	}
	a = was
	a.Tools, a.DisallowedTools = cloneList(was.Tools), cloneList(was.DisallowedTools) // was stays as it was
	if err := edit(&a); err != nil {
		return a, was, err
	}
	if err := c.checkAgent(ctx, name, a); err != nil {
		return a, was, err
	}
	spec, _ := json.Marshal(agentSpecOf(name, a))
	if err := c.o.Store.UpdateConsoleEntry(ctx, &models.ConsoleEntry{Kind: models.EntryAgent, Name: name, Spec: spec}); err != nil {
		return a, was, err
	}
	return a, was, c.applyLocked(ctx, rt)
}

// DeleteAgent deletes a stored subagent type; runs in progress keep it.
// It returns the type deleted.
func (c *Console) DeleteAgent(ctx context.Context, name string, rt ModelSetter) (agent.AgentConfig, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	was, err := c.storedAgent(ctx, name)
	if err != nil {
		return was, err
	}
	if err := c.o.Store.DeleteConsoleEntry(ctx, models.EntryAgent, name); err != nil {
		return was, err
	}
	return was, c.applyLocked(ctx, rt)
}

func (c *Console) storedAgent(ctx context.Context, name string) (agent.AgentConfig, error) {
	if _, inFile := c.o.Agents[name]; inFile {
		return agent.AgentConfig{}, ErrFileEntry
	}
	stored, err := c.storedAgents(ctx)
	if err != nil {
		return agent.AgentConfig{}, err
	}
	a, ok := stored[name]
	if !ok {
		return a, fmt.Errorf("subagent type %s: %w", name, models.ErrNotFound)
	}
	return a, nil
}

// cloneList copies a tool list, so an edit of the copy leaves l as it was.
func cloneList(l *[]string) *[]string {
	if l == nil {
		return nil
	}
	c := slices.Clone(*l)
	return &c
}
