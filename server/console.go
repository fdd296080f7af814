package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"herd/agent"
	"herd/agent/mcp"
	"herd/internal/secrets"
	"herd/models"
)

// ModelBuilder builds the provider of a model (main's buildModel).
type ModelBuilder func(agent.ModelConfig) (*agent.Model, error)

// ConsoleStore keeps what the admin console adds; models.Store
// implements it.
type ConsoleStore interface {
	ConsoleEntries(ctx context.Context, kind string) ([]models.ConsoleEntry, error)
	CreateConsoleEntry(ctx context.Context, e *models.ConsoleEntry) error
	UpdateConsoleEntry(ctx context.Context, e *models.ConsoleEntry) error
	DeleteConsoleEntry(ctx context.Context, kind, name string) error
	Setting(ctx context.Context, key string) (string, error)
	SetSetting(ctx context.Context, key, value string) error
}

// ModelSetter takes the models and subagent types new runs start with;
// *agent.Runtime implements it.
type ModelSetter interface {
	SetCatalog(models []*agent.Model, agents map[string]agent.AgentConfig) error
}

// ConsoleOptions builds a Console.
type ConsoleOptions struct {
	Store   ConsoleStore
	Secrets *secrets.Box
	// Seed are the config file's models, built: they come first (the
	// first is the default) and the console cannot change them.
	Seed []*agent.Model
	// Agents are the config file's subagent types: a model one names
	// cannot be deleted.
	Agents map[string]agent.AgentConfig
	// MCP are herd.yaml's MCP servers, shown read-only.
	MCP []mcp.ServerConfig
	// FileLimits are herd.yaml's limits, which the console's override.
	FileLimits ConsoleLimits
	Build      ModelBuilder
	// Defaults fills in a model's defaults and Check checks it by the
	// config file's rules (config.FillModelDefaults, config.CheckModel),
	// each problem naming its field.
	Defaults func(*agent.ModelConfig)
	Check    func(agent.ModelConfig) []FieldProblem
	// CheckAgent checks a subagent type by the config file's rules
	// against models and MCP servers, herd.yaml's and the console's
	// (config.CheckAgent).
	CheckAgent func(name string, a agent.AgentConfig, models []agent.ModelConfig, servers []mcp.ServerConfig) []FieldProblem
	// CheckMCP checks an MCP server, its defaults filled in, by the
	// config file's rules (config.CheckMCPServer).
	CheckMCP func(mcp.ServerConfig) []FieldProblem
}

// FieldProblem is a field validation refuses, and why.
type FieldProblem struct{ Field, Message string }

// Console owns the settings an admin changes in the console
// (docs/DESIGN.md §12): it stores them, their secrets sealed, and turns
// the config file's models and the stored ones into the models new runs
// start with. The database is the truth: every instance applies what it
// reads there (Reload), never what a notice says.
type Console struct {
	o ConsoleOptions
	// mu serializes changes and reloads, so the stored and the applied
	// models agree.
	mu sync.Mutex
	// built are the stored models' providers by name, kept while their
	// settings do not change, so a model's request limit is not reset
	// by another's change.
	built map[string]*agent.Model
}

// Console errors, mapped to statuses in server/errors.go.
var (
	// ErrFileEntry is a change to an entry of the config file.
	ErrFileEntry = errors.New("set in herd.yaml — edit there")
	// ErrEntryExists is adding a name that is taken.
	ErrEntryExists = errors.New("an entry of this name exists")
)

// EntryError is a change refused: a field that is wrong (Field names
// it), or what it would break (InUse).
type EntryError struct {
	Field  string
	Reason string
	InUse  bool
}

func (e *EntryError) Error() string { return e.Reason }

// NewConsole builds the console over its store.
func NewConsole(o ConsoleOptions) *Console {
	return &Console{o: o, built: map[string]*agent.Model{}}
}

