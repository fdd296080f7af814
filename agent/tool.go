package agent

import (
	"context"
	"encoding/json"
	"errors"
)

// Tool is a capability a model may call, registered by name with a JSON
// schema for its arguments (SPEC §4.2). Run's error is shown to the model
// as the tool's result; it never ends the run.
type Tool interface {
	Spec() ToolSpec
	Run(ctx context.Context, env ToolEnv, args json.RawMessage) (string, error)
}

// ToolEnv is where a tool call runs.
type ToolEnv struct {
	// Workspace is the absolute path of the thread's workspace directory.
	// It exists before any tool runs.
	Workspace string
}

// ErrBadArgs marks arguments that do not match a tool's schema.
var ErrBadArgs = errors.New("invalid arguments")

// Toolset is a set of tools keyed by name, in registration order.
type Toolset struct {
	order []string
	tools map[string]Tool
}

// NewToolset registers tools by their spec's name; a later tool with the
// same name replaces the earlier one.
func NewToolset(tools ...Tool) *Toolset {
	s := &Toolset{tools: make(map[string]Tool, len(tools))}
	for _, t := range tools {
		name := t.Spec().Name
		if _, dup := s.tools[name]; !dup {
			s.order = append(s.order, name)
		}
		s.tools[name] = t
	}
	return s
}

// Get returns the tool named name.
func (s *Toolset) Get(name string) (Tool, bool) {
	t, ok := s.tools[name]
	return t, ok
}

// Names lists the registered tool names in registration order.
func (s *Toolset) Names() []string { return append([]string(nil), s.order...) }

// Specs lists the tools' specs in registration order.
func (s *Toolset) Specs() []ToolSpec {
	specs := make([]ToolSpec, 0, len(s.order))
	for _, n := range s.order {
		specs = append(specs, s.tools[n].Spec())
	}
	return specs
}

// Filter returns the subset of s allowed by allow (nil = all) minus deny.
func (s *Toolset) Filter(allow *[]string, deny []string) *Toolset {
	denied := make(map[string]bool, len(deny))
	for _, n := range deny {
		denied[n] = true
	}
	var allowed map[string]bool
	if allow != nil {
		allowed = make(map[string]bool, len(*allow))
		for _, n := range *allow {
			allowed[n] = true
		}
	}
	var out []Tool
	for _, n := range s.order {
		if denied[n] || (allowed != nil && !allowed[n]) {
			continue
		}
		out = append(out, s.tools[n])
	}
	return NewToolset(out...)
}

// Tool names herd knows. Config validation checks allow- and deny-lists
// against them.
const (
	ToolTask       = "task"
	ToolBash       = "bash"
	ToolLs         = "ls"
	ToolReadFile   = "read_file"
	ToolWriteFile  = "write_file"
	ToolStrReplace = "str_replace"
)

// ToolNames lists every tool name herd knows.
func ToolNames() []string {
	return []string{ToolTask, ToolBash, ToolLs, ToolReadFile, ToolWriteFile, ToolStrReplace}
}

// Built-in subagent types (SPEC §4.4).
const (
	SubagentGeneral = "general-purpose"
	SubagentBash    = "bash"
)
