package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herd/agent"
	"herd/agent/demo"
	"herd/models"
)

// demoHarness runs the demo model, with vision or without, instantly.
func demoHarness(t *testing.T, vision bool) *agent.Harness {
	cfg := agent.ModelConfig{Name: "demo-fast", Provider: "demo", Model: "demo-fast", Vision: vision}
	return agent.NewHarness(t, agent.HarnessConfig{Models: []*agent.Model{{Config: cfg, Provider: demo.New(cfg)}}})
}

// answerOf is the run's AI messages' text, and the task calls of the run.
func answerOf(t *testing.T, h *agent.Harness, runID string) (string, []agent.ToolCall) {
	t.Helper()
	msgs, err := h.Store().Messages(context.Background(), h.Thread())
	if err != nil {
		t.Fatal(err)
	}
	answer := ""
	var calls []agent.ToolCall
	for _, m := range msgs {
		if m.RunID != runID || m.Type != agent.TypeAI {
			continue
		}
		answer += m.Content + "\n"
		var cs []agent.ToolCall
		_ = json.Unmarshal(m.ToolCalls, &cs)
		calls = append(calls, cs...)
	}
	return answer, calls
}

// TestDemoReadsTheAttachedFile: "summarise the attached file" makes the
// demo lead delegate a read of each attached file that is not an image it
// was shown, to a subagent whose prompt names the path; the subagent
// reads it with read_file, writes its summary (size, lines, first lines)
// to summaries/report.md and says so, and the answer carries that summary and says what the image it was
// shown is.
func TestDemoReadsTheAttachedFile(t *testing.T) {
	h := demoHarness(t, true)
	put(t, filepath.Join(h.Workspace(), "uploads", "report.csv"), []byte("name,qty\napples,3\npears,5\nplums,7\n"))
	put(t, filepath.Join(h.Workspace(), "uploads", "cat.png"), encodedPicture(t, 1200, 800, false))
	st := h.StartAttached("Summarise the attached file", "uploads/report.csv", "uploads/cat.png")
	h.Wait()
	if r := h.RunRow(st.RunID); r.Status != models.RunCompleted {
		t.Fatalf("run %s %q, want completed", r.Status, r.Error)
	}
	answer, calls := answerOf(t, h, st.RunID)
	if len(calls) != 1 || calls[0].Name != agent.ToolTask || !strings.Contains(string(calls[0].Args), "uploads/report.csv") {
		t.Fatalf("task calls %+v, want one read of uploads/report.csv", calls)
	}
	var read bool
	for _, e := range h.Events(calls[0].ID) {
		read = read || e.EventType == agent.EventSubagentStep && strings.Contains(string(e.Content), `read_file`) && strings.Contains(string(e.Content), "uploads/report.csv")
	}
	if !read {
		t.Errorf("the card shows no read_file of uploads/report.csv")
	}
	if b, err := os.ReadFile(filepath.Join(h.Workspace(), "summaries", "report.md")); err != nil || !strings.Contains(string(b), "> apples,3\n") {
		t.Errorf("summaries/report.md: %q, %v", b, err)
	}
	summary := "uploads/report.csv is 34 bytes of text/plain in 4 lines; it begins: “name,qty” / “apples,3” / “pears,5”."
	if tm := h.ToolMessages()[calls[0].ID]; !strings.Contains(tm.Content, summary) {
		t.Errorf("the subagent's result %q lacks %q", tm.Content, summary)
	}
	for _, want := range []string{summary, "Wrote `summaries/report.md`.", "uploads/cat.png: a 1200×800 PNG image"} {
		if !strings.Contains(answer, want) {
			t.Errorf("the answer lacks %q:\n%s", want, answer)
		}
	}
}

// TestDemoDescribesWhatItSees: a demo model with vision describes each
// image it is shown, whatever the message; one without says it cannot see
// the image, and reads nothing.
func TestDemoDescribesWhatItSees(t *testing.T) {
	for _, tt := range []struct {
		vision      bool
		text, wants string
	}{
		{true, "what is this?", "I see the attached images:\n\n- uploads/cat.png: a 1200×800 PNG image\n\n"},
		{false, "Describe the attached image", "uploads/cat.png: an image; this model cannot see images"},
	} {
		h := demoHarness(t, tt.vision)
		put(t, filepath.Join(h.Workspace(), "uploads", "cat.png"), encodedPicture(t, 1200, 800, false))
		st := h.StartAttached(tt.text, "uploads/cat.png")
		h.Wait()
		answer, calls := answerOf(t, h, st.RunID)
		if !strings.Contains(answer, tt.wants) || len(calls) != 0 {
			t.Errorf("vision %v, %q: answer %q with %d calls, want %q and none", tt.vision, tt.text, answer, len(calls), tt.wants)
		}
	}
}
