package server

import (
	"context"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd/agent"
)

// namedFixture is an MCP server titled "Files" with list_directory,
// titled "List directory" (it waits for gate), and read_text, untitled.
func namedFixture(gate <-chan struct{}) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "files-server", Title: "Files", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "list_directory", Title: "List directory", Description: "Lists.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a.md b.md"}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "read_text", Description: "Reads.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hello"}}}, nil
		})
	return s
}

// TestBrowserToolNames: MCP tools read as people say them — the card's
// activity and its step say "Files › List directory" (the server's and
// the tool's titles), the lead's own call "fixture › read text" (its
// name, underscores as spaces) — live and after a reload, the raw model
// name kept in a title attribute.
func TestBrowserToolNames(t *testing.T) {
	gate := make(chan struct{})
	a := newApp(t, func(c *appConfig) {
		c.mcp = serveFixture(t, namedFixture(gate))
		c.lead = agent.LeadConfig{Tools: &[]string{"mcp:fixture/read_text"}}
		c.subagents = agent.SubagentsConfig{Agents: map[string]agent.AgentConfig{
			"lister": {Description: "Lists.", Tools: &[]string{"mcp:fixture/list_directory"}},
		}}
	})
	u := a.newUser("ann@example.com", false)
	th := u.newThread("names")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	card := `#messages section.card`
	b.sendMessage("- lister: use fixture/list_directory")
	b.waitFor("the card's activity in words", `document.querySelector("#messages section.card .card-status")?.textContent.includes("Using Files › List directory")`, 20*time.Second)
	b.activate("expand the card", card+" .card-toggle")
	stepName := `(() => { const s = document.querySelector("#messages section.card .step-call .step-tool"); return s?.textContent === "Files › List directory" && s.title === "mcp__fixture__list_directory"; })()`
	resultName := `(() => { const s = document.querySelector("#messages section.card .card-step-tool .step-tool"); return s?.textContent === "Files › List directory" && s.title === "mcp__fixture__list_directory"; })()`
	b.waitFor("the step's tool name live", stepName, 20*time.Second)
	b.shot("card-live")
	close(gate)
	b.waitFor("the tool step's name live", resultName, 20*time.Second)
	b.waitRunEnd(a, th)

	b.sendMessage("use fixture/read_text")
	leadName := `(() => { const n = document.querySelector("#messages .tool-call .tool-name"); return n?.textContent === "fixture › read text" && n.title === "mcp__fixture__read_text"; })()`
	b.waitFor("the lead's call's name live", leadName, 20*time.Second)
	b.waitRunEnd(a, th)

	b.reload()
	b.waitFor("the lead's call's name after a reload", leadName, 10*time.Second)
	evalAs[bool](b, `(() => { const t = document.querySelector("#messages section.card .card-toggle"); if (t.getAttribute("aria-expanded") !== "true") t.click(); return true; })()`)
	b.waitFor("the step's tool name after a reload", stepName+" && "+resultName, 20*time.Second)
	b.scrollTo(card)
	b.shot("reloaded")
}
