package agent

import (
	"encoding/json"
	"fmt"
	"testing"

	"herd/models"
)

// cardFixture builds the messages and events of one run with one task call.
type cardFixture struct {
	msgs   []models.Message
	events []models.RunEvent
	seq    int64
}

func (f *cardFixture) call(runID, taskID, desc string) {
	args, _ := json.Marshal(map[string]string{"description": desc, "prompt": "do it", "subagent_type": "general-purpose", "acceptance_criteria": "be right"})
	f.seq++
	f.msgs = append(f.msgs, models.Message{ID: fmt.Sprint(f.seq), Seq: f.seq, RunID: runID, Type: TypeAI,
		ToolCalls: models.MustJSON([]ToolCall{{ID: taskID, Name: ToolTask, Args: args}})})
}

func (f *cardFixture) event(runID, taskID, typ string, c map[string]any) {
	f.seq++
	c["task_id"], c["execution_id"], c["run_id"] = taskID, "e-"+taskID, runID
	b, _ := json.Marshal(c)
	f.events = append(f.events, models.RunEvent{Seq: f.seq, RunID: runID, TaskID: taskID, EventType: typ, Category: categorySubagent, Content: models.JSON(b)})
}

func (f *cardFixture) result(runID, taskID, content string, kwargs any) {
	f.seq++
	m := models.Message{ID: fmt.Sprint(f.seq), Seq: f.seq, RunID: runID, Type: TypeTool, Name: ToolTask, ToolCallID: taskID, Content: content}
	switch k := kwargs.(type) {
	case string:
		m.AdditionalKwargs = models.JSON(k)
	case nil:
	default:
		m.AdditionalKwargs = models.MustJSON(k)
	}
	f.msgs = append(f.msgs, m)
}

func usageMap(total int) map[string]any {
	return map[string]any{"input_tokens": total - 1, "output_tokens": 1, "total_tokens": total}
}

