package anthropic

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"herd/agent"
	"herd/agent/anthropic/anthropictest"
	"herd/agent/tools"
)

func thinkingOn(c *agent.ModelConfig) { c.ThinkingBudgetTokens = 2048 }

func lsRequest() agent.Request {
	req := hello()
	req.Tools = []tools.Spec{{Name: "ls", Description: "list files", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}
	return req
}

// TestThinkingWithToolUse runs a thinking turn that calls a tool and its
// continuation: the thinking streams as reasoning apart from the text, the
// request asks for the budget, and the next call sends the signed thinking
// block back at the head of the assistant turn (the fake refuses the
// continuation otherwise, as the API does).
func TestThinkingWithToolUse(t *testing.T) {
	p, srv := newFake(t, thinkingOn,
		anthropictest.Reply{
			Thinking:         []string{"The user wants ", "the files."},
			RedactedThinking: "opaque-bytes",
			Chunks:           []string{"Let me look."},
			ToolCalls:        []anthropictest.ToolCall{{ID: "toolu_1", Name: "ls", Input: `{}`}},
		},
		anthropictest.Reply{Thinking: []string{"One file."}, Chunks: []string{"There is a.txt."}})

	req := lsRequest()
	var reasoning, text strings.Builder
	req.OnReasoning = func(s string) { reasoning.WriteString(s) }
	first, err := p.Complete(context.Background(), req, func(s string) { text.WriteString(s) })
	if err != nil {
		t.Fatalf("first call: %v", err)
	}
	if first.Text != "Let me look." || text.String() != "Let me look." {
		t.Errorf("text = %q, streamed %q; want only the answer", first.Text, text.String())
	}
	if first.Reasoning != "The user wants the files." || reasoning.String() != "The user wants the files." {
		t.Errorf("reasoning = %q, streamed %q", first.Reasoning, reasoning.String())
	}
	wantBlocks := []agent.ThinkingBlock{
		{Thinking: "The user wants the files.", Signature: anthropictest.Signature("The user wants the files.")},
		{Redacted: "opaque-bytes"},
	}
	if !equalBlocks(first.Thinking, wantBlocks) {
		t.Errorf("Thinking = %+v, want %+v", first.Thinking, wantBlocks)
	}
	if th := srv.Requests()[0].Messages.Thinking; th == nil || th.Type != "enabled" || th.BudgetTokens != 2048 {
		t.Errorf("request thinking = %+v, want enabled with 2048", th)
	}

	req.Messages = append(req.Messages,
		agent.Message{Type: agent.TypeAI, Content: first.Text, ToolCalls: first.ToolCalls, Thinking: first.Thinking},
		agent.Message{Type: agent.TypeTool, ToolCallID: "toolu_1", Name: "ls", Content: "a.txt"})
	second, err := p.Complete(context.Background(), req, nil)
	if err != nil {
		t.Fatalf("continuation: %v", err)
	}
	if second.Text != "There is a.txt." || second.Reasoning != "One file." {
		t.Errorf("second = %q / %q", second.Text, second.Reasoning)
	}
	sent := srv.Requests()[1].Messages.Messages[1]
	var types []string
	for _, b := range sent.Content {
		types = append(types, b.Type)
	}
	if got := strings.Join(types, ","); got != "thinking,redacted_thinking,text,tool_use" {
		t.Errorf("assistant turn sent back as %s", got)
	}
	if b := sent.Content[0]; b.Thinking != "The user wants the files." || b.Signature != anthropictest.Signature(b.Thinking) {
		t.Errorf("thinking block sent back as %+v", b)
	}
	if sent.Content[1].Data != "opaque-bytes" {
		t.Errorf("redacted block sent back as %+v", sent.Content[1])
	}
}

// TestThinkingRequiredOnContinuation checks the fake's own rule, so that
// TestThinkingWithToolUse can fail: a continuing tool-use turn without its
// thinking is refused when thinking is on.
func TestThinkingRequiredOnContinuation(t *testing.T) {
	p, _ := newFake(t, thinkingOn, anthropictest.Text("unused"))
	req := lsRequest()
	req.Messages = append(req.Messages,
		agent.Message{Type: agent.TypeAI, ToolCalls: []agent.ToolCall{{ID: "toolu_1", Name: "ls", Args: json.RawMessage(`{}`)}}},
		agent.Message{Type: agent.TypeTool, ToolCallID: "toolu_1", Name: "ls", Content: "a.txt"})
	_, err := p.Complete(context.Background(), req, nil)
	if err == nil || !strings.Contains(err.Error(), "must start with a thinking block") {
		t.Fatalf("err = %v, want the API's refusal", err)
	}
}

// TestThinkingOffSendsNoBlocks checks that thinking blocks go back only to
// a model with thinking on: without it the request asks for none and the
// blocks stay home.
func TestThinkingOffSendsNoBlocks(t *testing.T) {
	p, srv := newFake(t, nil, anthropictest.Text("ok"))
	req := lsRequest()
	req.Messages = append(req.Messages,
		agent.Message{Type: agent.TypeAI, ToolCalls: []agent.ToolCall{{ID: "toolu_1", Name: "ls", Args: json.RawMessage(`{}`)}},
			Thinking: []agent.ThinkingBlock{{Thinking: "x", Signature: "forged"}}},
		agent.Message{Type: agent.TypeTool, ToolCallID: "toolu_1", Name: "ls", Content: "a.txt"})
	if _, err := p.Complete(context.Background(), req, nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	r := srv.Requests()[0]
	if r.Messages.Thinking != nil || strings.Contains(string(r.Body), "thinking") {
		t.Errorf("request carries thinking: %s", r.Body)
	}
}

func TestThinkingBudgetValidated(t *testing.T) {
	for _, tt := range []struct {
		budget, maxTokens int
		ok                bool
	}{
		{0, 0, true}, {1024, 0, true}, {4095, 0, true}, {1023, 0, false}, {4096, 0, false}, {8000, 8000, false}, {8000, 16000, true}, {-1, 0, false},
	} {
		_, err := New(agent.ModelConfig{Name: "c", Provider: "anthropic", Model: "m", APIKey: "k", MaxOutputTokens: tt.maxTokens, ThinkingBudgetTokens: tt.budget})
		if (err == nil) != tt.ok {
			t.Errorf("budget %d, max %d: err = %v, want ok %v", tt.budget, tt.maxTokens, err, tt.ok)
		}
	}
}

func equalBlocks(a, b []agent.ThinkingBlock) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