// storedModel is a model as the console stores it: ModelConfig's fields
// the console edits, without the API key (sealed apart).
type storedModel struct {
	Name                  string           `json:"name"`
	DisplayName           string           `json:"display_name,omitempty"`
	Provider              string           `json:"provider"`
	Model                 string           `json:"model,omitempty"`
	BaseURL               string           `json:"base_url,omitempty"`
	Stream                agent.StreamMode `json:"stream,omitempty"`
	ContextWindow         int              `json:"context_window,omitempty"`
	MaxOutputTokens       int              `json:"max_output_tokens,omitempty"`
	MaxConcurrentRequests int              `json:"max_concurrent_requests,omitempty"`
	TimeoutSeconds        int              `json:"timeout_seconds,omitempty"`
	Vision                bool             `json:"vision,omitempty"`
	// Price, when set, shows usage as cost too (docs/OPERATIONS.md
	// "Budgets").
	Price *agent.ModelPrice `json:"price,omitempty"`
}

func specOf(m agent.ModelConfig) storedModel {
	return storedModel{
		Name: m.Name, DisplayName: m.DisplayName, Provider: m.Provider, Model: m.Model, BaseURL: m.BaseURL,
		Stream: m.Stream, ContextWindow: m.ContextWindow, MaxOutputTokens: m.MaxOutputTokens,
		MaxConcurrentRequests: m.MaxConcurrentRequests, TimeoutSeconds: m.TimeoutSeconds, Vision: m.Vision, Price: m.Price,
	}
}

func (sm storedModel) config(apiKey string) agent.ModelConfig {
	return agent.ModelConfig{
		Name: sm.Name, DisplayName: sm.DisplayName, Provider: sm.Provider, Model: sm.Model, BaseURL: sm.BaseURL,
		APIKey: apiKey, Stream: sm.Stream, ContextWindow: sm.ContextWindow, MaxOutputTokens: sm.MaxOutputTokens,
		MaxConcurrentRequests: sm.MaxConcurrentRequests, TimeoutSeconds: sm.TimeoutSeconds, Vision: sm.Vision, Price: sm.Price,
	}
}

// ModelEntry is one model as the console shows it.
type ModelEntry struct {
	Config agent.ModelConfig
	// FromFile says herd.yaml sets it: shown, never changed here.
	FromFile bool
}

// Models are the config file's models, then the stored ones that the
// file does not shadow, their keys opened. One whose key cannot be
// opened (sealed with a key this herd lacks) is left out: unreadable
// names it beside the rest.
func (c *Console) Models(ctx context.Context) (_ []ModelEntry, unreadable error) {
	stored, unreadable, err := c.stored(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ModelEntry, 0, len(c.o.Seed)+len(stored))
	for _, m := range c.o.Seed {
		out = append(out, ModelEntry{Config: m.Config, FromFile: true})
	}
	for _, m := range stored {
		if !c.inFile(m.Name) {
			out = append(out, ModelEntry{Config: m})
		}
	}
	return out, unreadable
}

func (c *Console) inFile(name string) bool {
	return slices.ContainsFunc(c.o.Seed, func(m *agent.Model) bool { return m.Config.Name == name })
}

// stored reads the stored models and opens their keys; those it cannot
// read are left out and named in unreadable.
func (c *Console) stored(ctx context.Context) (_ []agent.ModelConfig, unreadable, err error) {
	rows, err := c.o.Store.ConsoleEntries(ctx, models.EntryModel)
	if err != nil {
		return nil, nil, err
	}
	out := make([]agent.ModelConfig, 0, len(rows))
	var bad []error
	for _, r := range rows {
		var sm storedModel
		if err := json.Unmarshal(r.Spec, &sm); err != nil {
			bad = append(bad, fmt.Errorf("console: model %s: %w", r.Name, err))
			continue
		}
		key, err := c.o.Secrets.Open(r.Sealed)
		if err != nil {
			bad = append(bad, fmt.Errorf("console: model %s's API key: %w", r.Name, err))
			continue
		}
		m := sm.config(key)
		c.o.Defaults(&m)
		out = append(out, m)
	}
	return out, errors.Join(bad...), nil
}

// Built is the models runs start with: the file's, then the stored
// ones, built. A stored model whose provider fails to build is left out
// and returned as an error beside the rest.
func (c *Console) Built(ctx context.Context) ([]*agent.Model, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buildLocked(ctx)
}

