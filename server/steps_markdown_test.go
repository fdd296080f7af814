package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"herd/agent"
	"herd/models"
	"herd/server/render/rendertest"
)

// Step texts of the seeded card: an AI step in Markdown with hostile
// markup, and a tool's output that looks like Markdown and HTML but is
// text.
const (
	stepMarkdown = "I will **list** the files:\n\n- `notes.txt`\n\n```go\nfunc main() {}\n```\n\n<img src=x onerror=\"window.__pwned = 1\"> [x](javascript:window.__pwned=2)"
	stepOutput   = "<b>not bold</b> **not strong**\n<img src=x onerror=\"window.__pwned = 3\">"
)

// seedStepsCard writes a finished run with one task whose steps are an AI
// step (stepMarkdown) and a tool step (stepOutput).
func (a *testApp) seedStepsCard(threadID, userID string) {
	a.t.Helper()
	runID, task := uuid.NewString(), "call_md"
	args, _ := json.Marshal(map[string]string{"description": "List files", "prompt": "List the files.", "subagent_type": agent.SubagentGeneral})
	now := time.Now()
	ev := func(typ string, c map[string]any) models.Record {
		c["task_id"], c["execution_id"], c["run_id"] = task, "e-"+task, runID
		b, _ := json.Marshal(c)
		return models.Record{Event: &models.RunEvent{ThreadID: threadID, RunID: runID, TaskID: task, EventType: typ, Category: "subagent", Content: models.JSON(b)}}
	}
	content, kw, _ := agent.Outcome{Status: agent.StatusCompleted, Result: "Found notes.txt.", ModelName: "demo-fast"}.ToolMessage()
	recs := []models.Record{
		{Run: &models.Run{ID: runID, ThreadID: threadID, UserID: userID, Status: models.RunCompleted, ModelName: "demo-fast", StartedAt: now, EndedAt: &now}},
		{Message: &models.Message{ID: uuid.NewString(), ThreadID: threadID, RunID: runID, Type: "human", Content: "go"}},
		{Message: &models.Message{ID: uuid.NewString(), ThreadID: threadID, RunID: runID, Type: "ai", ToolCalls: models.MustJSON([]agent.ToolCall{{ID: task, Name: agent.ToolTask, Args: args}})}},
		ev("subagent.start", map[string]any{"version": 1, "description": "List files", "prompt": "List the files.", "subagent_type": agent.SubagentGeneral, "model_name": "demo-fast"}),
		ev("subagent.step", map[string]any{"version": 2, "message_index": 1, "kind": "ai", "text": stepMarkdown, "truncated": false, "model_name": "demo-fast",
			"tool_calls": []map[string]any{{"name": "ls", "args": `{"path":"."}`}}}),
		ev("subagent.step", map[string]any{"version": 3, "message_index": 2, "kind": "tool", "tool_name": "ls", "text": stepOutput, "truncated": false}),
		ev("subagent.end", map[string]any{"version": 4, "status": "completed", "result": "Found notes.txt.", "model_name": "demo-fast"}),
		{Message: &models.Message{ID: uuid.NewString(), ThreadID: threadID, RunID: runID, Type: "tool", Name: agent.ToolTask, ToolCallID: task, Content: content, AdditionalKwargs: models.MustJSON(kw)}},
	}
	if err := a.writer.Write(context.Background(), recs...); err != nil {
		a.t.Fatal(err)
	}
}

