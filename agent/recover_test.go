package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"herd/agent/tools"
	"herd/models"
)

// TestCrashRecoveryReusedCallID: providers reuse tool-call ids across runs
// (call_0). An answered call_0 of an earlier run must not hide the
// unanswered call_0 of the interrupted run: recovery gives it its result.
func TestCrashRecoveryReusedCallID(t *testing.T) {
	h := newHarness(t, harnessConfig{models: []*Model{model("m", llmFunc(func(context.Context, Request, func(string)) (Response, error) {
		return reply("x", nil), nil
	}))}})
	ctx := context.Background()
	calls, _ := json.Marshal([]ToolCall{{ID: "call_0", Name: tools.Ls, Args: []byte(`{}`)}})
	done, open := uuid.NewString(), uuid.NewString()
	ended := time.Now()
	msg := func(runID, typ, content string) models.Record {
		m := &models.Message{ID: uuid.NewString(), ThreadID: h.thread, RunID: runID, Type: typ, Content: content}
		switch typ {
		case TypeAI:
			m.ToolCalls = models.JSON(calls)
		case TypeTool:
			m.ToolCallID, m.Name = "call_0", tools.Ls
		}
		return models.Record{Message: m}
	}
	err := h.writer.Write(ctx,
		models.Record{Run: &models.Run{ID: done, ThreadID: h.thread, UserID: "u1", Status: models.RunCompleted, ModelName: "m", StartedAt: ended, EndedAt: &ended}},
		msg(done, TypeHuman, "first"), msg(done, TypeAI, ""), msg(done, TypeTool, "a.txt"), msg(done, TypeAI, "done"),
		models.Record{Run: &models.Run{ID: open, ThreadID: h.thread, UserID: "u1", Status: models.RunRunning, ModelName: "m", StartedAt: ended}},
		msg(open, TypeHuman, "second"), msg(open, TypeAI, ""),
	)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := h.rt.Recover(ctx, h.store); err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v; want 1 run closed", n, err)
	}
	var results []models.Message
	for _, m := range mustMessages(t, h) {
		if m.Type == TypeTool && m.RunID == open {
			results = append(results, m)
		}
	}
	if len(results) != 1 || results[0].ToolCallID != "call_0" || !strings.Contains(results[0].Content, interruptedByRestart) {
		t.Fatalf("results of the interrupted run = %+v, want one interrupted result for call_0", results)
	}
}
