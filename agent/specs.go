package agent

import (
	"fmt"
	"sort"
	"time"

	"herd/agent/tools"
)

// Defaults of the subagent types (docs/DESIGN.md §Subagents).
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

// buildSpecs resolves every subagent type with this precedence:
// subagents.agents.<name>.<field> > global subagents.timeout_seconds
// (built-ins only) > the agent's own default (docs/DESIGN.md §Subagents).
func (x *executor) buildSpecs(all *tools.Set) error {
	builtinTimeout := time.Duration(x.cfg.TimeoutSeconds) * time.Second
	gp := &subagentSpec{
		name:         SubagentGeneral,
		description:  "A capable general agent with every tool you have except task. Use it for independent research, writing or analysis.",
		systemPrompt: "You are a subagent of herd. Complete the task you are given on your own, using your tools, then reply with a complete, self-contained final answer in Markdown. You cannot ask questions.",
		tools:        all.Filter(nil, []string{ToolTask}),
		maxTurns:     x.globalTurns(defaultGeneralMaxTurns),
		timeout:      builtinTimeout,
	}
	gp.override(x.cfg.Agents[SubagentGeneral])
	x.add(gp)
	if _, ok := all.Get(tools.Bash); ok {
		b := &subagentSpec{
			name:         SubagentBash,
			description:  "Runs shell commands in the thread's workspace and reports their output. Use it for builds, tests and scripts.",
			systemPrompt: "You are a command-execution subagent of herd. Run the commands the task needs with the bash tool in the workspace, then reply with what they printed and whether they succeeded.",
			tools:        all.Filter(&[]string{tools.Bash, tools.Ls, tools.ReadFile, tools.WriteFile, tools.StrReplace}, nil),
			maxTurns:     x.globalTurns(defaultBashMaxTurns),
			timeout:      builtinTimeout,
		}
		b.override(x.cfg.Agents[SubagentBash])
		x.add(b)
	}
	return x.buildCustom(all)
}

// buildCustom adds the custom subagents of the config, by name.
func (x *executor) buildCustom(all *tools.Set) error {
	names := make([]string, 0, len(x.cfg.Agents))
	for n := range x.cfg.Agents {
		if n != SubagentGeneral && n != SubagentBash {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		ac := x.cfg.Agents[n]
		deny := []string{ToolTask}
		if ac.DisallowedTools != nil {
			deny = append(deny, *ac.DisallowedTools...)
		}
		spec := &subagentSpec{
			name:         n,
			description:  ac.Description,
			systemPrompt: ac.SystemPrompt,
			tools:        all.Filter(ac.Tools, deny),
			maxTurns:     x.globalTurns(defaultCustomMaxTurns),
			timeout:      defaultCustomTimeout * time.Second,
		}
		spec.override(ac)
		if spec.model != "" && spec.model != "inherit" {
			if _, ok := x.models[spec.model]; !ok {
				return fmt.Errorf("agent: subagents.agents.%s.model: unknown model %q", n, spec.model)
			}
		}
		x.add(spec)
	}
	return nil
}

// globalTurns is subagents.max_turns when set, else def.
func (x *executor) globalTurns(def int) int {
	if x.cfg.MaxTurns != nil {
		return *x.cfg.MaxTurns
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

func (x *executor) add(s *subagentSpec) {
	if s.model == "" {
		s.model = "inherit"
	}
	if s.systemPrompt == "" {
		s.systemPrompt = "You are a subagent of herd. Complete the task on your own and reply with a complete final answer."
	}
	x.specs[s.name] = s
	x.order = append(x.order, s.name)
}

func (x *executor) catalog() []catalogEntry {
	out := make([]catalogEntry, 0, len(x.order))
	for _, n := range x.order {
		out = append(out, catalogEntry{name: n, description: x.specs[n].description})
	}
	return out
}

// resolveModel returns the effective model: inherit → the lead's model for
// this run. Resolved once per dispatch and used for every call and event.
func (x *executor) resolveModel(spec *subagentSpec, lead *Model) *Model {
	if spec.model != "inherit" {
		if m, ok := x.models[spec.model]; ok {
			return m
		}
	}
	return lead
}
