//lint:file-ignore SA1019 the fixtures log as MCP servers still do (logging is deprecated as of MCP 2026-07-28, and still works)

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd/agent"
	"herd/agent/mcp"
	"herd/server/hub"
)

// tinyPNG is a real 48×32 PNG: a gradient with a dot.
func tinyPNG(t testing.TB) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 48, 32))
	for x := range 48 {
		for y := range 32 {
			img.Set(x, y, color.RGBA{R: uint8(40 + 4*x), G: uint8(90 + 3*y), B: 200, A: 255})
		}
	}
	for x := 20; x < 28; x++ {
		for y := 12; y < 20; y++ {
			img.Set(x, y, color.RGBA{R: 230, G: 40, B: 40, A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// serveFixture serves an MCP server over streamable HTTP for the test
// and returns its Servers, started.
func serveFixture(t testing.TB, s *sdk.Server) *mcp.Servers {
	t.Helper()
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
	return servers
}

// spamSeconds is how long the spam tool reports progress, a thousand
// times a second.
const spamSeconds = 0.6

// outputFixture has a tool that floods progress for spamSeconds, logs,
// and returns text and an image.
func outputFixture(t testing.TB) (*sdk.Server, *int) {
	pic := tinyPNG(t)
	sentTotal := new(int)
	s := sdk.NewServer(&sdk.Implementation{Name: "fixture", Version: "1"}, nil)
	s.AddTool(&sdk.Tool{Name: "spam", Description: "Floods progress, logs, returns an image.", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		token := req.Params.GetProgressToken()
		_ = req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Data: "starting <b>now</b>"})
		start, n := time.Now(), 0
		for time.Since(start) < time.Duration(spamSeconds*float64(time.Second)) {
			n++
			if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: float64(n)}); err != nil {
				return nil, err
			}
			time.Sleep(time.Millisecond)
		}
		n++
		*sentTotal = n
		_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Total: float64(n)})
		_ = req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "warning", Logger: "spam", Data: "finished"})
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: "spammed"},
			&sdk.ImageContent{MIMEType: "image/png", Data: pic},
		}}, nil
	})
	return s, sentTotal
}

// The lead's own MCP call shows its progress next to the call
// (tool_progress), at most ten frames a second however fast the server
// reports, the final value always; its log lines stream as tool_log; the
// ToolMessage keeps the image and the log for the page
// (additional_kwargs.tool_output), and the model's text only names the
// image. The image is served to the thread's owner alone, as a PNG.
func TestLeadMCPCallShowsProgressLogsAndImage(t *testing.T) {
	fixture, sentTotal := outputFixture(t)
	a := newApp(t, func(c *appConfig) {
		c.mcp = serveFixture(t, fixture)
		c.lead = agent.LeadConfig{Tools: &[]string{"mcp:fixture/*"}}
	})
	u := a.newUser("ann@example.com", false)
	th := u.newThread("spam")
	conn := u.watch(th)
	u.startRun(th, "use fixture/spam")

	var progress []string
	var first, last time.Time
	var logs []agent.ToolLog
	var toolMsg hub.MessageJSON
	for toolMsg.ID == "" {
		f, err := readFrame(conn, 20*time.Second)
		if err != nil {
			t.Fatalf("the run's frames stopped (progress %d, logs %v): %v", len(progress), logs, err)
		}
		switch f.Type {
		case FrameToolProgress:
			var d struct {
				ToolCallID string `json:"tool_call_id"`
				Text       string `json:"text"`
			}
			if err := json.Unmarshal(f.Data, &d); err != nil || f.Seq != nil || d.ToolCallID == "" {
				t.Fatalf("tool_progress %s (seq %v): want an unpersisted frame naming its call", f.Data, f.Seq)
			}
			if first.IsZero() {
				first = time.Now()
			}
			last = time.Now()
			progress = append(progress, d.Text)
		case FrameToolLog:
			var d struct {
				ToolCallID string          `json:"tool_call_id"`
				TaskID     string          `json:"task_id"`
				Lines      []agent.ToolLog `json:"lines"`
			}
			if err := json.Unmarshal(f.Data, &d); err != nil || f.Seq != nil || d.ToolCallID == "" || d.TaskID != "" {
				t.Fatalf("tool_log %s: want an unpersisted frame of the lead's call", f.Data)
			}
			logs = append(logs, d.Lines...)
		case hub.FrameMessage:
			var m hub.MessageJSON
			if err := json.Unmarshal(f.Data, &m); err != nil {
				t.Fatal(err)
			}
			if m.Type == agent.TypeTool {
				toolMsg = m
			}
		}
	}
	a.waitIdle(th)

	final := "spam: " + strconv.Itoa(*sentTotal) + " of " + strconv.Itoa(*sentTotal)
	if len(progress) == 0 || progress[len(progress)-1] != final {
		t.Fatalf("progress frames end %q, want the final %q", progress, final)
	}
	window := last.Sub(first)
	if limit := int(window/(100*time.Millisecond)) + 2; len(progress) > limit || len(progress) < 2 {
		t.Errorf("%d updates made %d tool_progress frames in %v; want 2 to %d (≤ 10 a second)", *sentTotal, len(progress), window, limit)
	}
	t.Logf("%d progress notifications → %d frames in %v", *sentTotal, len(progress), window.Round(time.Millisecond))
	if got := logLines(logs); got != "info starting <b>now</b>|warning spam: finished" {
		t.Errorf("live log lines = %q", got)
	}

	if toolMsg.Content != "spammed\n[image: image/png, "+strconv.Itoa(len(tinyPNG(t)))+" bytes]" {
		t.Errorf("the model's text = %q", toolMsg.Content)
	}
	var kw struct {
		Output agent.ToolOutput `json:"tool_output"`
	}
	if err := json.Unmarshal(toolMsg.AdditionalKwargs, &kw); err != nil || len(kw.Output.Images) != 1 || kw.Output.Images[0].ID == "" {
		t.Fatalf("tool message kwargs = %s, want tool_output with one kept image", toolMsg.AdditionalKwargs)
	}
	if got := logLines(kw.Output.Logs); got != "info starting <b>now</b>|warning spam: finished" {
		t.Errorf("kept log lines = %q", got)
	}

	url := "/api/threads/" + th + "/tool-images/" + kw.Output.Images[0].ID
	r := u.do("GET", url, nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "image/png" || r.header.Get("X-Content-Type-Options") != "nosniff" || !bytes.Equal(r.body, tinyPNG(t)) {
		t.Errorf("GET image: %d %q nosniff=%q, %d bytes", r.status, r.header.Get("Content-Type"), r.header.Get("X-Content-Type-Options"), len(r.body))
	}
	if cc := r.header.Get("Cache-Control"); !strings.Contains(cc, "private") {
		t.Errorf("Cache-Control %q, want private", cc)
	}
	bob := a.newUser("bob@example.com", false)
	if r := bob.do("GET", url, nil); r.status != http.StatusNotFound {
		t.Errorf("another user's GET: %d, want 404", r.status)
	}
	for _, name := range []string{"x.png", strings.TrimSuffix(kw.Output.Images[0].ID, ".png") + ".svg", "..%2f..%2fherd.db"} {
		if r := u.do("GET", "/api/threads/"+th+"/tool-images/"+name, nil); r.status != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", name, r.status)
		}
	}
	// Nothing of the ticks was written: one tool message, no event.
	r = u.do("GET", "/api/threads/"+th+"/events?limit=1000", nil)
	if strings.Contains(string(r.body), "spam: ") {
		t.Errorf("a progress tick was persisted: %s", r.body)
	}
	// A deleted thread's images go with its workspace.
	if err := a.rt.RemoveWorkspace(th); err != nil {
		t.Fatal(err)
	}
	if r := u.do("GET", url, nil); r.status != http.StatusNotFound {
		t.Errorf("GET the image of a removed workspace: %d, want 404", r.status)
	}
}

