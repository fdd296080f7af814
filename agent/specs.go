package agent

import (
	"fmt"
	"sort"
	"time"

	"herd/agent/tools"
)

// Defaults of the subagent types (docs/DESIGN.md §5).
const (
	defaultGeneralMaxTurns = 100
	defaultBashMaxTurns    = 40
	defaultCustomMaxTurns  = 100
	defaultCustomTimeout   = 900
)

// catalogEntry is one subagent type the lead may choose.
type catalogEntry struct {
	name        string
	description string
}

// subagentSpec is a subagent type with its configuration resolved.
type subagentSpec struct {
	name         string
	description  string
	systemPrompt string
	tools        *tools.Set
	model        string // "inherit" or a model name
	maxTurns     int
	timeout      time.Duration
	tokenBudget  int64
}

// specSet is every subagent type the lead may choose, by name and in the
// order the task tool lists them.
type specSet struct {
	byName map[string]*subagentSpec
	order  []string
}

// buildSpecs resolves every subagent type with this precedence:
// subagents.agents.<name>.<field> > global subagents.timeout_seconds
// (built-ins only) > the agent's own default (docs/DESIGN.md §5). models
// are the names a custom type may run on. lead is the lead's tools, which
// general-purpose and a custom type without a tools list get; all adds
// the MCP tools a custom type's list may name.
func buildSpecs(cfg SubagentsConfig, lead, all *tools.Set, models map[string]*Model) (specSet, error) {
	set := specSet{byName: map[string]*subagentSpec{}}
	builtinTimeout := time.Duration(cfg.TimeoutSeconds) * time.Second
	gp := &subagentSpec{
		name:         SubagentGeneral,
		description:  "A capable general agent with every tool you have except task. Use it for independent research, writing or analysis.",
		systemPrompt: "You are a subagent of herd. Complete the task you are given on your own, using your tools, then reply with a complete, self-contained final answer in Markdown. You cannot ask questions.",
		tools:        lead.Filter(nil, []string{ToolTask}),
		maxTurns:     globalTurns(cfg, defaultGeneralMaxTurns),
		timeout:      builtinTimeout,
	}
	gp.override(cfg.Agents[SubagentGeneral])
	set.add(gp)
	if _, ok := all.Get(tools.Bash); ok {
		b := &subagentSpec{
			name:         SubagentBash,
			description:  "Runs shell commands in the thread's workspace and reports their output. Use it for builds, tests and scripts.",
			systemPrompt: "You are a command-execution subagent of herd. Run the commands the task needs with the bash tool in the workspace, then reply with what they printed and whether they succeeded.",
			tools:        all.Filter(&[]string{tools.Bash, tools.Ls, tools.ReadFile, tools.WriteFile, tools.StrReplace}, nil),
			maxTurns:     globalTurns(cfg, defaultBashMaxTurns),
			timeout:      builtinTimeout,
		}
		b.override(cfg.Agents[SubagentBash])
		set.add(b)
	}
	return set, set.addCustom(cfg, lead, all, models)
}

// addCustom adds the custom subagents of the config, by name.
func (set *specSet) addCustom(cfg SubagentsConfig, lead, all *tools.Set, models map[string]*Model) error {
	names := make([]string, 0, len(cfg.Agents))
	for n := range cfg.Agents {
		if n != SubagentGeneral && n != SubagentBash {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		ac := cfg.Agents[n]
		deny := []string{ToolTask}
		if ac.DisallowedTools != nil {
			deny = append(deny, *ac.DisallowedTools...)
		}
		from := lead
		if ac.Tools != nil {
			from = all
		}
		spec := &subagentSpec{
			name:         n,
			description:  ac.Description,
			systemPrompt: ac.SystemPrompt,
			tools:        pick(from, ac.Tools, deny),
			maxTurns:     globalTurns(cfg, defaultCustomMaxTurns),
			timeout:      defaultCustomTimeout * time.Second,
		}
		spec.override(ac)
		if spec.model != "" && spec.model != "inherit" {
			if _, ok := models[spec.model]; !ok {
				return fmt.Errorf("agent: subagents.agents.%s.model: unknown model %q", n, spec.model)
			}
		}
		set.add(spec)
	}
	return nil
}

// globalTurns is subagents.max_turns when set, else def.
func globalTurns(cfg SubagentsConfig, def int) int {
	if cfg.MaxTurns != nil {
		return *cfg.MaxTurns
	}
	return def
}

// override applies the fields a subagents.agents entry sets.
func (spec *subagentSpec) override(ac AgentConfig) {
	if ac.Model != "" {
		spec.model = ac.Model
	}
	if ac.MaxTurns != nil {
		spec.maxTurns = *ac.MaxTurns
	}
	if ac.TimeoutSeconds != nil {
		spec.timeout = time.Duration(*ac.TimeoutSeconds) * time.Second
	}
	if ac.TokenBudget != nil {
		spec.tokenBudget = *ac.TokenBudget
	}
}

// catalog lists the types for the task tool, in order.
func (set *specSet) catalog() []catalogEntry {
	out := make([]catalogEntry, 0, len(set.order))
	for _, n := range set.order {
		out = append(out, catalogEntry{name: n, description: set.byName[n].description})
	}
	return out
}

func (set *specSet) add(s *subagentSpec) {
	if s.model == "" {
		s.model = "inherit"
	}
	if s.systemPrompt == "" {
		s.systemPrompt = "You are a subagent of herd. Complete the task on your own and reply with a complete final answer."
	}
	set.byName[s.name] = s
	set.order = append(set.order, s.name)
}
