package demo

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"herd/agent"
	"herd/agent/tools"
)

// echoTool stands in for an MCP tool: it returns its arguments.
type echoTool struct{ name string }

func (e echoTool) Spec() tools.Spec {
	return tools.Spec{Name: e.name, Description: "echo", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (e echoTool) Run(_ context.Context, _ tools.Env, args json.RawMessage) (string, error) {
	return "got " + string(args), nil
}

func TestSubagentUsesMCPTool(t *testing.T) {
	d := New(agent.ModelConfig{Name: "demo-fast"})
	set := tools.NewSet(echoTool{"mcp__everything__echo"})
	resps := runSubagent(t, d, `use everything/echo with {"message":"hi"}`, set)
	if len(resps) != 2 || string(resps[0].ToolCalls[0].Args) != `{"message":"hi"}` {
		t.Fatalf("responses = %+v, want one call with the given arguments, then the answer", resps)
	}
	if got := resps[1].Text; !strings.Contains(got, "It returned") || !strings.Contains(got, `got {"message":"hi"}`) {
		t.Errorf("answer = %q, want the tool's result", got)
	}

	resps = runSubagent(t, d, "use search/web_search", set)
	if len(resps) != 1 || !strings.Contains(resps[0].Text, "not among my tools") {
		t.Errorf("a tool not offered: %+v", resps)
	}
}
