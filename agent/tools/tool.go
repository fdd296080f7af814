package tools

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
)

// Tool is a capability a model may call, registered by name with a JSON
// schema for its arguments (docs/DESIGN.md §4). Run's error is shown to the model
// as the tool's result; it never ends the run.
type Tool interface {
	Spec() Spec
	Run(ctx context.Context, env Env, args json.RawMessage) (string, error)
}

// Titled is a tool with a name for people ("Files › List directory"),
// which its cards and steps show instead of its model name.
type Titled interface {
	Title() string
}

// Spec is what a model is told about a tool.
type Spec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // a JSON schema object
}

// Env is where a tool call runs.
type Env struct {
	// Workspace is the absolute path of the thread's workspace directory.
	// It exists before any tool runs.
	Workspace string
	// User and Run say whose call it is. Limits per user (bash's commands
	// at once) count by User. A tool that serves every user's calls at once
	// (an MCP server's one session) hands what it cannot tie to one call
	// only to calls of a single user and run (docs/DESIGN.md §4); a call
	// without them gets no such output and counts against no user.
	User, Run string
	// Progress, when set, shows a running tool's progress live (an MCP
	// server's notifications/progress); nothing of it is persisted.
	Progress func(text string)
	// Log, when set, takes the tool's log messages (an MCP server's
	// notifications/message) with their level, to show with its call.
	Log func(level, text string)
	// Image, when set, takes an image the tool returned beside its text,
	// to show the user with its call; the text the model reads only says
	// that it was there.
	Image func(mimeType string, data []byte)
}

// Repeatable is a tool that is safe to run again with the same arguments
// when a restart cut its call off (docs/DESIGN.md §11): it only reads, or
// its effect is the same however often it runs. A tool that is not
// Repeatable (a command, a write) is never run again blindly: its call
// gets a result that says its outcome is unknown.
type Repeatable interface {
	Repeatable() bool
}

// IsRepeatable reports whether t may be run again after a restart.
func IsRepeatable(t Tool) bool {
	r, ok := t.(Repeatable)
	return ok && r.Repeatable()
}

// ErrBadArgs marks arguments that do not match a tool's schema.
var ErrBadArgs = errors.New("invalid arguments")

// errNoWorkspace refuses a call whose Env names no workspace: every tool
// runs in one.
var errNoWorkspace = errors.New("no workspace is set for this tool call")

// Names of the tools this package provides. Config validation checks
// allow- and deny-lists against them.
const (
	Bash       = "bash"
	Ls         = "ls"
	ReadFile   = "read_file"
	WriteFile  = "write_file"
	StrReplace = "str_replace"
)

// Names lists the names of the tools this package provides.
func Names() []string {
	return []string{Bash, Ls, ReadFile, WriteFile, StrReplace}
}

// Set is a set of tools keyed by name, in registration order.
type Set struct {
	order []string
	tools map[string]Tool
	// specs are the tools' specs in order, built once: every subagent
	// sends them, and a spec is marshalled anew on each Spec call.
	specs []Spec
}

// NewSet registers tools by their spec's name; a later tool with the same
// name replaces the earlier one.
func NewSet(tools ...Tool) *Set {
	s := &Set{tools: make(map[string]Tool, len(tools))}
	at := make(map[string]int, len(tools))
	for _, t := range tools {
		spec := t.Spec()
		if i, dup := at[spec.Name]; dup {
			s.specs[i] = spec
		} else {
			at[spec.Name] = len(s.order)
			s.order = append(s.order, spec.Name)
			s.specs = append(s.specs, spec)
		}
		s.tools[spec.Name] = t
	}
	return s
}

// Get returns the tool named name.
func (s *Set) Get(name string) (Tool, bool) {
	t, ok := s.tools[name]
	return t, ok
}

// Names lists the registered tool names in registration order.
func (s *Set) Names() []string { return append([]string(nil), s.order...) }

// Specs lists the tools' specs in registration order.
func (s *Set) Specs() []Spec { return slices.Clone(s.specs) }

// Filter returns the subset of s allowed by allow (nil = all) minus deny.
func (s *Set) Filter(allow *[]string, deny []string) *Set {
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
	return NewSet(out...)
}
