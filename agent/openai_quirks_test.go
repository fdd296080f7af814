package agent_test

import (
	"context"
	"testing"

	"herd/agent"
	"herd/agent/openai/openaitest"
	"herd/models"
)

// TestDelegationThroughQuirks: a lead delegates through a streaming server
// with the quirks of real ones at once (issue 11, point 9): tool-call
// deltas without an index and their arguments in one chunk, usage on every
// chunk, no finish_reason, finish_reason "tool_calls" without calls,
// streams that end without [DONE]. The card completes, the answer
// arrives, and each call's tokens are counted exactly once, however many
// chunks reported them.
func TestDelegationThroughQuirks(t *testing.T) {
	usage := &openaitest.Usage{PromptTokens: 100, CompletionTokens: 10, TotalTokens: 110}
	srv := openaitest.NewServer(t)
	srv.SetFallback(func(req openaitest.ChatRequest) openaitest.Reply {
		lead := false
		for _, tool := range req.Tools {
			lead = lead || tool.Function.Name == agent.ToolTask
		}
		last := req.Messages[len(req.Messages)-1]
		switch {
		case lead && last.Role == "tool":
			// usage only in its own last chunk, no [DONE]
			return openaitest.Reply{Chunks: []string{"The subagent ", "found it."}, Usage: usage, End: openaitest.EndNoDone}
		case lead:
			return openaitest.Reply{Chunks: []string{"Delegating."}, Usage: usage, UsageEveryChunk: true, NoToolIndex: true, WholeArgs: true,
				NoFinishReason: true, ToolCalls: []openaitest.ToolCall{{ID: "call_1", Name: agent.ToolTask,
					Args: `{"description":"look","prompt":"look around","subagent_type":"general-purpose"}`}}}
		default:
			return openaitest.Reply{Chunks: []string{"Looked ", "around: ", "all fine."}, Usage: usage, UsageEveryChunk: true, FinishReason: "tool_calls"}
		}
	})
	h := agent.NewHarness(t, agent.HarnessConfig{Models: []*agent.Model{modeModel(t, srv, "true")}})
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
	tm := h.ToolMessages()["call_1"]
	md := agent.MessageMetadata(t, tm)
	if md.Status != agent.StatusCompleted || md.Usage == nil || md.Usage.TotalTokens != 110 {
		t.Errorf("card %+v (usage %+v), want completed with the subagent's 110 tokens", md, md.Usage)
	}
	if want := "Task Succeeded. Result: Looked around: all fine."; tm.Content != want {
		t.Errorf("ToolMessage %q, want %q", tm.Content, want)
	}
	u, err := h.Store().Usage(context.Background(), h.Thread(), st.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if u.Total.TotalTokens != 330 || u.Total.Calls != 3 || u.Total.UnreportedCalls != 0 || u.Subagents.TotalTokens != 110 {
		t.Errorf("usage %+v, want 3 calls of 110 tokens each counted once, one a subagent's", u.Total)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
}
