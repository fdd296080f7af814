package mcp

import (
	"regexp"
	"strings"
)

// SelectorPrefix starts a tools-list entry that names MCP tools:
// mcp:<server>/<tool>, or mcp:<server>/* for all of a server's tools.
const SelectorPrefix = "mcp:"

// ServerName is what a server's name must look like: it becomes part of
// the tool names models see, which providers limit to [A-Za-z0-9_-].
var ServerName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,23})$`)

// ParseSelector splits mcp:<server>/<tool>; ok is false for any entry
// not of that form (tool may be *).
func ParseSelector(s string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(s, SelectorPrefix)
	if !found {
		return "", "", false
	}
	server, tool, found = strings.Cut(rest, "/")
	if !found || server == "" || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

// Matches reports whether selector names tool of server.
func Matches(selector, server, tool string) bool {
	s, t, ok := ParseSelector(selector)
	return ok && s == server && (t == "*" || t == tool)
}

// maxNameLen is the tool-name limit of the strictest provider (OpenAI).
const maxNameLen = 64

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// ModelName is the name a model sees for tool of server:
// mcp__<server>__<tool>, the tool's name made safe for providers and
// cut to their length limit. The double underscore keeps two servers'
// tools apart, since a server's name has none.
func ModelName(server, tool string) string {
	n := "mcp__" + server + "__" + unsafeName.ReplaceAllString(tool, "_")
	if len(n) > maxNameLen {
		n = n[:maxNameLen]
	}
	return n
}
