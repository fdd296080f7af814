// Package mcptest holds the misbehaving MCP servers herd's tests meet, in
// the real SDK, for the package's own tests and the process tests alike:
// a tool that logs without tying its lines to a call, and a server that
// fails the ways careless servers do.
package mcptest

//lint:file-ignore SA1019 servers still log: MCP 2026-07-28 deprecates logging, which works through the deprecation window, and herd must route what they send

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// AnnounceIn is the announce tool's arguments.
type AnnounceIn struct {
	Word     string `json:"word" jsonschema:"what to say"`
	Group    string `json:"group" jsonschema:"the calls that say theirs together"`
	Together int    `json:"together" jsonschema:"how many calls of the group to wait for"`
}

// AddAnnounce adds announce, which waits until Together calls of its
// group are in flight, logs its word twice without a progress token, as a
// server logs a request's parameters — one line tied to its request
// (over HTTP on the call's own response stream, "said <word>") and one
// tied to none ("loose <word>") — waits until every call of the group has
// logged, and answers a moment later, so the lines reach the client while
// every call of the group is still in flight.
func AddAnnounce(s *sdk.Server) {
	var mu sync.Mutex
	gates := map[string]chan struct{}{}
	came := map[string]int{}
	meet := func(ctx context.Context, key string, n int) error {
		mu.Lock()
		gate, ok := gates[key]
		if !ok {
			gate = make(chan struct{})
			gates[key] = gate
		}
		if came[key]++; came[key] == n {
			close(gate)
		}
		mu.Unlock()
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Second):
			return fmt.Errorf("not every call of %s came", key)
		}
	}
	sdk.AddTool(s, &sdk.Tool{Name: "announce", Description: "Says a word in its log with others."}, func(ctx context.Context, req *sdk.CallToolRequest, in AnnounceIn) (*sdk.CallToolResult, any, error) {
		if err := meet(ctx, in.Group+"/in", in.Together); err != nil {
			return nil, nil, err
		}
		if err := req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Data: "said " + in.Word}); err != nil {
			return nil, nil, err
		}
		if err := req.Session.Log(context.Background(), &sdk.LoggingMessageParams{Level: "info", Data: "loose " + in.Word}); err != nil {
			return nil, nil, err
		}
		if err := meet(ctx, in.Group+"/out", in.Together); err != nil {
			return nil, nil, err
		}
		time.Sleep(300 * time.Millisecond)
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "announced " + in.Word}}}, nil, nil
	})
}

// Failing serves mcp while mode() is "", and otherwise fails as mode says:
// "401" (a JSON-RPC error), "500", "html" (a sign-in page), "json" (JSON
// that is not MCP). Every failing answer quotes the request's URL and
// Authorization header, as careless servers do.
func Failing(mcp http.Handler, mode func() string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		echo := r.URL.String() + " " + r.Header.Get("Authorization")
		switch mode() {
		case "401":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":%q}}`, "bad credentials: "+echo)
		case "500":
			http.Error(w, "it broke at "+echo, http.StatusInternalServerError)
		case "html":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<h1>Sign in</h1><p>%s</p>", echo)
		case "json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"hello": %q}`, echo)
		default:
			mcp.ServeHTTP(w, r)
		}
	})
}
