package agent_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"herd/agent"
	"herd/agent/anthropic"
	"herd/agent/anthropic/anthropictest"
	"herd/models"
)

// TestAnthropicThinkingDelegation runs the lead and a subagent with
// extended thinking through the real Anthropic provider against the fake,
// which refuses a continuing tool-use turn that does not open with its
// signed thinking, as the API does: both loops send their thinking back,
// the run completes, the lead's thinking is persisted apart from its
// answers, and the subagent's is on its steps, not in its result.
func TestAnthropicThinkingDelegation(t *testing.T) {
	srv := anthropictest.NewServer(t)
	srv.SetFallback(func(req anthropictest.MessagesRequest) anthropictest.Reply {
		switch {
		case offersTask(req) && !hasToolResult(req):
			return anthropictest.Reply{Thinking: []string{"Lead plans ", "a look."}, Chunks: []string{"Delegating."},
				ToolCalls: []anthropictest.ToolCall{{ID: "toolu_look", Name: agent.ToolTask, Input: `{"description":"look","prompt":"list the files","subagent_type":"general-purpose"}`}}}
		case offersTask(req):
			return anthropictest.Reply{Thinking: []string{"Lead concludes."}, Chunks: []string{"The workspace is empty."}}
		case !hasToolResult(req):
			return anthropictest.Reply{Thinking: []string{"Sub wants ls."}, ToolCalls: []anthropictest.ToolCall{{ID: "toolu_ls", Name: "ls", Input: `{}`}}}
		default:
			return anthropictest.Reply{Thinking: []string{"Sub sees nothing."}, Chunks: []string{"Nothing there."}}
		}
	})
	cfg := agent.ModelConfig{Name: "claude", Provider: "anthropic", Model: "claude-test", BaseURL: srv.URL(), APIKey: "sk-ant-e2e-key",
		TimeoutSeconds: 5, MaxOutputTokens: 8192, ThinkingBudgetTokens: 2048}
	p, err := anthropic.New(cfg, anthropic.WithHTTPClient(srv.Client()), anthropic.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	h := agent.NewHarness(t, agent.HarnessConfig{Models: []*agent.Model{{Config: cfg, Provider: p}}})
	t.Cleanup(srv.Close) // before the harness's leak check

	st := h.Run("what is in my workspace?")
	if r := h.RunRow(st.RunID); r.Status != models.RunCompleted {
		t.Fatalf("run %s %q, want completed", r.Status, r.Error)
	}
	all, _ := h.Store().Messages(context.Background(), h.Thread())
	var got []string
	for _, m := range all {
		if m.Type != agent.TypeAI {
			continue
		}
		var kw map[string]any
		_ = json.Unmarshal(m.AdditionalKwargs, &kw)
		got = append(got, m.Content+" | "+kw["reasoning_content"].(string))
	}
	if want := []string{"Delegating. | Lead plans a look.", "The workspace is empty. | Lead concludes."}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("AI messages:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	md := agent.MessageMetadata(t, h.ToolMessages()["toolu_look"])
	if md.Status != agent.StatusCompleted || md.ResultBrief != "Nothing there." {
		t.Errorf("task %+v, want its answer alone", md)
	}
	var steps []string
	for _, e := range h.Events("toolu_look") {
		if e.EventType == "subagent.step" {
			var s struct{ Kind, Text, Reasoning string }
			_ = json.Unmarshal(e.Content, &s)
			steps = append(steps, s.Kind+": "+s.Text+" | "+s.Reasoning)
		}
	}
	if want := []string{"ai:  | Sub wants ls.", "tool: (empty directory) | ", "ai: Nothing there. | Sub sees nothing."}; len(steps) != 3 || steps[0] != want[0] || steps[2] != want[2] {
		t.Errorf("steps:\n%s", strings.Join(steps, "\n"))
	}
	if n := len(srv.Requests()); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
}