func TestProjectCards(t *testing.T) {
	start := func(v int) map[string]any {
		return map[string]any{"version": v, "description": "d", "prompt": "p", "subagent_type": "general-purpose", "model_name": "demo-deep"}
	}
	step := func(v, idx, total int, tool string) map[string]any {
		m := map[string]any{"version": v, "message_index": idx, "kind": "tool", "text": "x", "truncated": false, "tool_name": tool, "model_name": "demo-deep"}
		if total > 0 {
			m["usage"] = usageMap(total)
		}
		return m
	}
	outcome := func(o Outcome) (string, map[string]any) {
		c, kw, err := o.ToolMessage()
		if err != nil {
			t.Fatal(err)
		}
		return c, kw
	}
	type want struct {
		status, activity, model, stop, result, err string
		total                                      int64 // -1: no usage
		version                                    int64
	}
	cases := []struct {
		name   string
		active bool
		build  func(f *cardFixture)
		want   want
	}{
		{"queued before start", true, func(f *cardFixture) {}, want{status: "queued", total: -1}},
		{"queued by admission", true, func(f *cardFixture) { f.event("r", "t", eventSubagentQueued, start(1)) },
			want{status: "queued", model: "demo-deep", total: -1, version: 1}},
		{"running with usage and activity", true, func(f *cardFixture) {
			f.event("r", "t", eventSubagentStart, start(1))
			f.event("r", "t", eventSubagentStep, step(2, 1, 30, "write_file"))
		}, want{status: "running", activity: "Thinking", model: "demo-deep", total: 30, version: 2}},
		{"usage never decreases", true, func(f *cardFixture) {
			f.event("r", "t", eventSubagentStart, start(1))
			f.event("r", "t", eventSubagentStep, step(3, 2, 50, "ls"))
			f.event("r", "t", eventSubagentStep, step(2, 1, 20, "ls"))
		}, want{status: "running", activity: "Thinking", model: "demo-deep", total: 50, version: 3}},
		{"end without ToolMessage yet", true, func(f *cardFixture) {
			f.event("r", "t", eventSubagentStart, start(1))
			f.event("r", "t", eventSubagentEnd, map[string]any{"version": 2, "status": "completed", "result": "R", "usage": usageMap(40), "model_name": "demo-deep"})
		}, want{status: "completed", model: "demo-deep", result: "R", total: 40, version: 2}},
		{"run ended without a ToolMessage", false, func(f *cardFixture) {
			f.event("r", "t", eventSubagentStart, start(1))
			f.event("r", "t", eventSubagentStep, step(2, 1, 30, "ls"))
		}, want{status: "failed", model: "demo-deep", err: noResult, total: 30, version: 2}},
	}
	for _, o := range []Outcome{
		{Status: StatusCompleted, Result: "the **result**", ModelName: "demo-deep", Usage: &TokenUsage{9, 1, 10}},
		{Status: StatusCompleted, StopReason: stopTokenCapped, Result: "partial", ModelName: "demo-deep", Usage: &TokenUsage{9, 1, 10}},
		{Status: StatusFailed, Error: "boom", ModelName: "demo-deep"},
		{Status: StatusFailed, StopReason: stopTurnCapped, Error: "out of turns", ModelName: "demo-deep", Usage: &TokenUsage{9, 1, 10}},
		{Status: StatusCancelled, ModelName: "demo-deep", Usage: &TokenUsage{9, 1, 10}},
		{Status: StatusTimedOut, Error: "Execution timed out after 5 seconds", ModelName: "demo-deep"},
		{Status: StatusPollingTimedOut, Error: "Task polling timed out: no terminal state", ModelName: "demo-deep"},
	} {
		o := o
		w := want{status: o.Status, model: "demo-deep", stop: o.StopReason, result: o.Result, err: o.Error, total: -1, version: 1}
		if o.Usage != nil {
			w.total = o.Usage.TotalTokens
		}
		if o.Status == StatusPollingTimedOut {
			w.err = o.Error
		}
		cases = append(cases, struct {
			name   string
			active bool
			build  func(f *cardFixture)
			want   want
		}{"terminal " + o.Status + " " + o.StopReason, false, func(f *cardFixture) {
			f.event("r", "t", eventSubagentStart, start(1))
			c, kw := outcome(o)
			f.result("r", "t", c, kw)
		}, w})
	}
	cases = append(cases,
		struct {
			name   string
			active bool
			build  func(f *cardFixture)
			want   want
		}{"legacy max_turns_reached with brief", false, func(f *cardFixture) {
			f.result("r", "t", "Task Succeeded. Result: partial", `{"subagent_status":"max_turns_reached","subagent_result_brief":"partial"}`)
		}, want{status: "completed", stop: stopTurnCapped, result: "partial", total: -1}},
		struct {
			name   string
			active bool
			build  func(f *cardFixture)
			want   want
		}{"unknown status falls back to the content", false, func(f *cardFixture) {
			f.result("r", "t", "Task failed. Error: old failure", `{"subagent_status":"exploded"}`)
		}, want{status: "failed", err: "old failure", total: -1}},
		struct {
			name   string
			active bool
			build  func(f *cardFixture)
			want   want
		}{"malformed metadata and usage", false, func(f *cardFixture) {
			f.result("r", "t", "Task cancelled by user.", `{"subagent_status":"cancelled","subagent_token_usage":{"input_tokens":1.5,"output_tokens":1,"total_tokens":2},"subagent_model_name":7}`)
		}, want{status: "cancelled", total: -1}},
		struct {
			name   string
			active bool
			build  func(f *cardFixture)
			want   want
		}{"legacy text with no metadata", false, func(f *cardFixture) {
			f.result("r", "t", "[Subagent: bash]\n\nDone", nil)
		}, want{status: "completed", result: "[Subagent: bash]\n\nDone", total: -1}},
		struct {
			name   string
			active bool
			build  func(f *cardFixture)
			want   want
		}{"kwargs not JSON", false, func(f *cardFixture) {
			f.result("r", "t", "Task timed out.", `{not json`)
		}, want{status: "timed_out", total: -1}},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &cardFixture{}
			f.call("r", "t", "Check things")
			c.build(f)
			active := ""
			if c.active {
				active = "r"
			}
			cards := ProjectCards(CardSource{Messages: f.msgs, Events: f.events, ActiveRunID: active})
			if len(cards) != 1 {
				t.Fatalf("%d cards", len(cards))
			}
			got := cards[0]
			total := int64(-1)
			if got.Usage != nil {
				total = got.Usage.TotalTokens
			}
			g := want{got.Status, got.Activity, got.ModelName, got.StopReason, got.Result, got.Error, total, got.Version}
			if g != c.want {
				t.Errorf("got  %+v\nwant %+v", g, c.want)
			}
			if got.Description != "Check things" || got.Prompt != "do it\n\nAcceptance criteria:\nbe right" || got.SubagentType != "general-purpose" {
				t.Errorf("card head %q %q %q", got.Description, got.Prompt, got.SubagentType)
			}
		})
	}
}

// TestProjectCardsRepeatedIDs: the same tool-call id in two runs makes two
// independent cards.
func TestProjectCardsRepeatedIDs(t *testing.T) {
	f := &cardFixture{}
	f.call("r1", "call_0", "first")
	c, kw, _ := Outcome{Status: StatusCompleted, Result: "one"}.ToolMessage()
	f.result("r1", "call_0", c, kw)
	f.call("r2", "call_0", "second")
	f.event("r2", "call_0", eventSubagentStart, map[string]any{"version": 1, "description": "d", "prompt": "p", "subagent_type": "general-purpose"})
	cards := ProjectCards(CardSource{Messages: f.msgs, Events: f.events, ActiveRunID: "r2"})
	if len(cards) != 2 || cards[0].Status != StatusCompleted || cards[0].Result != "one" || cards[1].Status != StatusRunning {
		t.Errorf("cards = %+v", cards)
	}
}
