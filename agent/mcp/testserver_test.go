//lint:file-ignore SA1019 the fixtures log as MCP servers still do (logging is deprecated as of MCP 2026-07-28, and still works)

package mcp_test

import (
	"context"
	"fmt"
	"herd/agent/mcp/mcptest"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// envStdio makes the test binary an MCP server on stdio (TestMain), so
// the stdio paths run a real child process.
const envStdio = "HERD_MCP_TEST_STDIO"

// envBroken names a file whose existence makes the stdio test server
// fail at start, saying so on stderr with envToken's value; its crash
// tool creates it.
const (
	envBroken = "HERD_MCP_TEST_BROKEN"
	envToken  = "HERD_TEST_TOKEN"
)

func TestMain(m *testing.M) {
	if os.Getenv(envStdio) == "1" {
		if p := os.Getenv(envBroken); p != "" {
			if _, err := os.Stat(p); err == nil {
				fmt.Fprintln(os.Stderr, "cannot start: the disk is gone; token", os.Getenv(envToken))
				os.Exit(1)
			}
		}
		srv, _ := newTestServer()
		if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// testState is what the test server saw.
type testState struct {
	cancelled chan string // a hang call's ctx ended: its reason
}

type echoIn struct {
	Text  string `json:"text" jsonschema:"what to echo"`
	Times int    `json:"times,omitempty" jsonschema:"how often, at least 1"`
}

// newTestServer is an MCP server with a tool for each path herd takes:
// one that succeeds, fails, hangs, reports progress, returns an image,
// changes the tool list, exits, or logs its arguments while other calls
// are in flight.
func newTestServer() (*sdk.Server, *testState) {
	st := &testState{cancelled: make(chan string, 4)}
	s := sdk.NewServer(&sdk.Implementation{Name: "herd-test", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echoes text."}, func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		out := ""
		for range max(in.Times, 1) {
			out += "echo: " + in.Text
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: out}}}, nil, nil
	})
	s.AddTool(&sdk.Tool{Name: "fail", Description: "Always fails.", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "the disk is on fire"}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "hang", Description: "Never answers.", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		<-ctx.Done()
		st.cancelled <- context.Cause(ctx).Error()
		return nil, ctx.Err()
	})
	s.AddTool(&sdk.Tool{Name: "picture", Description: "Returns an image.", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: "a red dot:"},
			&sdk.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG fake")},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "<b>not html</b>"}},
		}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "chatty", Description: "Logs while it works, returns an image as a resource.", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		for _, l := range []sdk.LoggingMessageParams{
			{Level: "debug", Data: "too fine to show"},
			{Level: "info", Data: "reading <page> 1"},
			{Level: "warning", Logger: "fetch", Data: map[string]any{"retry": 2}},
		} {
			if err := req.Session.Log(ctx, &l); err != nil {
				return nil, err
			}
		}
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: "done"},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///dot.gif", MIMEType: "image/gif", Blob: []byte("GIF89a")}},
		}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "grow", Description: "Adds the tool extra.", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		s.AddTool(&sdk.Tool{Name: "extra", Description: "Added later.", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "extra!"}}}, nil
		})
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "grown"}}}, nil
	})
	s.AddTool(&sdk.Tool{Name: "exit", Description: "Ends the server's process.", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		fmt.Fprintln(os.Stderr, "exiting on request")
		os.Exit(3)
		return nil, nil
	})
	type crashIn struct {
		Note string `json:"note" jsonschema:"what to print on stderr"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "Prints on stderr and exits, broken for good if HERD_MCP_TEST_BROKEN is set."}, func(_ context.Context, _ *sdk.CallToolRequest, in crashIn) (*sdk.CallToolResult, any, error) {
		if p := os.Getenv(envBroken); p != "" {
			_ = os.WriteFile(p, nil, 0o600)
		}
		fmt.Fprintln(os.Stderr, in.Note, os.Getenv(envToken))
		os.Exit(3)
		return nil, nil, nil
	})
	s.AddTool(&sdk.Tool{Name: "pid", Description: "The server's process id.", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strconv.Itoa(os.Getpid())}}}, nil
	})
	addAnnounce(s)
	type envIn struct {
		Name string `json:"name"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "env", Description: "Reads an environment variable."}, func(_ context.Context, _ *sdk.CallToolRequest, in envIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: os.Getenv(in.Name)}}}, nil, nil
	})
	return s, st
}

// httpServer serves a fresh test server on addr ("" for any port) and
// can be stopped and served again on the same address.
type httpServer struct {
	t     *testing.T
	addr  string
	srv   *httptest.Server
	mcp   *sdk.Server
	state *testState
}

func serveHTTP(t *testing.T, addr string) *httpServer {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var l net.Listener
	var err error
	for range 50 { // the port of a server just closed may linger briefly
		if l, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s, st := newTestServer()
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	hs := &httptest.Server{Listener: l, Config: &http.Server{Handler: handler}}
	hs.Start()
	h := &httpServer{t: t, addr: l.Addr().String(), srv: hs, mcp: s, state: st}
	t.Cleanup(h.crash)
	return h
}

func (h *httpServer) url() string { return "http://" + h.addr + "/mcp" }

// crash stops the server at once, its open streams included.
func (h *httpServer) crash() {
	h.srv.Config.SetKeepAlivesEnabled(false)
	_ = h.srv.Listener.Close()
	h.srv.CloseClientConnections()
	h.srv.Close()
	for ss := range h.mcp.Sessions() {
		_ = ss.Close()
	}
}

// serveRedirect answers every request with a redirect to to.
func serveRedirect(t *testing.T, to string) string {
	hs := httptest.NewServer(http.RedirectHandler(to, http.StatusTemporaryRedirect))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp"
}

// addAnnounce adds mcptest's announce tool and trail, which answers at
// once and logs a moment after.
func addAnnounce(s *sdk.Server) {
	mcptest.AddAnnounce(s)
	type trailIn struct {
		Word string `json:"word" jsonschema:"what to say after answering"`
	}
	// trail answers at once, and logs its word without a token a moment
	// after: a line that reaches herd when its call has ended.
	sdk.AddTool(s, &sdk.Tool{Name: "trail", Description: "Logs a word after it answered."}, func(_ context.Context, req *sdk.CallToolRequest, in trailIn) (*sdk.CallToolResult, any, error) {
		go func() {
			time.Sleep(150 * time.Millisecond)
			_ = req.Session.Log(context.Background(), &sdk.LoggingMessageParams{Level: "info", Data: "after " + in.Word})
		}()
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "trailing " + in.Word}}}, nil, nil
	})
}
