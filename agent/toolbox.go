package agent

import (
	"strings"

	"herd/agent/tools"
)

// CommandsOff starts the line of the lead's system prompt that tells the
// model, in a run without commands, that commands are off for this user
// and why: the reason is the rest of the line. The demo model finds the
// line by it to explain itself.
const CommandsOff = "Commands are turned off for this user: "

// toolbox is what one run may use (docs/DESIGN.md §4): the lead's tools,
// their specs with the task tool's last, and the subagent types with
// their own tools. New builds one with commands and one without, once, so
// a run picks its toolbox instead of building one.
type toolbox struct {
	tools  *tools.Set
	specs  []tools.Spec
	agents specSet
	prompt string // the lead's system prompt
}

// newToolbox builds the toolbox of the tools in set. offNote, when not
// empty, is the line that tells the lead why commands are missing.
func newToolbox(set *tools.Set, cfg SubagentsConfig, models map[string]*Model, lead LeadConfig, offNote string) (*toolbox, error) {
	agents, err := buildSpecs(cfg, set, models)
	if err != nil {
		return nil, err
	}
	return &toolbox{
		tools:  set,
		specs:  append(set.Specs(), taskToolSpec(agents.catalog())),
		agents: agents,
		prompt: leadPrompt(lead, offNote),
	}, nil
}

// newToolboxes builds the toolbox with every tool and the one without
// commands: no bash tool for the lead, no bash subagent type, and no bash
// in any subagent's tools, so a model of a run without commands is never
// offered them. Where bash is not configured at all, both are the same.
func newToolboxes(all []tools.Tool, cfg SubagentsConfig, models map[string]*Model, lead LeadConfig, offReason string) (with, without *toolbox, err error) {
	set := tools.NewSet(all...)
	with, err = newToolbox(set, cfg, models, lead, "")
	if err != nil {
		return nil, nil, err
	}
	if _, ok := set.Get(tools.Bash); !ok {
		return with, with, nil
	}
	if offReason = strings.TrimSpace(offReason); offReason == "" {
		offReason = "the server does not let this user run commands."
	}
	note := CommandsOff + strings.Join(strings.Fields(offReason), " ") +
		"\nYou cannot run shell commands, and no subagent can. When the user asks for one, tell them so plainly, with this reason, instead of trying."
	without, err = newToolbox(set.Filter(nil, []string{tools.Bash}), cfg, models, lead, note)
	return with, without, err
}

// leadPrompt is the lead's system prompt.
func leadPrompt(lead LeadConfig, offNote string) string {
	p := `You are herd's lead agent. You answer the user directly and well. You may delegate bounded, self-contained pieces of work to subagents with the task tool, which blocks until the subagent finishes and returns its result; never poll for status, there is no status tool. Use the workspace tools (ls, read_file, write_file, str_replace) and bash when available for small steps yourself. Answer in Markdown.`
	if offNote != "" {
		p += "\n\n" + offNote
	}
	if s := strings.TrimSpace(lead.SystemPrompt); s != "" {
		p += "\n\n" + s
	}
	return p
}
