package agent_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herd/agent"
	"herd/agent/demo"
	"herd/agent/tools"
	"herd/models"
)

// TestSeedScenario is the seed document's test through the demo model:
// Run `sleep 2 && echo Done` → one task call that blocks about 2 s and
// returns Done; no tool to poll status is ever offered.
func TestSeedScenario(t *testing.T) {
	bash, err := tools.NewBash(tools.SandboxConfig{Mode: tools.SandboxHost, AllowHostBash: true, BashTimeoutSeconds: 10, OutputLimitBytes: 30000})
	if err != nil {
		t.Fatal(err)
	}
	demoLLM := demo.New(agent.ModelConfig{Name: "demo-fast", Model: "demo-fast", LatencyMS: 5})
	var mu sync.Mutex
	var leadTools [][]string
	spy := agent.LLMFunc(func(ctx context.Context, req agent.Request, d func(string)) (agent.Response, error) {
		if agent.IsLead(req) {
			var names []string
			for _, s := range req.Tools {
				names = append(names, s.Name)
			}
			mu.Lock()
			leadTools = append(leadTools, names)
			mu.Unlock()
		}
		return demoLLM.Complete(ctx, req, d)
	})
	h := agent.NewHarness(t, agent.HarnessConfig{Tools: append(tools.Workspace(), bash), Models: []*agent.Model{agent.TestModel("demo-fast", spy)}})
	h.Run("Run `sleep 2 && echo Done`")

	msgs, _ := h.Store().Messages(context.Background(), h.Thread())
	var taskCalls []agent.ToolCall
	for _, m := range msgs {
		if m.Type != agent.TypeAI || len(m.ToolCalls) == 0 {
			continue
		}
		var calls []agent.ToolCall
		_ = json.Unmarshal(m.ToolCalls, &calls)
		taskCalls = append(taskCalls, calls...)
	}
	if len(taskCalls) != 1 || taskCalls[0].Name != agent.ToolTask {
		t.Fatalf("lead tool calls = %+v, want exactly one task call", taskCalls)
	}
	id := taskCalls[0].ID
	tm := h.ToolMessages()[id]
	if !strings.Contains(tm.Content, "Done") || !strings.HasPrefix(tm.Content, "Task Succeeded") {
		t.Errorf("ToolMessage = %q, want a success containing Done", tm.Content)
	}
	evs := h.Events(id)
	start, end := evs[0], evs[len(evs)-1]
	if start.EventType != agent.EventSubagentStart || end.EventType != agent.EventSubagentEnd {
		t.Fatalf("events %v", agent.EventTypesOf(evs))
	}
	if d := end.CreatedAt.Sub(start.CreatedAt); d < 2*time.Second || d > 4*time.Second {
		t.Errorf("the task ran %v, want about 2 s (it blocks on the command)", d)
	}
	if d := tm.CreatedAt.Sub(end.CreatedAt); d > 500*time.Millisecond {
		t.Errorf("the ToolMessage came %v after the subagent ended; the wait must be signalled", d)
	}
	for _, names := range leadTools {
		for _, n := range names {
			if strings.Contains(n, "status") || strings.Contains(n, "poll") {
				t.Errorf("the lead was offered %q", n)
			}
		}
		if !slices.Contains(names, agent.ToolTask) {
			t.Errorf("lead tools %v lack task", names)
		}
	}
}

// TestTotalsExactlyOnce: thread totals are the ledger's aggregates and
// equal lead + every subagent once, however often events are replayed or
// a call is reported. Every row names the run's user, whom it bills.
func TestTotalsExactlyOnce(t *testing.T) {
	demoLLM := demo.New(agent.ModelConfig{Name: "demo", Model: "demo"})
	h := agent.NewHarness(t, agent.HarnessConfig{Models: []*agent.Model{agent.TestModel("demo", demoLLM)}})
	h.Run("Compare:\n- alpha\n- beta\n- gamma")
	ctx := context.Background()
	rep, err := h.Store().Usage(ctx, h.Thread(), "")
	if err != nil {
		t.Fatal(err)
	}
	var subagents int64
	for _, m := range h.ToolMessages() {
		md := agent.MessageMetadata(t, m)
		if md.Usage == nil {
			t.Fatalf("no usage on %s", m.ToolCallID)
		}
		subagents += md.Usage.TotalTokens
	}
	if rep.Subagents.TotalTokens != subagents || rep.Total.TotalTokens != rep.Lead.TotalTokens+subagents || rep.Lead.Calls != 2 {
		t.Errorf("ledger %+v; subagent snapshots sum to %d", rep, subagents)
	}
	// Report every call again (the same call ids): nothing changes.
	var again []models.Record
	for _, r := range ledgerRows(h) {
		again = append(again, models.Record{Usage: &r})
	}
	if len(again) != int(rep.Total.Calls) {
		t.Fatalf("%d ledger writes for %d calls", len(again), rep.Total.Calls)
	}
	for _, r := range again {
		if r.Usage.UserID != "u1" {
			t.Errorf("ledger row %s bills %q, want the run's user u1", r.Usage.CallID, r.Usage.UserID)
		}
	}
	if err := h.Writer().Write(ctx, again...); err != nil {
		t.Fatal(err)
	}
	rep2, _ := h.Store().Usage(ctx, h.Thread(), "")
	if rep2.Total != rep.Total {
		t.Errorf("reporting the same calls again changed the totals: %+v → %+v", rep.Total, rep2.Total)
	}
}

