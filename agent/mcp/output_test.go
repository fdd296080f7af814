package mcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herd/agent/mcp"
	"herd/agent/tools"
)

// shown is what a call handed to its Env beside the result.
type shown struct {
	mu     sync.Mutex
	logs   []string
	images []string
}

func (s *shown) env(t *testing.T) tools.Env {
	return tools.Env{
		Workspace: t.TempDir(),
		User:      "ann",
		Run:       "run-1",
		Log: func(level, text string) {
			s.mu.Lock()
			s.logs = append(s.logs, level+" "+text)
			s.mu.Unlock()
		},
		Image: func(mimeType string, data []byte) {
			s.mu.Lock()
			s.images = append(s.images, mimeType+" "+string(data))
			s.mu.Unlock()
		},
	}
}

// A call's log messages (notifications/message, from info up: herd asks
// for that level) and its images, as image content or as an embedded
// resource's blob, reach the call's Env, over stdio and HTTP; the model's
// text still only names them.
func TestLogsAndImagesReachTheCall(t *testing.T) {
	h := serveHTTP(t, "")
	for _, cfg := range []mcp.ServerConfig{{Name: "web", URL: h.url(), TimeoutSeconds: 10}, stdioServer("kid")} {
		t.Run(cfg.Transport(), func(t *testing.T) {
			s := start(t, cfg)
			ts := toolsOf(t, s, true)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			var got shown
			out, err := ts[mcp.ModelName(cfg.Name, "chatty")].Run(ctx, got.env(t), json.RawMessage(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if want := "done\n[resource file:///dot.gif: image/gif, 6 bytes]"; out != want {
				t.Errorf("result = %q, want %q", out, want)
			}
			// Notifications may trail the result on their own stream.
			deadline := time.Now().Add(5 * time.Second)
			want := []string{"info reading <page> 1", `warning fetch: {"retry":2}`}
			for {
				got.mu.Lock()
				logs := slices.Clone(got.logs)
				got.mu.Unlock()
				if slices.Equal(logs, want) || time.Now().After(deadline) {
					if !slices.Equal(logs, want) {
						t.Errorf("logs = %q, want %q", logs, want)
					}
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if want := []string{"image/gif GIF89a"}; !slices.Equal(got.images, want) {
				t.Errorf("images = %q, want %q", got.images, want)
			}

			var pic shown
			if _, err := ts[mcp.ModelName(cfg.Name, "picture")].Run(ctx, pic.env(t), json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
			if want := []string{"image/png \x89PNG fake"}; !slices.Equal(pic.images, want) {
				t.Errorf("picture's images = %q, want %q", pic.images, want)
			}
			if len(pic.logs) != 0 {
				t.Errorf("a call that logs nothing got %q: another call's lines?", pic.logs)
			}
		})
	}
}

// A log message sent while no call runs goes nowhere, and one call's
// lines never reach a call made after it ended.
func TestLogLinesEndWithTheCall(t *testing.T) {
	h := serveHTTP(t, "")
	s := start(t, mcp.ServerConfig{Name: "web", URL: h.url(), TimeoutSeconds: 10})
	ts := toolsOf(t, s, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var first shown
	if _, err := ts["mcp__web__chatty"].Run(ctx, first.env(t), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	var second shown
	if _, err := ts["mcp__web__echo"].Run(ctx, second.env(t), json.RawMessage(`{"text":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if len(second.logs) != 0 && strings.Contains(strings.Join(second.logs, ""), "reading") {
		t.Errorf("echo got chatty's lines: %q", second.logs)
	}
}
