package openai

import (
	"context"
	"strings"
	"testing"

	"herd/agent"
	"herd/agent/openai/openaitest"
)

// TestReasoningForms runs each form of reasoning an OpenAI-compatible
// server sends, streamed and plain, and checks that it reaches
// Response.Reasoning and OnReasoning and never the answer's text.
func TestReasoningForms(t *testing.T) {
	tests := []struct {
		name          string
		reply         openaitest.Reply
		wantText      string
		wantReasoning string
	}{
		{
			name:          "reasoning_content (DeepSeek, vLLM)",
			reply:         openaitest.Reply{Reasoning: []string{"The user ", "greets me."}, Chunks: []string{"Hi", " there"}},
			wantText:      "Hi there",
			wantReasoning: "The user greets me.",
		},
		{
			name:          "reasoning (OpenRouter, Ollama)",
			reply:         openaitest.Reply{ReasoningField: "reasoning", Reasoning: []string{"Say ", "hello."}, Chunks: []string{"Hello!"}},
			wantText:      "Hello!",
			wantReasoning: "Say hello.",
		},
		{
			name:          "think block in one chunk",
			reply:         openaitest.Text("<think>\nShort thought.\n</think>\n\nThe answer."),
			wantText:      "The answer.",
			wantReasoning: "Short thought.",
		},
		{
			name:          "think tags split across chunks",
			reply:         openaitest.Text("\n<", "thi", "nk>Step one", ", step two.</th", "ink", ">\n", "Done", ": 42"),
			wantText:      "Done: 42",
			wantReasoning: "Step one, step two.",
		},
		{
			name:          "a close tag split one byte at a time",
			reply:         openaitest.Text("<think>a<", "/", "t", "h", "i", "n", "k", ">b"),
			wantText:      "b",
			wantReasoning: "a",
		},
		{
			name:          "unterminated think block",
			reply:         openaitest.Text("<think>I was cut ", "off while thin"),
			wantText:      "",
			wantReasoning: "I was cut off while thin",
		},
		{
			name:          "a lone partial tag at the end is text",
			reply:         openaitest.Text("<th"),
			wantText:      "<th",
			wantReasoning: "",
		},
		{
			name:          "think later in prose is the answer's own text",
			reply:         openaitest.Text("Use <think>", " tags like <think>this</think>."),
			wantText:      "Use <think> tags like <think>this</think>.",
			wantReasoning: "",
		},
		{
			name:          "markup that is not a think tag",
			reply:         openaitest.Text("<b>bold</b> ", "text"),
			wantText:      "<b>bold</b> text",
			wantReasoning: "",
		},
		{
			name:          "a second think block is the answer's",
			reply:         openaitest.Text("<think>one</think>Answer <think>two</think>"),
			wantText:      "Answer <think>two</think>",
			wantReasoning: "one",
		},
	}
	for _, mode := range []string{StreamTrue, StreamFalse} {
		for _, tt := range tests {
			t.Run(mode+"/"+tt.name, func(t *testing.T) {
				p, _ := newFake(t, func(c *agent.ModelConfig) { c.Stream = agent.StreamMode(mode) }, tt.reply)
				var text, reasoning strings.Builder
				req := hello()
				req.OnReasoning = func(s string) { reasoning.WriteString(s) }
				resp, err := p.Complete(context.Background(), req, func(s string) { text.WriteString(s) })
				if err != nil {
					t.Fatalf("Complete: %v", err)
				}
				if resp.Text != tt.wantText {
					t.Errorf("Text = %q, want %q", resp.Text, tt.wantText)
				}
				if resp.Reasoning != tt.wantReasoning {
					t.Errorf("Reasoning = %q, want %q", resp.Reasoning, tt.wantReasoning)
				}
				if text.String() != tt.wantText {
					t.Errorf("streamed text = %q, want %q", text.String(), tt.wantText)
				}
				if got := strings.TrimSpace(reasoning.String()); got != tt.wantReasoning {
					t.Errorf("streamed reasoning = %q, want %q", got, tt.wantReasoning)
				}
			})
		}
	}
}

// TestReasoningStreamsBeforeText checks that reasoning reaches the caller
// as it arrives, before the answer, rather than at the end.
func TestReasoningStreamsBeforeText(t *testing.T) {
	p, _ := newFake(t, nil, openaitest.Text("<think>", "first ", "second", "</think>", "answer"))
	var order []string
	req := hello()
	req.OnReasoning = func(s string) { order = append(order, "r:"+s) }
	if _, err := p.Complete(context.Background(), req, func(s string) { order = append(order, "t:"+s) }); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	want := []string{"r:first ", "r:second", "t:answer"}
	if strings.Join(order, "|") != strings.Join(want, "|") {
		t.Errorf("order = %q, want %q", order, want)
	}
}

// TestReasoningNotSentBack checks that an AI message's reasoning stays out
// of later requests: the fake refuses reasoning_content as DeepSeek does,
// and thinking blocks meant for Anthropic are not sent either.
func TestReasoningNotSentBack(t *testing.T) {
	p, srv := newFake(t, nil,
		openaitest.Reply{Reasoning: []string{"Need a file."}, ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: "ls", Args: `{}`}}},
		openaitest.Text("Done."))
	req := toolRequest()
	first, err := p.Complete(context.Background(), req, nil)
	if err != nil {
		t.Fatalf("first call: %v", err)
	}
	if first.Reasoning != "Need a file." {
		t.Fatalf("Reasoning = %q", first.Reasoning)
	}
	req.Messages = append(req.Messages,
		agent.Message{Type: agent.TypeAI, ToolCalls: first.ToolCalls, Thinking: []agent.ThinkingBlock{{Thinking: "Need a file.", Signature: "sig"}}},
		agent.Message{Type: agent.TypeTool, ToolCallID: "call_1", Name: "ls", Content: "a.txt"})
	if _, err := p.Complete(context.Background(), req, nil); err != nil {
		t.Fatalf("second call: %v", err)
	}
	body := string(srv.Requests()[1].Body)
	for _, leak := range []string{"reasoning", "Need a file", "thinking", "sig"} {
		if strings.Contains(body, leak) {
			t.Errorf("second request carries %q: %s", leak, body)
		}
	}
}

func TestThinkSplitterHoldsOnlyPossibleTags(t *testing.T) {
	var s thinkSplitter
	if text, _ := s.write("  <thi"); text != "" {
		t.Fatalf("a possible opening tag was let through: %q", text)
	}
	text, reasoning := s.write("nk>abc</thi")
	if text != "" || reasoning != "abc" {
		t.Fatalf("write = %q, %q; want the reasoning before the possible close tag", text, reasoning)
	}
	if text, reasoning = s.write("s is not it"); text != "" || reasoning != "</this is not it" {
		t.Fatalf("write = %q, %q; want the held text back as reasoning", text, reasoning)
	}
}
