package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"herd/agent"
	"herd/models"
)

// seedCards writes a finished run with n task calls, each with a start,
// steps, an end and its ToolMessage, straight through the writer.
func (a *testApp) seedCards(threadID, userID string, n, stepsPer int) {
	a.t.Helper()
	ctx := context.Background()
	runID := uuid.NewString()
	var calls []agent.ToolCall
	for i := range n {
		args, _ := json.Marshal(map[string]string{"description": fmt.Sprintf("Task %d", i), "prompt": "p", "subagent_type": "general-purpose"})
		calls = append(calls, agent.ToolCall{ID: fmt.Sprintf("call_%d", i), Name: agent.ToolTask, Args: args})
	}
	now := time.Now()
	recs := []models.Record{
		{Run: &models.Run{ID: runID, ThreadID: threadID, UserID: userID, Status: models.RunCompleted, ModelName: "demo-fast", StartedAt: now, EndedAt: &now}},
		{Message: &models.Message{ID: uuid.NewString(), ThreadID: threadID, RunID: runID, Type: "human", Content: "go"}},
		{Message: &models.Message{ID: uuid.NewString(), ThreadID: threadID, RunID: runID, Type: "ai", ToolCalls: models.MustJSON(calls)}},
	}
	ev := func(task, typ string, c map[string]any) models.Record {
		c["task_id"], c["execution_id"], c["run_id"] = task, "e-"+task, runID
		b, _ := json.Marshal(c)
		return models.Record{Event: &models.RunEvent{ThreadID: threadID, RunID: runID, TaskID: task, EventType: typ, Category: "subagent", Content: models.JSON(b)}}
	}
	for i, c := range calls {
		usage := map[string]any{"input_tokens": 10 * (i + 1), "output_tokens": 5, "total_tokens": 10*(i+1) + 5}
		v := 1
		recs = append(recs, ev(c.ID, "subagent.start", map[string]any{"version": v, "description": "d", "prompt": "p", "subagent_type": "general-purpose", "model_name": "demo-fast"}))
		for s := range stepsPer {
			v++
			recs = append(recs, ev(c.ID, "subagent.step", map[string]any{"version": v, "message_index": s + 1, "kind": "ai", "text": "thinking", "truncated": false, "usage": usage, "model_name": "demo-fast"}))
		}
		v++
		recs = append(recs, ev(c.ID, "subagent.end", map[string]any{"version": v, "status": "completed", "result": "done", "usage": usage, "model_name": "demo-fast"}))
		content, kw, _ := agent.Outcome{Status: agent.StatusCompleted, Result: "done", ModelName: "demo-fast", Usage: &agent.TokenUsage{InputTokens: int64(10 * (i + 1)), OutputTokens: 5, TotalTokens: int64(10*(i+1) + 5)}}.ToolMessage()
		recs = append(recs, models.Record{Message: &models.Message{ID: uuid.NewString(), ThreadID: threadID, RunID: runID, Type: "tool", Name: agent.ToolTask, ToolCallID: c.ID, Content: content, AdditionalKwargs: models.MustJSON(kw)}})
	}
	if err := a.writer.Write(ctx, recs...); err != nil {
		a.t.Fatal(err)
	}
}

// TestThreadPageQueryCount: a reload costs the same number of queries with
// 1 card and with 200 (docs/DESIGN.md §9: no request per card, no N+1).
func TestThreadPageQueryCount(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	counts := map[int]int64{}
	for _, n := range []int{1, 200} {
		th := u.newThread(fmt.Sprint(n))
		a.seedCards(th, u.id, n, 3)
		for _, path := range []string{"/threads/" + th, "/api/threads/" + th} {
			before := a.store.Reads()
			r := u.do("GET", path, nil)
			if r.status != 200 {
				t.Fatalf("GET %s: %d", path, r.status)
			}
			counts[n] += a.store.Reads() - before
			if path[1] == 't' && strings.Count(string(r.body), `class="card card-completed"`) != n {
				t.Errorf("page with %d cards renders %d", n, strings.Count(string(r.body), `class="card card-completed"`))
			}
		}
	}
	if counts[1] != counts[200] || counts[1] == 0 {
		t.Errorf("queries: %d for 1 card, %d for 200", counts[1], counts[200])
	}
	t.Logf("queries for a page + its JSON: %d (1 card), %d (200 cards)", counts[1], counts[200])
}

