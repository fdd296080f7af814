package agent

import "strings"

// ToolLabel is how people read a tool's name (docs/DESIGN.md §9): an MCP
// tool's model name mcp__files__list_directory reads "files › list
// directory", or title when its server gave one (tools.Titled); any
// other tool keeps its name. The raw name stays in a title attribute and
// under Details. static/format.js toolLabel is the same rule
// (contracts/card_format_contract.json).
func ToolLabel(name, title string) string {
	if title = strings.TrimSpace(title); title != "" {
		return title
	}
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		if server, tool, ok := strings.Cut(rest, "__"); ok && server != "" && tool != "" {
			return server + " › " + spaced(tool)
		}
	}
	return name
}

// spaced writes a tool's name with its underscores as spaces.
func spaced(name string) string {
	return strings.Join(strings.FieldsFunc(name, func(r rune) bool { return r == '_' }), " ")
}
