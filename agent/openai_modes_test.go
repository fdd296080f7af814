package agent_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"herd/agent"
	"herd/agent/openai"
	"herd/agent/openai/openaitest"
	"herd/models"
)

// delegatingServer answers like a model that delegates once: the lead's
// first turn calls task, the subagent answers, the lead then answers.
// refuseStreamedTools makes it fail streamed requests that carry tools,
// as servers that cannot stream tool calls do.
func delegatingServer(t *testing.T, refuseStreamedTools bool) *openaitest.Server {
	srv := openaitest.NewServer(t)
	usage := &openaitest.Usage{PromptTokens: 100, CompletionTokens: 10, TotalTokens: 110}
	srv.SetFallback(func(req openaitest.ChatRequest) openaitest.Reply {
		if refuseStreamedTools && req.Stream && len(req.Tools) > 0 {
			return openaitest.Fail(http.StatusBadRequest, "tool calls are not supported with stream: true")
		}
		lead := false
		for _, tool := range req.Tools {
			lead = lead || tool.Function.Name == agent.ToolTask
		}
		last := req.Messages[len(req.Messages)-1]
		switch {
		case lead && last.Role == "tool":
			return openaitest.Reply{Chunks: []string{"The subagent ", "found it."}, Usage: usage}
		case lead:
			return openaitest.Reply{Chunks: []string{"Delegating."}, Usage: usage, ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: agent.ToolTask,
				Args: `{"description":"look","prompt":"look around","subagent_type":"general-purpose"}`}}}
		default:
			return openaitest.Reply{Chunks: []string{"Looked around: all fine."}, Usage: usage}
		}
	})
	return srv
}

func modeModel(t *testing.T, srv *openaitest.Server, stream string) *agent.Model {
	t.Helper()
	cfg := agent.ModelConfig{Name: "gpt", Provider: "openai", Model: "gpt-test", BaseURL: srv.URL(), APIKey: "x",
		TimeoutSeconds: 5, MaxRetries: new(0), Stream: agent.StreamMode(stream)}
	p, err := openai.New(cfg, openai.WithHTTPClient(srv.Client()), openai.WithMaxRetryDelay(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return &agent.Model{Config: cfg, Provider: p}
}

// TestDelegationWithoutStreaming: a lead delegates through a server spoken
// to without streaming (stream: false), and through one that refuses
// streamed tool calls (stream: auto falls back): the card completes, the
// answer arrives, and every call's tokens are counted.
func TestDelegationWithoutStreaming(t *testing.T) {
	for _, tt := range []struct {
		name, stream string
		refuse       bool
		wantStreamed int // requests that asked to stream
	}{
		{"stream false", "false", false, 0},
		// auto: the lead's first turn tries to stream and falls back; every
		// later call with tools goes plain at once. The subagent's calls
		// carry tools too.
		{"auto falls back", "auto", true, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := delegatingServer(t, tt.refuse)
			h := agent.NewHarness(t, agent.HarnessConfig{Models: []*agent.Model{modeModel(t, srv, tt.stream)}})
			t.Cleanup(srv.Close) // before the harness's leak check
			st := h.Run("delegate please")

			if r := h.RunRow(st.RunID); r.Status != models.RunCompleted {
				t.Fatalf("run %s %q, want completed", r.Status, r.Error)
			}
			msgs, err := h.Store().Messages(context.Background(), h.Thread())
			if err != nil {
				t.Fatal(err)
			}
			if last := msgs[len(msgs)-1]; last.Content != "The subagent found it." {
				t.Errorf("last message %q, want the lead's answer", last.Content)
			}
			md := agent.MessageMetadata(t, h.ToolMessages()["call_1"])
			if md.Status != agent.StatusCompleted || md.Usage == nil || md.Usage.TotalTokens != 110 {
				t.Errorf("card %+v (usage %+v), want completed with the subagent's 110 tokens", md, md.Usage)
			}
			types := strings.Join(agent.EventTypesOf(h.Events("call_1")), " ")
			if !strings.Contains(types, agent.EventSubagentStart) || !strings.Contains(types, agent.EventSubagentEnd) {
				t.Errorf("card events %s, want its start and end", types)
			}
			u, err := h.Store().Usage(context.Background(), h.Thread(), st.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if u.Total.TotalTokens != 330 || u.Subagents.TotalTokens != 110 {
				t.Errorf("usage %+v, want 3 calls of 110 tokens, one a subagent's", u)
			}
			streamed := 0
			for _, r := range srv.Requests() {
				if r.Chat.Stream {
					streamed++
				}
			}
			if n := len(srv.Requests()); streamed != tt.wantStreamed || n != 3+tt.wantStreamed {
				t.Errorf("%d requests, %d streamed; want %d, %d", n, streamed, 3+tt.wantStreamed, tt.wantStreamed)
			}
		})
	}
}