func TestEventsCursor(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	a.seedCards(th, u.id, 3, 7)
	for _, limit := range []int{1, 3, 4, 1000} {
		var seqs []int64
		after := int64(0)
		pages := 0
		for {
			var page struct {
				Events []eventJSON `json:"events"`
				Next   int64       `json:"next_after_seq"`
				More   bool        `json:"has_more"`
			}
			u.mustJSON("GET", fmt.Sprintf("/api/threads/%s/events?task_id=call_1&after_seq=%d&limit=%d", th, after, limit), nil, 200, &page)
			pages++
			if len(page.Events) > limit {
				t.Fatalf("page of %d events with limit %d", len(page.Events), limit)
			}
			for _, e := range page.Events {
				if e.TaskID != "call_1" {
					t.Fatalf("event of task %s in call_1's pages", e.TaskID)
				}
				seqs = append(seqs, e.Seq)
			}
			if len(page.Events) > 0 && page.Next != page.Events[len(page.Events)-1].Seq {
				t.Fatalf("next_after_seq %d, last seq %d", page.Next, page.Events[len(page.Events)-1].Seq)
			}
			if !page.More {
				break
			}
			after = page.Next
		}
		if len(seqs) != 9 { // start, 7 steps, end
			t.Errorf("limit %d: %d events, want 9", limit, len(seqs))
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				t.Errorf("limit %d: seq %d after %d (duplicate or out of order)", limit, seqs[i], seqs[i-1])
			}
		}
		if want := (9 + limit - 1) / limit; limit < 9 && pages != want && pages != want+1 {
			t.Errorf("limit %d: %d pages", limit, pages)
		}
	}
	// Steps only, as the card's timeline asks.
	var steps struct {
		Events []eventJSON `json:"events"`
	}
	u.mustJSON("GET", "/api/threads/"+th+"/events?task_id=call_2&event_types=subagent.step", nil, 200, &steps)
	if len(steps.Events) != 7 {
		t.Errorf("%d steps, want 7", len(steps.Events))
	}
}

var figure = regexp.MustCompile(`"(input|output|total)_tokens"\s*:\s*\d|data-total-tokens="\d|\d[\d,.]*[KM]? tokens|class="card-tokens">[^<]|data-usage="[a-z-]+">\d|"unreported_calls"|not reported for|"lost_calls"|cut by a restart`)