func logLines(lines []agent.ToolLog) string {
	var out []string
	for _, l := range lines {
		out = append(out, l.Level+" "+l.Text)
	}
	return strings.Join(out, "|")
}

// A subagent's MCP call keeps its image and log lines on its tool step
// (output), which the expanded card reads from the events API, and its
// log lines stream live as tool_log frames naming its task.
func TestSubagentStepKeepsToolOutput(t *testing.T) {
	fixture, _ := outputFixture(t)
	a := newApp(t, func(c *appConfig) {
		c.mcp = serveFixture(t, fixture)
		c.subagents = agent.SubagentsConfig{Agents: map[string]agent.AgentConfig{
			"spammer": {Description: "Spams.", Tools: &[]string{"mcp:fixture/spam"}},
		}}
	})
	u := a.newUser("ann@example.com", false)
	th := u.newThread("spam")
	conn := u.watch(th)
	u.startRun(th, "- spammer: use fixture/spam")
	var taskLog bool
	for !taskLog {
		f, err := readFrame(conn, 20*time.Second)
		if err != nil {
			t.Fatalf("no tool_log frame of the task: %v", err)
		}
		if f.Type == FrameToolLog {
			var d struct {
				TaskID string `json:"task_id"`
			}
			_ = json.Unmarshal(f.Data, &d)
			taskLog = d.TaskID != ""
		}
	}
	a.waitIdle(th)
	var page struct {
		Events []struct {
			Content struct {
				Kind     string            `json:"kind"`
				ToolName string            `json:"tool_name"`
				Output   *agent.ToolOutput `json:"output"`
			} `json:"content"`
		} `json:"events"`
	}
	u.mustJSON("GET", "/api/threads/"+th+"/events?event_types=subagent.step&limit=100", nil, http.StatusOK, &page)
	var out *agent.ToolOutput
	for _, e := range page.Events {
		if e.Content.Kind == "tool" && e.Content.ToolName == "mcp__fixture__spam" {
			out = e.Content.Output
		}
	}
	if out == nil || len(out.Images) != 1 || out.Images[0].ID == "" || logLines(out.Logs) != "info starting <b>now</b>|warning spam: finished" {
		t.Fatalf("the tool step's output = %+v, want the image and both lines", out)
	}
	if r := u.do("GET", "/api/threads/"+th+"/tool-images/"+out.Images[0].ID, nil); r.status != http.StatusOK {
		t.Errorf("GET the step's image: %d", r.status)
	}
}
