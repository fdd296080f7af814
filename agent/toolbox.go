package agent

import (
	"strings"

	"herd/agent/mcp"
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
	// models are the models its subagent types may name: the catalog
	// the run started with (docs/DESIGN.md §12).
	models map[string]*Model
	// gen is the generation of the MCP tools it holds (ToolSource).
	gen uint64
}

// newToolbox builds the toolbox of the built-in tools in set and the MCP
// tools in extra: the lead gets those lead.tools names (nil: the
// built-ins), and each subagent type picks from both (buildSpecs).
// offNote, when not empty, is the line that tells the lead why commands
// are missing.
func newToolbox(set *tools.Set, extra []tools.Tool, cfg SubagentsConfig, models map[string]*Model, lead LeadConfig, offNote string) (*toolbox, error) {
	all := tools.NewSet(append(setTools(set), extra...)...)
	leadSet := set
	if lead.Tools != nil {
		leadSet = pick(all, lead.Tools, []string{ToolTask})
	}
	agents, err := buildSpecs(cfg, leadSet, all, models)
	if err != nil {
		return nil, err
	}
	return &toolbox{
		tools:  leadSet,
		specs:  append(leadSet.Specs(), taskToolSpec(agents.catalog())),
		agents: agents,
		prompt: leadPrompt(lead, offNote),
		models: models,
	}, nil
}

// setTools lists the tools of s in order.
func setTools(s *tools.Set) []tools.Tool {
	out := make([]tools.Tool, 0, len(s.Names()))
	for _, n := range s.Names() {
		t, _ := s.Get(n)
		out = append(out, t)
	}
	return out
}

// mcpTool is a tool of an MCP server (agent/mcp.Tool), named in tools
// lists as mcp:<server>/<tool>.
type mcpTool interface {
	MCP() (server, tool string)
}

// pick is the tools of s that allow names (nil: all of them) and deny
// does not. An entry names a tool by its name, or MCP tools as
// mcp:<server>/<tool> or mcp:<server>/*.
func pick(s *tools.Set, allow *[]string, deny []string) *tools.Set {
	var out []tools.Tool
	for _, t := range setTools(s) {
		if (allow == nil || names(t, *allow)) && !names(t, deny) {
			out = append(out, t)
		}
	}
	return tools.NewSet(out...)
}

// names reports whether an entry of list names t.
func names(t tools.Tool, list []string) bool {
	for _, entry := range list {
		if m, ok := t.(mcpTool); ok {
			if server, tool := m.MCP(); mcp.Matches(entry, server, tool) {
				return true
			}
		} else if t.Spec().Name == entry {
			return true
		}
	}
	return false
}

// newToolboxes builds the toolbox with every tool and the one without
// commands: no bash tool for the lead, no bash subagent type, and no bash
// in any subagent's tools, so a model of a run without commands is never
// offered them. Where bash is not configured at all, both are the same.
func newToolboxes(all, extra []tools.Tool, cfg SubagentsConfig, models map[string]*Model, lead LeadConfig, offReason string) (with, without *toolbox, err error) {
	set := tools.NewSet(all...)
	with, err = newToolbox(set, extra, cfg, models, lead, "")
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
	without, err = newToolbox(set.Filter(nil, []string{tools.Bash}), extra, cfg, models, lead, note)
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
