package agent

import (
	"fmt"
)

// catalog is the models runs start with and the built-in toolboxes made
// of them. An admin's change builds a new one and swaps it whole
// (Runtime.SetModels): a new run takes the catalog of the moment and
// keeps it to its end, its tasks' models included, so a run in flight
// finishes on the settings it started with (docs/DESIGN.md §12).
type catalog struct {
	byName map[string]*Model
	order  []*Model // the first is the default
	// agents are the subagent types' settings (subagents.agents).
	agents map[string]AgentConfig
	// withCommands and withoutCommands are the toolboxes a run gets by
	// StartRequest.Commands without MCP tools; the same one where bash is
	// not configured.
	withCommands, withoutCommands *toolbox
}

// model is the model called name, or the default for "".
func (c *catalog) model(name string) (*Model, error) {
	if name == "" {
		return c.order[0], nil
	}
	m, ok := c.byName[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownModel, name)
	}
	return m, nil
}

// SetModels makes models (the first the default) those of every run
// started from now on; runs in progress keep theirs. It refuses a list
// that is empty or that a subagent type's model is missing from, and
// then changes nothing.
func (rt *Runtime) SetModels(models []*Model) error {
	return rt.SetCatalog(models, rt.cat.Load().agents)
}

// SetCatalog is SetModels with the subagent types' settings too
// (subagents.agents: overrides of the built-ins and custom types).
func (rt *Runtime) SetCatalog(models []*Model, agents map[string]AgentConfig) error {
	if len(models) == 0 {
		return fmt.Errorf("agent: no models configured")
	}
	c := &catalog{byName: make(map[string]*Model, len(models)), order: models, agents: agents}
	for _, m := range models {
		c.byName[m.Config.Name] = m
	}
	var err error
	if c.withCommands, c.withoutCommands, err = rt.boxes(c.byName, agents, nil); err != nil {
		return err
	}
	rt.cat.Store(c)
	return nil
}
