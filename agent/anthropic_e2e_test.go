package agent_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"herd/agent"
	"herd/agent/anthropic"
	"herd/agent/anthropic/anthropictest"
	"herd/models"
)

// anthropicModel is the real Anthropic provider pointed at a fake server.
func anthropicModel(t *testing.T, srv *anthropictest.Server) *agent.Model {
	t.Helper()
	cfg := agent.ModelConfig{Name: "claude", DisplayName: "Claude", Provider: "anthropic", Model: "claude-test", BaseURL: srv.URL(), APIKey: "sk-ant-e2e-key", TimeoutSeconds: 5}
	p, err := anthropic.New(cfg, anthropic.WithHTTPClient(srv.Client()), anthropic.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	return &agent.Model{Config: cfg, Provider: p}
}

func offersTask(req anthropictest.MessagesRequest) bool {
	return slices.ContainsFunc(req.Tools, func(tool anthropictest.Tool) bool { return tool.Name == agent.ToolTask })
}

func hasToolResult(req anthropictest.MessagesRequest) bool {
	for _, m := range req.Messages {
		for _, b := range m.Content {
			if b.Type == "tool_result" {
				return true
			}
		}
	}
	return false
}

// TestAnthropicDelegation runs the lead through the real Anthropic provider
// against the fake: its first turn delegates two tasks in parallel, each
// subagent answers, and the lead answers from their results. The cards
// complete with the subagents' usage, the ledger counts every call with
// its cache reads, and every request carries the cache breakpoints.
func TestAnthropicDelegation(t *testing.T) {
	cached := func(v int64) *int64 { return &v }
	srv := anthropictest.NewServer(t)
	srv.SetFallback(func(req anthropictest.MessagesRequest) anthropictest.Reply {
		switch {
		case offersTask(req) && !hasToolResult(req):
			return anthropictest.Reply{
				Chunks: []string{"Delegating."},
				ToolCalls: []anthropictest.ToolCall{
					{ID: "toolu_alpha", Name: agent.ToolTask, Input: `{"description":"alpha","prompt":"summarise alpha","subagent_type":"general-purpose"}`},
					{ID: "toolu_beta", Name: agent.ToolTask, Input: `{"description":"beta","prompt":"summarise beta","subagent_type":"general-purpose"}`},
				},
				Usage: &anthropictest.Usage{InputTokens: 100, OutputTokens: 30, CacheReadInputTokens: cached(0), CacheCreationInputTokens: cached(2000)},
			}
		case offersTask(req):
			return anthropictest.Reply{Chunks: []string{"Both ", "are done."},
				Usage: &anthropictest.Usage{InputTokens: 200, OutputTokens: 10, CacheReadInputTokens: cached(2000), CacheCreationInputTokens: cached(0)}}
		default:
			topic := "beta"
			if strings.Contains(req.Messages[0].Text(), "alpha") {
				topic = "alpha"
			}
			return anthropictest.Reply{Chunks: []string{"Summary of ", topic, "."},
				Usage: &anthropictest.Usage{InputTokens: 50, OutputTokens: 5, CacheReadInputTokens: cached(700)}}
		}
	})
	h := agent.NewHarness(t, agent.HarnessConfig{Models: []*agent.Model{anthropicModel(t, srv)}})
	t.Cleanup(srv.Close) // before the harness's leak check

	st := h.Run("compare alpha and beta")
	if r := h.RunRow(st.RunID); r.Status != models.RunCompleted {
		t.Fatalf("run %s %q, want completed", r.Status, r.Error)
	}
	all, _ := h.Store().Messages(context.Background(), h.Thread())
	if len(all) == 0 || all[len(all)-1].Type != agent.TypeAI || all[len(all)-1].Content != "Both are done." {
		t.Errorf("the answer is not the lead's last message: %+v", all[len(all)-1])
	}
	msgs := h.ToolMessages()
	for id, topic := range map[string]string{"toolu_alpha": "alpha", "toolu_beta": "beta"} {
		md := agent.MessageMetadata(t, msgs[id])
		if md.Status != agent.StatusCompleted || !strings.Contains(md.ResultBrief, "Summary of "+topic) {
			t.Errorf("%s: %+v", id, md)
		}
		// 50 uncached + 700 read from the cache, 5 out.
		if md.Usage == nil || *md.Usage != (agent.TokenUsage{InputTokens: 750, OutputTokens: 5, TotalTokens: 755}) {
			t.Errorf("%s usage %+v", id, md.Usage)
		}
	}

	rep, err := h.Store().Usage(context.Background(), h.Thread(), st.RunID)
	if err != nil {
		t.Fatal(err)
	}
	want := models.UsageTotals{
		InputTokens:     2100 + 2200 + 2*750,
		OutputTokens:    30 + 10 + 2*5,
		CacheReadTokens: 2000 + 2*700,
		Calls:           4,
	}
	want.TotalTokens = want.InputTokens + want.OutputTokens
	if rep.Total != want {
		t.Errorf("ledger %+v, want %+v", rep.Total, want)
	}

	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	for i, r := range reqs {
		m := r.Messages
		if len(m.System) == 0 || m.System[len(m.System)-1].CacheControl == nil {
			t.Errorf("request %d: no cache_control on the system prompt: %s", i, r.Body)
		}
		if len(m.Tools) > 0 && m.Tools[len(m.Tools)-1].CacheControl == nil {
			t.Errorf("request %d: no cache_control on the last tool", i)
		}
		if !offersTask(m) && hasToolResult(m) {
			t.Errorf("request %d: a subagent got tool results it never asked for", i)
		}
	}
	last := reqs[3].Messages
	if !offersTask(last) || !hasToolResult(last) {
		t.Errorf("the lead's last request lacks the task results: %s", reqs[3].Body)
	}
}

// TestAnthropicFaults: a lead whose Anthropic stream is cut, or that gets
// an overloaded error event, fails with the provider's reason and leaks
// nothing.
func TestAnthropicFaults(t *testing.T) {
	cases := []struct {
		name  string
		reply anthropictest.Reply
		want  string
	}{
		{"cut stream", anthropictest.Reply{Chunks: []string{"Hel", "lo"}, End: anthropictest.EndCut, After: 4}, "before message_stop"},
		{"overloaded mid-stream", anthropictest.Reply{Chunks: []string{"a"}, End: anthropictest.EndError, After: 3, Error: "Overloaded"}, "Overloaded"},
		{"bad request", anthropictest.Fail(400, "prompt is too long: 210000 tokens > 200000 maximum"), "prompt is too long"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := anthropictest.NewServer(t)
			srv.SetFallback(func(anthropictest.MessagesRequest) anthropictest.Reply { return c.reply })
			h := agent.NewHarness(t, agent.HarnessConfig{Models: []*agent.Model{anthropicModel(t, srv)}})
			t.Cleanup(srv.Close) // before the harness's leak check
			st := h.Run("hello")
			if r := h.RunRow(st.RunID); r.Status != models.RunFailed || !strings.Contains(r.Error, c.want) {
				t.Errorf("run %s %q, want failed with %q", r.Status, r.Error, c.want)
			}
		})
	}
}