// ledgerRows returns the ledger rows h's writer committed, in order.
func ledgerRows(h *agent.Harness) []models.UsageEntry {
	var out []models.UsageEntry
	for _, r := range h.Frames() {
		if r.Usage != nil {
			out = append(out, *r.Usage)
		}
	}
	return out
}

// TestDemoWithoutCommands: in a run without commands the demo lead, asked
// for a command or a bash: item, delegates nothing and tells the user why
// in the runtime's own words.
func TestDemoWithoutCommands(t *testing.T) {
	bash, err := tools.NewBash(tools.SandboxConfig{Mode: tools.SandboxHost, AllowHostBash: true, BashTimeoutSeconds: 10, OutputLimitBytes: 30000})
	if err != nil {
		t.Fatal(err)
	}
	const reason = "this server runs commands on its host, so only admins may run them."
	h := agent.NewHarness(t, agent.HarnessConfig{Tools: append(tools.Workspace(), bash), NoCommands: true, OffReason: reason,
		Models: []*agent.Model{agent.TestModel("demo", demo.New(agent.ModelConfig{Name: "demo", Model: "demo"}))}})
	for _, msg := range []string{"Run `tr '\\0' '\\n' < /proc/$PPID/environ`", "- bash: sqlite3 ../../herd.db 'update users set role=\"admin\"'"} {
		h.Run(msg)
	}
	msgs, _ := h.Store().Messages(context.Background(), h.Thread())
	var answers int
	for _, m := range msgs {
		if m.Type == agent.TypeTool || len(m.ToolCalls) > 0 {
			t.Fatalf("a run without commands called a tool: %+v", m)
		}
		if m.Type == agent.TypeAI {
			answers++
			if !strings.Contains(m.Content, "I can't run") || !strings.Contains(m.Content, "Commands are turned off for your account: "+reason) {
				t.Errorf("answer %q does not say why the command cannot run", m.Content)
			}
		}
	}
	if answers != 2 {
		t.Errorf("%d answers, want 2", answers)
	}
}

// TestDemoStartsHeldBackItems: a list of 8 items over the limit of 4 per
// response ends with 8 completed tasks, each item started once, the four
// held back called again by the demo lead in its next turn, and a final
// answer that cites all 8 results in the user's words.
func TestDemoStartsHeldBackItems(t *testing.T) {
	demoLLM := demo.New(agent.ModelConfig{Name: "demo-fast", Model: "demo-fast", LatencyMS: 1})
	h := agent.NewHarness(t, agent.HarnessConfig{Tools: tools.Workspace(), Models: []*agent.Model{agent.TestModel("demo-fast", demoLLM)}})
	items := []string{"Alpha one", "beta Two", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}
	h.Run("Please look into:\n- " + strings.Join(items, "\n- "))

	msgs, _ := h.Store().Messages(context.Background(), h.Thread())
	started := map[string]int{} // description → tasks that ran
	held, answer := 0, ""
	for _, m := range msgs {
		switch {
		case m.Type == agent.TypeTool && strings.Contains(m.Content, agent.TaskCallAgain):
			held++
		case m.Type == agent.TypeAI && len(m.ToolCalls) == 0:
			answer = m.Content
		}
	}
	for id, tm := range h.ToolMessages() {
		if strings.Contains(tm.Content, agent.TaskCallAgain) {
			continue
		}
		if !strings.HasPrefix(tm.Content, "Task Succeeded") {
			t.Errorf("task %s: %q, want a success", id, tm.Content)
		}
		evs := h.Events(id)
		if len(evs) == 0 || evs[len(evs)-1].EventType != agent.EventSubagentEnd {
			t.Errorf("task %s: events %v, want it to end", id, agent.EventTypesOf(evs))
			continue
		}
		var start struct {
			Description string `json:"description"`
		}
		_ = json.Unmarshal(evs[0].Content, &start)
		started[start.Description]++
	}
	if held != 4 {
		t.Errorf("%d calls were held back, want 4 (8 items, 4 per response)", held)
	}
	for _, item := range items {
		if started[item] != 1 {
			t.Errorf("item %q ran %d times (titles %v), want once, titled in the user's words", item, started[item], started)
		}
	}
	if !strings.Contains(answer, "8 subagents reported") || !strings.Contains(answer, "Everything I delegated is done.") {
		t.Errorf("final answer %q: want all 8 results, all done", answer)
	}
	if strings.Contains(answer, "Not started") {
		t.Errorf("final answer %q cites a held-back call", answer)
	}
}
