package agent_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"herd/agent"
	"herd/agent/openai"
	"herd/agent/openai/openaitest"
	"herd/models"
)

// TestFailureNoticesFromTheOpenAIProvider: the OpenAI provider's real
// failures read as plain words on the run's end, and what streamed before
// a timeout stays, marked incomplete.
func TestFailureNoticesFromTheOpenAIProvider(t *testing.T) {
	closed := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		return "http://" + addr + "/v1"
	}
	for _, c := range []struct {
		name        string
		reply       *openaitest.Reply // nil: nothing listens
		wantNotice  string
		wantPartial string
	}{
		{"timeout after streaming", &openaitest.Reply{Chunks: []string{"Half ", "an answer"}, End: openaitest.EndHang, After: 3}, "The model server stopped answering (timeout after 1 s). Retry; if it keeps happening, an admin can raise timeout_seconds in herd.yaml.", "Half an answer"},
		{"server error", &openaitest.Reply{Status: http.StatusInternalServerError, Error: "boom"}, "The model provider failed (HTTP 500): the fault is on its side. Retry in a moment.", ""},
		{"nothing listens", nil, "The model server could not be reached. Retry; if it keeps failing, an admin can check base_url in herd.yaml and the network.", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := agent.ModelConfig{Name: "local", Provider: "openai", Model: "llama", APIKey: "x", TimeoutSeconds: 1, MaxRetries: new(0)}
			var opts []openai.Option
			var srv *openaitest.Server
			if c.reply != nil {
				srv = openaitest.NewServer(t, *c.reply)
				cfg.BaseURL = srv.URL()
				opts = append(opts, openai.WithHTTPClient(srv.Client()))
			} else {
				cfg.BaseURL = closed()
			}
			p, err := openai.New(cfg, append(opts, openai.WithMaxRetryDelay(time.Millisecond))...)
			if err != nil {
				t.Fatal(err)
			}
			h := agent.NewHarness(t, agent.HarnessConfig{Models: []*agent.Model{{Config: cfg, Provider: p}}})
			if srv != nil {
				t.Cleanup(srv.Close) // before the harness checks for leaks
			}
			st := h.Run("hello")
			es, _, err := h.Store().Events(context.Background(), h.Thread(), models.EventFilter{RunID: st.RunID, EventTypes: []string{"run.end"}})
			if err != nil || len(es) != 1 {
				t.Fatalf("run.end: %d events, %v", len(es), err)
			}
			var end agent.RunEnd
			if err := json.Unmarshal(es[0].Content, &end); err != nil || end.Status != models.RunFailed || end.Notice != c.wantNotice {
				t.Errorf("run.end = %s %q (%v), want failed %q; error %q", end.Status, end.Notice, err, c.wantNotice, end.Error)
			}
			msgs, _ := h.Store().Messages(context.Background(), h.Thread())
			partial := ""
			for _, m := range msgs {
				if m.Type == agent.TypeAI {
					partial = m.Content
				}
			}
			if partial != c.wantPartial {
				t.Errorf("kept answer = %q, want %q", partial, c.wantPartial)
			}
		})
	}
}
