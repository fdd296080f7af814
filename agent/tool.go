package agent

import "herd/agent/tools"

// ToolTask is the task tool's name. Config validation checks allow- and
// deny-lists against ToolNames.
const ToolTask = "task"

// ToolNames lists every tool name herd knows: the task tool and the
// tools package's own.
func ToolNames() []string {
	return append([]string{ToolTask}, tools.Names()...)
}

// Built-in subagent types (docs/DESIGN.md §5).
const (
	SubagentGeneral = "general-purpose"
	SubagentBash    = "bash"
)
