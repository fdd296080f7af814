package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd/agent"
	"herd/agent/mcp"
	"herd/server/hub"
)

// A subagent's MCP tool that reports progress shows it live on the card's
// stream as task_progress frames, and nothing of it is written: the
// thread's events hold one step per call, not one per tick.
func TestMCPProgressReachesTheCard(t *testing.T) {
	release := make(chan struct{})
	s := sdk.NewServer(&sdk.Implementation{Name: "fixture", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "slow", Description: "Reports progress.", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		for i := 1; i <= 3; i++ {
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: 3, Message: "page " + string(rune('0'+i))})
		}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "all pages read"}}}, nil
	})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	servers := mcp.New([]mcp.ServerConfig{{Name: "fixture", URL: hs.URL + "/mcp"}}, mcp.Options{})
	servers.Start()
	t.Cleanup(func() {
		servers.Close()
		hs.CloseClientConnections()
		hs.Close()
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
	})

	a := newApp(t, func(c *appConfig) {
		c.mcp = servers
		c.subagents = agent.SubagentsConfig{Agents: map[string]agent.AgentConfig{
			"reader": {Description: "Reads slowly.", Tools: &[]string{"mcp:fixture/slow"}},
		}}
	})
	u := a.newUser("ann@example.com", false)
	th := u.newThread("progress")
	conn := u.watch(th)
	u.startRun(th, "- reader: use fixture/slow")

	// Ticks closer than 100 ms apart are coalesced, the latest winning:
	// the first shows at once, the last always.
	var progress []string
	for len(progress) == 0 || !strings.Contains(progress[len(progress)-1], "3 of 3") {
		f, err := readFrame(conn, 20*time.Second)
		if err != nil {
			t.Fatalf("no progress frames (got %q): %v", progress, err)
		}
		if f.Type != hub.FrameTaskProgress {
			continue
		}
		var d struct{ Text string }
		if err := json.Unmarshal(f.Data, &d); err != nil || f.Seq != nil {
			t.Fatalf("progress frame %s: seq %v, err %v; want an unpersisted frame", f.Data, f.Seq, err)
		}
		progress = append(progress, d.Text)
	}
	if progress[0] != "slow: 1 of 3 · page 1" || progress[len(progress)-1] != "slow: 3 of 3 · page 3" || len(progress) > 3 {
		t.Errorf("progress = %q, want from 1 of 3 to 3 of 3", progress)
	}
	close(release)
	a.waitIdle(th)

	r := u.do("GET", "/api/threads/"+th+"/events?limit=1000", nil)
	if strings.Contains(string(r.body), "of 3") {
		t.Errorf("a progress tick was persisted: %s", r.body)
	}
	if !strings.Contains(string(r.body), "all pages read") {
		t.Errorf("the tool's result is not in the thread's steps: %s", r.body)
	}
}