// TestTokenGate: with token usage off, no token figure reaches anyone's
// chat view — an admin's included — not in the page, the thread JSON (its
// messages' usage and metadata, its cards), the events API, the usage API,
// the export or the frames, replayed or live; model labels still show.
// Each surface carries figures while the switch is on, so each absence is
// proven. A subagent on a model that reports no usage makes the "not
// reported for N calls" counts part of what the gate must hide, and a
// call cut by a restart (models.LostCall) its "cut by a restart" note.
func TestTokenGate(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 5, 1), demoModel("demo-deep", 10, 1), noUsage(demoModel("demo-quiet", 5, 1))),
		withSubagents(agent.SubagentsConfig{Agents: map[string]agent.AgentConfig{
			"quiet": {Description: "Reports no usage.", Model: "demo-quiet"},
		}}))
	admin := a.newUser("admin@example.com", true)
	u := a.newUser("ann@example.com", false)
	threads := map[*user]string{u: u.newThread("t"), admin: admin.newThread("mine")}
	for who, th := range threads {
		who.startRun(th, "Compare:\n- alpha\n- beta\n- quiet: gamma")
		a.waitIdle(th)
		runs, err := a.store.Runs(context.Background(), th)
		if err != nil || len(runs) != 1 {
			t.Fatalf("runs %v, %v", runs, err)
		}
		if err := a.writer.Write(context.Background(), models.Record{Usage: models.LostCall(th, runs[0].UserID, runs[0].ID, "call_3", "demo-quiet", "v2.r1")}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(name string, who *user, wantFigures bool) {
		t.Helper()
		th := threads[who]
		for where, body := range gateSurfaces(t, who, th) {
			has := figure.MatchString(body)
			if has != wantFigures {
				t.Errorf("%s: %s has token figures = %v, want %v (%s)", name, where, has, wantFigures, figure.FindString(body))
			}
			if !strings.HasSuffix(where, "/usage") && !strings.Contains(body, "demo-fast") {
				t.Errorf("%s: %s lost the model name", name, where)
			}
		}
		var usage map[string]any
		who.mustJSON("GET", "/api/threads/"+th+"/usage", nil, http.StatusOK, &usage)
		if on, _ := usage["token_usage_enabled"].(bool); on != wantFigures || (!wantFigures && len(usage) != 1) {
			t.Errorf("%s: the usage API answers %v", name, usage)
		}
	}
	gate := func(on bool) {
		admin.mustJSON("PUT", "/api/admin/settings", map[string]bool{"token_usage_enabled": on}, http.StatusOK, nil)
	}
	check("on, user", u, true)
	check("on, admin", admin, true)
	gate(false)
	for _, who := range []*user{u, admin} {
		name := map[bool]string{false: "off, user", true: "off, admin"}[who.admin]
		check(name, who, false)
		// A run while the switch is off: its live frames carry no figure.
		th := threads[who]
		last, err := a.store.LastSeq(context.Background(), th)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := who.dial(th, last)
		if err != nil {
			t.Fatal(err)
		}
		who.startRun(th, "Again:\n- gamma")
		live := framesUntil(t, conn, "run.end")
		conn.Close()
		a.waitIdle(th)
		var all strings.Builder
		for _, f := range live {
			all.Write(f)
		}
		if strings.Count(all.String(), `"type":"task_`) == 0 {
			t.Fatalf("%s: no task frames in the live run: %s", name, all.String())
		}
		if figure.MatchString(all.String()) || strings.Contains(all.String(), "_tokens") || strings.Contains(all.String(), "unreported") {
			t.Errorf("%s: a live frame carries a token figure: %s", name, figure.FindString(all.String()))
		}
	}
	var s struct {
		On bool `json:"token_usage_enabled"`
	}
	u.mustJSON("GET", "/api/settings", nil, 200, &s)
	if s.On {
		t.Error("settings still say on")
	}
	gate(true)
	check("on again, user", u, true)
	check("on again, admin", admin, true)
}

// gateSurfaces is every chat view of a thread as who sees it: the page,
// the thread JSON and, split out of it, its messages' usage, their
// metadata and the cards, the events API, the JSON export and the
// replayed frames.
func gateSurfaces(t *testing.T, who *user, thread string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range []string{"/threads/" + thread, "/api/threads/" + thread, "/api/threads/" + thread + "/events?limit=1000", "/api/threads/" + thread + "/export?format=json"} {
		r := who.do("GET", p, nil)
		if r.status != 200 {
			t.Fatalf("GET %s: %d", p, r.status)
		}
		out[p] = string(r.body)
	}
	var body struct {
		Messages []struct {
			Usage     json.RawMessage `json:"usage"`
			Metadata  json.RawMessage `json:"additional_kwargs"`
			ModelName string          `json:"model_name"`
			Name      string          `json:"name"`
		} `json:"messages"`
		Tasks json.RawMessage `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(out["/api/threads/"+thread]), &body); err != nil {
		t.Fatal(err)
	}
	var usage, metadata strings.Builder
	for _, m := range body.Messages {
		if m.ModelName != "" {
			usage.WriteString(m.ModelName + ": " + string(m.Usage) + "\n")
		}
		if m.Name == agent.ToolTask {
			metadata.Write(m.Metadata)
		}
	}
	out["messages' usage"] = usage.String()
	out["messages' metadata"] = metadata.String()
	out["cards"] = string(body.Tasks)

	conn, err := who.dial(thread, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	last, _ := who.a.store.LastSeq(context.Background(), thread)
	var frames strings.Builder
	for {
		f, err := readFrame(conn, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(f)
		frames.Write(b)
		if f.Seq != nil && *f.Seq >= last {
			break
		}
	}
	out["replayed frames"] = frames.String()
	return out
}