func (c *Console) buildLocked(ctx context.Context) ([]*agent.Model, error) {
	entries, unreadable := c.Models(ctx)
	if entries == nil {
		return nil, unreadable
	}
	out := slices.Clone(c.o.Seed)
	built := map[string]*agent.Model{}
	errs := []error{unreadable}
	for _, e := range entries[len(c.o.Seed):] {
		m, ok := c.built[e.Config.Name]
		if !ok || !reflect.DeepEqual(m.Config, e.Config) {
			var err error
			if m, err = c.o.Build(e.Config); err != nil {
				errs = append(errs, fmt.Errorf("console: model %s: %w", e.Config.Name, err))
				continue
			}
		}
		built[e.Config.Name] = m
		out = append(out, m)
	}
	c.built = built
	return out, errors.Join(errs...)
}

// Reload reads the stored models and applies them to rt: at start, and
// when another instance changed them (the cluster).
func (c *Console) Reload(ctx context.Context, rt ModelSetter) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applyLocked(ctx, rt)
}

func (c *Console) applyLocked(ctx context.Context, rt ModelSetter) error {
	ms, buildErr := c.buildLocked(ctx)
	if ms == nil {
		return buildErr
	}
	agents, err := c.Agents(ctx)
	if err != nil {
		return err
	}
	return errors.Join(rt.SetCatalog(ms, agents), buildErr)
}

// Check fills m's defaults and validates it by the config file's rules.
func (c *Console) Check(m *agent.ModelConfig) error {
	c.o.Defaults(m)
	if probs := c.o.Check(*m); len(probs) > 0 {
		return entryError(probs)
	}
	return nil
}

// entryError is the refusal of probs, naming the first's field.
func entryError(probs []FieldProblem) *EntryError {
	msgs := make([]string, len(probs))
	for i, p := range probs {
		msgs[i] = strings.TrimSpace(p.Field + " " + p.Message)
	}
	return &EntryError{Field: probs[0].Field, Reason: strings.Join(msgs, "; ")}
}

// ModelChange is an added or edited model: its settings, and its API
// key when it changes (nil: kept; "": removed).
type ModelChange struct {
	Config agent.ModelConfig
	APIKey *string
}

// CreateModel stores a new model and applies it.
func (c *Console) CreateModel(ctx context.Context, ch ModelChange, rt ModelSetter) (agent.ModelConfig, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := ch.Config
	if ch.APIKey != nil {
		m.APIKey = *ch.APIKey
	}
	if c.inFile(m.Name) {
		return m, ErrEntryExists
	}
	if err := c.Check(&m); err != nil {
		return m, err
	}
	if _, err := c.o.Build(m); err != nil {
		return m, &EntryError{Reason: err.Error()}
	}
	e, err := c.entry(m)
	if err != nil {
		return m, err
	}
	if err := c.o.Store.CreateConsoleEntry(ctx, e); err != nil {
		if errors.Is(err, models.ErrConflict) {
			return m, ErrEntryExists
		}
		return m, err
	}
	return m, c.applyLocked(ctx, rt)
}

// UpdateModel changes a stored model: edit is given its settings as they
// are, to change; the name stays.
// It returns the model as stored now and as it was (for the audit log).
func (c *Console) UpdateModel(ctx context.Context, name string, edit func(*agent.ModelConfig) error, rt ModelSetter) (m, was agent.ModelConfig, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if was, err = c.storedModel(ctx, name); err != nil {
		return was, was, err
	}
	m = was
	if err := edit(&m); err != nil {
		return m, was, err
	}
	m.Name = name
	if err := c.Check(&m); err != nil {
		return m, was, err
	}
	if _, err := c.o.Build(m); err != nil {
		return m, was, &EntryError{Reason: err.Error()}
	}
	e, err := c.entry(m)
	if err != nil {
		return m, was, err
	}
	if err := c.o.Store.UpdateConsoleEntry(ctx, e); err != nil {
		return m, was, err
	}
	return m, was, c.applyLocked(ctx, rt)
}

