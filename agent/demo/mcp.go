package demo

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"herd/agent"
	"herd/agent/mcp"
)

// useTool is a task's request for an MCP tool: "use <server>/<tool>",
// optionally "with {json arguments}" to the end of the line.
var useTool = regexp.MustCompile(`(?m)\buse ([a-z0-9][a-z0-9-]*)/([A-Za-z0-9_.-]+)(?:[ \t]+with[ \t]+(\{.*\}))?`)

// use is one parsed "use <server>/<tool> with {...}".
type use struct {
	server, tool string
	args         json.RawMessage
}

func parseUse(prompt string) (use, bool) {
	if !strings.Contains(prompt, "use ") { // most prompts: no regexp run
		return use{}, false
	}
	m := useTool.FindStringSubmatch(prompt)
	if m == nil {
		return use{}, false
	}
	u := use{server: m[1], tool: m[2], args: json.RawMessage("{}")}
	if m[3] != "" {
		u.args = json.RawMessage(m[3])
	}
	return u, true
}

// useReply calls the MCP tool a task asks for on the first turn and
// reports its result on the next; a tool not offered is said so.
func useReply(u use, msgs []agent.Message, offered map[string]bool, turn int) reply {
	name := mcp.ModelName(u.server, u.tool)
	label := "`" + u.server + "/" + u.tool + "`"
	if !offered[name] {
		return reply{text: fmt.Sprintf("I can't use %s: it is not among my tools (an admin gives it to a subagent type with mcp:%s/%s in its tools list).", label, u.server, u.tool)}
	}
	if turn == 1 {
		if !json.Valid(u.args) {
			return reply{text: fmt.Sprintf("I can't use %s: the arguments after \"with\" are not valid JSON.", label)}
		}
		return reply{text: fmt.Sprintf("Using the MCP tool %s.", label), calls: []call{{name: name, args: u.args}}}
	}
	out := lastOf(msgs, agent.TypeTool)
	if after, ok := strings.CutPrefix(out, "Error: "); ok {
		return reply{text: fmt.Sprintf("The MCP tool %s failed:\n\n%s", label, codeBlock(after))}
	}
	return reply{text: fmt.Sprintf("I used the MCP tool %s. It returned:\n\n%s", label, codeBlock(out))}
}
