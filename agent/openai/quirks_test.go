package openai

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"herd/agent"
	"herd/agent/openai/openaitest"
)

// TestServerQuirks runs each quirk of real OpenAI-compatible servers
// (issue 11, point 9) through the fake, streamed.
func TestServerQuirks(t *testing.T) {
	usage := &openaitest.Usage{PromptTokens: 40, CompletionTokens: 9, TotalTokens: 49}
	wantUsage := &agent.Usage{InputTokens: 40, OutputTokens: 9, TotalTokens: 49}
	calls := []openaitest.ToolCall{
		{ID: "call_a", Name: "ls", Args: `{"path":"docs"}`},
		{ID: "call_b", Name: "read_file", Args: `{"path":"README.md"}`},
	}
	wantCalls := []agent.ToolCall{
		{ID: "call_a", Name: "ls", Args: json.RawMessage(`{"path":"docs"}`)},
		{ID: "call_b", Name: "read_file", Args: json.RawMessage(`{"path":"README.md"}`)},
	}
	tests := []struct {
		name      string
		reply     openaitest.Reply
		wantText  string
		wantCalls []agent.ToolCall
		wantUsage *agent.Usage
		wantErr   string
	}{
		{
			// The id and name come only in each call's first chunk (the
			// fake always does this); the index is missing from every one.
			name:      "tool-call deltas without an index, id only in the first chunk",
			reply:     openaitest.Reply{ToolCalls: calls, NoToolIndex: true, Usage: usage},
			wantCalls: wantCalls,
			wantUsage: wantUsage,
		},
		{
			name:      "arguments in one chunk",
			reply:     openaitest.Reply{ToolCalls: calls, WholeArgs: true},
			wantCalls: wantCalls,
		},
		{
			name:      "arguments in one chunk without an index",
			reply:     openaitest.Reply{ToolCalls: calls, WholeArgs: true, NoToolIndex: true},
			wantCalls: wantCalls,
		},
		{
			name:      "finish_reason missing",
			reply:     openaitest.Reply{Chunks: []string{"no ", "reason"}, NoFinishReason: true, Usage: usage},
			wantText:  "no reason",
			wantUsage: wantUsage,
		},
		{
			name:      "finish_reason missing on tool calls",
			reply:     openaitest.Reply{ToolCalls: calls, NoFinishReason: true},
			wantCalls: wantCalls,
		},
		{
			name:     `finish_reason "tool_calls" with no calls`,
			reply:    openaitest.Reply{Chunks: []string{"just text"}, FinishReason: "tool_calls"},
			wantText: "just text",
		},
		{
			name:      "usage only in the last chunk",
			reply:     openaitest.Reply{Chunks: []string{"a", "b"}, Usage: usage},
			wantText:  "ab",
			wantUsage: wantUsage,
		},
		{
			name:      "usage in every chunk",
			reply:     openaitest.Reply{Chunks: []string{"a", "b"}, Usage: usage, UsageEveryChunk: true},
			wantText:  "ab",
			wantUsage: wantUsage,
		},
		{
			name:    "an error event inside a 200 stream",
			reply:   openaitest.Reply{Chunks: []string{"a", "b"}, End: openaitest.EndError, After: 2, Error: "upstream model crashed"},
			wantErr: "error event in stream after 2 chunks: upstream model crashed",
		},
		{
			name:      "a stream that ends without [DONE]",
			reply:     openaitest.Reply{Chunks: []string{"no ", "done"}, Usage: usage, End: openaitest.EndNoDone},
			wantText:  "no done",
			wantUsage: wantUsage,
		},
		{
			name:      "tool calls in a stream that ends without [DONE]",
			reply:     openaitest.Reply{ToolCalls: calls, InterleaveToolCalls: true, End: openaitest.EndNoDone},
			wantCalls: wantCalls,
		},
		{
			name:    "neither [DONE] nor a finish_reason: cut short",
			reply:   openaitest.Reply{Chunks: []string{"no ", "done"}, NoFinishReason: true, End: openaitest.EndNoDone},
			wantErr: "stream cut short: the connection closed before [DONE] and without a finish_reason, after 4 chunks",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := newFake(t, nil, tt.reply)
			got, err := p.Complete(context.Background(), toolRequest(), nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if got.Text != tt.wantText {
				t.Errorf("Text = %q, want %q", got.Text, tt.wantText)
			}
			if !reflect.DeepEqual(got.ToolCalls, tt.wantCalls) {
				t.Errorf("ToolCalls = %s, want %s", mustMarshal(t, got.ToolCalls), mustMarshal(t, tt.wantCalls))
			}
			if !reflect.DeepEqual(got.Usage, tt.wantUsage) {
				t.Errorf("Usage = %+v, want %+v", got.Usage, tt.wantUsage)
			}
		})
	}
}

// TestPlainQuirks: the same replies answered without streaming.
func TestPlainQuirks(t *testing.T) {
	p, _ := newFake(t, func(c *agent.ModelConfig) { c.Stream = StreamFalse },
		openaitest.Reply{ToolCalls: []openaitest.ToolCall{{Name: "ls", Args: `{"path":"."}`}}},
		openaitest.Reply{Chunks: []string{"text only"}, FinishReason: "tool_calls"},
	)
	got, err := p.Complete(context.Background(), toolRequest(), nil)
	if err != nil || len(got.ToolCalls) != 1 || got.ToolCalls[0].Name != "ls" || got.ToolCalls[0].ID == "" || got.Text != "" {
		t.Fatalf("got %+v, %v", got, err)
	}
	got, err = p.Complete(context.Background(), toolRequest(), nil)
	if err != nil || got.Text != "text only" || got.ToolCalls != nil {
		t.Fatalf("got %+v, %v", got, err)
	}
}