// storedModel is the stored model name: ErrFileEntry for one of the
// file, models.ErrNotFound for none.
func (c *Console) storedModel(ctx context.Context, name string) (agent.ModelConfig, error) {
	if c.inFile(name) {
		return agent.ModelConfig{}, ErrFileEntry
	}
	stored, _, err := c.stored(ctx)
	if err != nil {
		return agent.ModelConfig{}, err
	}
	i := slices.IndexFunc(stored, func(m agent.ModelConfig) bool { return m.Name == name })
	if i < 0 {
		return agent.ModelConfig{}, fmt.Errorf("model %s: %w", name, models.ErrNotFound)
	}
	return stored[i], nil
}

// TestTarget is the model a Test connection calls: m as sent, its
// defaults filled in and checked, or when m names only a model (no
// provider), that model. A model sent without a key (apiKey nil) takes
// the key of the model of its name, if any, so an edit form tests
// without the key typed again.
func (c *Console) TestTarget(ctx context.Context, m agent.ModelConfig, apiKey *string) (agent.ModelConfig, error) {
	entries, err := c.Models(ctx)
	if entries == nil {
		return m, err
	}
	i := slices.IndexFunc(entries, func(e ModelEntry) bool { return e.Config.Name == m.Name })
	switch {
	case m.Provider == "" && i < 0:
		return m, &EntryError{Field: "name", Reason: "name a model of the list, or send a provider and its settings"}
	case m.Provider == "":
		return entries[i].Config, nil
	case apiKey != nil:
		m.APIKey = *apiKey
	case i >= 0:
		m.APIKey = entries[i].Config.APIKey
	}
	if m.Name == "" {
		m.Name = "test"
	}
	return m, c.Check(&m)
}

// DeleteModel deletes a stored model, unless a subagent type names it.
// Runs in flight keep it; a new run that names it is refused
// (agent.ErrUnknownModel). It returns the model deleted.
func (c *Console) DeleteModel(ctx context.Context, name string, rt ModelSetter) (agent.ModelConfig, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	was, err := c.storedModel(ctx, name)
	if err != nil {
		return was, err
	}
	agents, err := c.Agents(ctx)
	if err != nil {
		return was, err
	}
	if users := typesNaming(agents, name); len(users) > 0 {
		return was, &EntryError{InUse: true, Reason: fmt.Sprintf("the subagent type %s uses model %s: change its model first", users[0], name)}
	}
	if err := c.o.Store.DeleteConsoleEntry(ctx, models.EntryModel, name); err != nil {
		return was, err
	}
	return was, c.applyLocked(ctx, rt)
}

func typesNaming(agents map[string]agent.AgentConfig, model string) []string {
	var out []string
	for name, a := range agents {
		if a.Model == model {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// entry is m as stored, its key sealed.
func (c *Console) entry(m agent.ModelConfig) (*models.ConsoleEntry, error) {
	spec, err := json.Marshal(specOf(m))
	if err != nil {
		return nil, err
	}
	return &models.ConsoleEntry{Kind: models.EntryModel, Name: m.Name, Spec: spec, Sealed: c.o.Secrets.Seal(m.APIKey)}, nil
}

// Reseal seals again with the current key every secret another key
// sealed: the second half of a key rotation (docs/OPERATIONS.md). Any
// instance may run it; it is the same whichever does.
func (c *Console) Reseal(ctx context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, kind := range []string{models.EntryModel, models.EntryMCP} {
		done, err := c.reseal(ctx, kind)
		n += done
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// reseal seals again the secrets of kind's entries another key sealed.
func (c *Console) reseal(ctx context.Context, kind string) (int, error) {
	rows, err := c.o.Store.ConsoleEntries(ctx, kind)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range rows {
		if !c.o.Secrets.Stale(r.Sealed) {
			continue
		}
		plain, err := c.o.Secrets.Open(r.Sealed)
		if err != nil {
			return n, fmt.Errorf("console: %s %s: %w", kind, r.Name, err)
		}
		r.Sealed = c.o.Secrets.Seal(plain)
		if err := c.o.Store.UpdateConsoleEntry(ctx, &r); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