// TestStepsCarryHTML: an AI step reaches the card rendered and sanitized,
// from the events API (a reload, an expanded card) as in its live frame;
// a tool step's output has no HTML (the card shows it as text).
func TestStepsCarryHTML(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("steps")
	a.seedStepsCard(th, u.id)
	var page struct {
		Events []struct {
			EventType string         `json:"event_type"`
			Seq       int64          `json:"seq"`
			Content   map[string]any `json:"content"`
		} `json:"events"`
	}
	u.mustJSON("GET", "/api/threads/"+th+"/events?event_types=subagent.step", nil, 200, &page)
	if len(page.Events) != 2 {
		t.Fatalf("%d steps, want 2", len(page.Events))
	}
	ai, tool := page.Events[0].Content, page.Events[1].Content
	html, _ := ai["text_html"].(string)
	if !strings.Contains(html, "<strong>list</strong>") || !strings.Contains(html, `<span class="kd">func</span>`) {
		t.Errorf("the AI step's text_html = %q, want its Markdown rendered", html)
	}
	rendertest.AssertInert(t, stepMarkdown, html)
	if _, ok := tool["text_html"]; ok || tool["text"] != stepOutput {
		t.Errorf("the tool step = %v, want its text alone", tool)
	}

	// The live frame of the same step, as the hub encodes it.
	evs, _, err := a.store.Events(context.Background(), th, models.EventFilter{EventTypes: []string{"subagent.step"}, Limit: 10})
	if err != nil || len(evs) != 2 {
		t.Fatalf("events: %v %v", evs, err)
	}
	// Read back over the socket: the replay frames them from the database.
	conn, err := u.dial(th, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	want := map[int64]string{evs[0].Seq: html, evs[1].Seq: ""}
	for len(want) > 0 {
		f, err := readFrame(conn, 10*time.Second)
		if err != nil {
			t.Fatalf("steps' frames %v not read: %v", want, err)
		}
		if f.Seq == nil {
			continue
		}
		wantHTML, ok := want[*f.Seq]
		if !ok {
			continue
		}
		delete(want, *f.Seq)
		var data struct {
			Step struct {
				TextHTML string `json:"text_html"`
			} `json:"step"`
		}
		if err := json.Unmarshal(f.Data, &data); err != nil {
			t.Fatal(err)
		}
		if data.Step.TextHTML != wantHTML {
			t.Errorf("step %d's frame has text_html %q, want %q", *f.Seq, data.Step.TextHTML, wantHTML)
		}
	}
}

// TestBrowserStepsMarkdown: an expanded card shows its AI step as
// Markdown and its tool's output as text in a <pre>; nothing hostile in
// either comes alive; the same after a reload, in light and dark.
func TestBrowserStepsMarkdown(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("steps")
	a.seedStepsCard(th, u.id)
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	for _, theme := range []string{"light", "dark"} {
		b.openThread(th, "")
		evalAs[chromedp.Void](b, `document.documentElement.dataset.theme = "`+theme+`"`)
		// The page may remember the card open from before the reload.
		if evalAs[string](b, `document.querySelector("#messages section.card .card-toggle").getAttribute("aria-expanded")`) != "true" {
			b.activate("expand the card", `#messages section.card .card-toggle`)
		}
		b.waitFor("the steps", `!document.querySelector("#messages section.card .card-body").hidden
			&& document.querySelectorAll("#messages .card-step").length === 2`, 15*time.Second)
		problems := evalAs[[]string](b, `(() => {
			const problems = [];
			const ai = document.querySelector(".card-step-ai .step-md");
			if (!ai) return ["the AI step is not rendered as Markdown"];
			if (ai.querySelector("strong")?.textContent !== "list") problems.push("no <strong>list</strong>");
			if (ai.querySelector("li code")?.textContent !== "notes.txt") problems.push("no list item with code");
			if (ai.querySelector("pre.chroma .kd")?.textContent !== "func") problems.push("the code block is not highlighted");
			if (!ai.textContent.includes('<img src=x onerror=')) problems.push("the raw HTML is not shown as text");
			const out = document.querySelector(".card-step-tool pre.step-output");
			if (out?.textContent !== `+"`"+stepOutput+"`"+`) problems.push("tool output " + JSON.stringify(out?.textContent));
			if (out?.children.length !== 0) problems.push("the tool output has elements");
			return problems;
		})()`)
		for _, p := range problems {
			t.Errorf("%s: %s", theme, p)
		}
		b.inert(theme)
		evalAs[chromedp.Void](b, `document.querySelector(".card-step-ai").scrollIntoView({block: "center"})`)
		b.shot("steps-" + theme)
	}
}
