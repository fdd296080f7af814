package hub

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"herd/agent"
	"herd/models"
	"herd/server/render"
)

// TestOneRedaction: the live frame of every event type and its content in
// the events API hide the same figures, the keys redact.go names and
// nothing else, and only a payload with figures builds a redacted frame;
// a message's live frame hides what its API and export form hide. The
// surfaces end to end are TestTokenGate's.
func TestOneRedaction(t *testing.T) {
	md := render.NewMarkdown()
	usage := &agent.TokenUsage{InputTokens: 10, OutputTokens: 2, TotalTokens: 12}
	ref := agent.TaskRef{TaskID: "call_1", ExecutionID: "e1", RunID: "r1", Version: 2}
	intro := agent.TaskIntro{TaskRef: ref, Description: "d", Prompt: "p", SubagentType: "general"}
	events := []agent.Event{
		agent.RunStart{RunID: "r1", ModelName: "m"},
		agent.RunWait{RunID: "r1", Waiting: true},
		agent.RunResumed{RunID: "r1", Resumes: 1, LostMS: 4200, Cause: agent.ResumeRestart},
		agent.RunEnd{RunID: "r1", Status: "completed", Usage: &models.UsageReport{Total: models.UsageTotals{TotalTokens: 12, Calls: 1}}},
		agent.TaskQueued{TaskIntro: intro},
		agent.TaskStarted{TaskIntro: intro},
		agent.TaskWait{TaskRef: ref, Waiting: true},
		agent.TaskStep{TaskRef: ref, StepBody: agent.StepBody{Kind: "ai", Text: "**hi**"}, Usage: usage},
		agent.TaskEnd{TaskRef: ref, Status: agent.StatusCompleted, Result: "done", Usage: usage},
		agent.WorkspaceChanged{RunID: "r1", Changes: []agent.FileChange{{Path: "notes/a.md", Size: 12, TaskID: "call_1"}}},
	}
	seen := map[string]bool{}
	for i, ev := range events {
		seen[ev.EventType()] = true
		content, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		e := &models.RunEvent{Seq: int64(i + 1), ThreadID: "th", RunID: "r1", EventType: ev.EventType(), Content: content, CreatedAt: time.Now()}
		f, err := eventFrame(models.Record{Event: e, Payload: ev}, md)
		if err != nil {
			t.Fatal(err)
		}
		wantGone := []string{}
		if eventHasFigures(ev) {
			wantGone = []string{usageKey}
		}
		if got := gone(t, frameData(t, f.wire(true)), frameData(t, f.wire(false))); !slices.Equal(got, wantGone) {
			t.Errorf("%s frame: redaction left out %v, want %v", e.EventType, got, wantGone)
		}
		if (f.redact != nil) != eventHasFigures(ev) {
			t.Errorf("%s frame: redacted variant built = %v, want %v", e.EventType, f.redact != nil, eventHasFigures(ev))
		}
		shown, _ := agent.DecodeContent(content)
		hidden, _ := agent.DecodeContent(content)
		Redaction{}.EventContent(shown)
		Redaction{Hide: true}.EventContent(hidden)
		if got := gone(t, shown, hidden); !slices.Equal(got, wantGone) {
			t.Errorf("%s in the events API: redaction left out %v, want %v", e.EventType, got, wantGone)
		}
	}
	for _, typ := range agent.EventTypes() {
		if !seen[typ] {
			t.Errorf("event type %s is not in this test: does it carry figures?", typ)
		}
	}

	m := &models.Message{Seq: 9, ThreadID: "th", RunID: "r1", Type: agent.TypeTool, Name: agent.ToolTask,
		Usage: models.JSON(`{"total_tokens":12}`), AdditionalKwargs: models.JSON(`{"subagent_token_usage":{"total_tokens":12},"status":"completed"}`)}
	f, err := (&Hub{md: md}).recordFrame(models.Record{Message: m})
	if err != nil {
		t.Fatal(err)
	}
	api, err := json.Marshal(Redaction{Hide: true}.Message(m, ""))
	if err != nil {
		t.Fatal(err)
	}
	for where, b := range map[string][]byte{"frame": frameRaw(t, f.wire(false)), "API and export": api} {
		var got struct {
			Usage  json.RawMessage            `json:"usage"`
			Kwargs map[string]json.RawMessage `json:"additional_kwargs"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if string(got.Usage) != "null" || got.Kwargs[subagentUsageKey] != nil || got.Kwargs["status"] == nil {
			t.Errorf("message %s redacted: usage %s, kwargs %v", where, got.Usage, got.Kwargs)
		}
	}
}

// frameRaw is the data of a wire frame as encoded.
func frameRaw(t *testing.T, wire []byte) []byte {
	t.Helper()
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(payloadOf(&frame{full: wire}), &env); err != nil {
		t.Fatalf("frame %s: %v", wire, err)
	}
	return env.Data
}

// frameData is the data object of a wire frame.
func frameData(t *testing.T, wire []byte) map[string]any {
	t.Helper()
	var data map[string]any
	if err := json.Unmarshal(frameRaw(t, wire), &data); err != nil {
		t.Fatal(err)
	}
	return data
}

// gone lists the keys of full that redacted lacks, after checking that
// every key redacted keeps is unchanged.
func gone(t *testing.T, full, redacted map[string]any) []string {
	t.Helper()
	var out []string
	for _, k := range slices.Sorted(maps.Keys(full)) {
		v, ok := redacted[k]
		if !ok {
			out = append(out, k)
			continue
		}
		a, _ := json.Marshal(full[k])
		b, _ := json.Marshal(v)
		if string(a) != string(b) {
			t.Errorf("redaction changed %s: %s to %s", k, a, b)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}
