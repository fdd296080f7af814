package e2e

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"herd/internal/pgtest"
)

// TestClusterToolImageOnEveryInstance: an image a subagent's MCP tool
// returned during a run on instance A is kept in the shared workspaces
// directory, so instance B serves it to the thread's owner, as A does.
func TestClusterToolImageOnEveryInstance(t *testing.T) {
	mcpEnv := everythingEnv(t)
	dsn := pgtest.DSN(t)
	shared := t.TempDir()
	env := clusterEnv(dsn, "HERD_WORKSPACES_DIR="+shared,
		mcpEnv,
		"HERD_SUBAGENTS_AGENTS={imager: {description: Gets pictures., tools: ['mcp:everything/get-tiny-image']}}",
		"HERD_MODELS_0_LATENCY_MS=20", "HERD_MODELS_1_LATENCY_MS=20")
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca := a.signIn()
	var th struct{ ID string }
	ca.call("POST", "/api/threads", map[string]string{"title": "image"}, &th)
	ca.send(th.ID, "- imager: use everything/get-tiny-image")
	var ev struct {
		Events []struct {
			Content struct {
				Output *struct {
					Images []struct{ ID string }
				} `json:"output"`
			} `json:"content"`
		} `json:"events"`
	}
	ca.call("GET", "/api/threads/"+th.ID+"/events?event_types=subagent.step&limit=100", nil, &ev)
	id := ""
	for _, e := range ev.Events {
		if e.Content.Output != nil && len(e.Content.Output.Images) == 1 {
			id = e.Content.Output.Images[0].ID
		}
	}
	if id == "" {
		t.Fatalf("no step kept an image: %+v", ev.Events)
	}
	get := func(p *proc, c *client) (int, []byte) {
		resp, err := c.http.Get(p.url + "/api/threads/" + th.ID + "/tool-images/" + id)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	cb := b.signIn()
	for name, side := range map[string]struct {
		p *proc
		c *client
	}{"A": {a, ca}, "B": {b, cb}} {
		if code, body := get(side.p, side.c); code != 200 || !bytes.HasPrefix(body, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("the image from %s: %d, %d bytes", name, code, len(body))
		}
	}
	if _, err := os.Stat(filepath.Join(shared, ".tool-images", th.ID, id)); err != nil {
		t.Errorf("the image is not in the shared workspaces directory: %v", err)
	}
	stopHerd(t, a)
	stopHerd(t, b)
}
