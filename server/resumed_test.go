package server

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"herd/agent"
	"herd/models"
)

// The texts a user reads where a run resumed (issue 24 "Visible, not
// magical"), written out here so a changed format fails these tests.
const (
	restartStep    = "Resumed after a restart (lost 4.2 s)"
	failoverStep   = "Resumed on another instance (lost 1 min 5 s)"
	restartNotice  = "Resumed after a restart — 4.2 s lost"
	failoverNotice = "Continued on another instance — 1 min 5 s lost"
)

// eventRecord is ev as a producer commits it: validated, encoded once,
// its value on the record for the live path, committed at at.
func eventRecord(t testing.TB, threadID, runID, taskID string, at time.Time, ev agent.Event) models.Record {
	t.Helper()
	if err := ev.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	category := "subagent"
	if strings.HasPrefix(ev.EventType(), "run.") {
		category = "run"
	}
	return models.Record{Event: &models.RunEvent{ThreadID: threadID, RunID: runID, TaskID: taskID, EventType: ev.EventType(),
		Category: category, Content: models.JSON(b), CreatedAt: at}, Payload: ev}
}

// resumedRun is a run with one subagent that resumed twice, after a
// restart (4.2 s lost) and on another instance (65 s lost), as the resume
// engine writes it: its records in the batches they commit in, with the
// commit times a real run would have had, gaps included, from t0.
type resumedRun struct {
	runID, task string
	batches     [][]models.Record
}

func newResumedRun(t testing.TB, threadID, userID string, t0 time.Time) resumedRun {
	t.Helper()
	runID, task := uuid.NewString(), "call_resumed"
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ref := func(version int64) agent.TaskRef {
		return agent.TaskRef{TaskID: task, ExecutionID: "exec-" + task, RunID: runID, Version: version}
	}
	ev := func(ms int, taskID string, e agent.Event) models.Record {
		return eventRecord(t, threadID, runID, taskID, at(ms), e)
	}
	msg := func(ms int, m models.Message) models.Record {
		m.ID, m.ThreadID, m.RunID, m.CreatedAt = uuid.NewString(), threadID, runID, at(ms)
		return models.Record{Message: &m}
	}
	step := func(ms int, version, index int64, body agent.StepBody) models.Record {
		return ev(ms, task, agent.TaskStep{TaskRef: ref(version), MessageIndex: index, ModelName: "demo-fast", StepBody: body})
	}
	resumed := func(ms int, version, index int64, cause string, lost int64) []models.Record {
		return []models.Record{
			ev(ms, "", agent.RunResumed{RunID: runID, Resumes: version - 2, LostMS: lost, Cause: cause}),
			step(ms+100, version, index, agent.StepBody{Kind: "resumed", Text: agent.ResumedStepText(cause, lost), LostMS: lost}),
		}
	}
	args, _ := json.Marshal(map[string]string{"description": "Read the notes", "prompt": "Read notes.md and sum it up.", "subagent_type": agent.SubagentGeneral})
	intro := agent.TaskIntro{TaskRef: ref(1), Description: "Read the notes", Prompt: "Read notes.md and sum it up.", SubagentType: agent.SubagentGeneral, ModelName: "demo-fast"}
	content, kw, _ := agent.Outcome{Status: agent.StatusCompleted, Result: "Three points.", ModelName: "demo-fast"}.ToolMessage()
	ended := at(74_100)
	return resumedRun{runID: runID, task: task, batches: [][]models.Record{
		{
			{Run: &models.Run{ID: runID, ThreadID: threadID, UserID: userID, Status: models.RunRunning, ModelName: "demo-fast", StartedAt: t0}},
			ev(0, "", agent.RunStart{RunID: runID, ModelName: "demo-fast"}),
			msg(0, models.Message{Type: agent.TypeHuman, Content: "Sum up my notes."}),
			msg(1000, models.Message{Type: agent.TypeAI, ModelName: "demo-fast", ToolCalls: models.MustJSON([]agent.ToolCall{{ID: task, Name: agent.ToolTask, Args: args}})}),
			ev(1500, task, agent.TaskStarted{TaskIntro: intro}),
			step(2000, 2, 1, agent.StepBody{Kind: "ai", Text: "Reading.", ToolCalls: []agent.StepCall{{Name: "read_file", Args: `{"path":"notes.md"}`}}}),
		},
		resumed(6200, 3, 2, "restart", 4200),
		resumed(71_300, 4, 3, "failover", 65_000),
		{
			step(72_000, 5, 4, agent.StepBody{Kind: "ai", Text: "Three points."}),
			ev(72_500, task, agent.TaskEnd{TaskRef: ref(6), Status: agent.StatusCompleted, ModelName: "demo-fast", Result: "Three points."}),
			msg(72_600, models.Message{Type: agent.TypeTool, Name: agent.ToolTask, ToolCallID: task, Content: content, AdditionalKwargs: models.MustJSON(kw)}),
			msg(74_000, models.Message{Type: agent.TypeAI, ModelName: "demo-fast", Content: "All done: three points."}),
			{Run: &models.Run{ID: runID, ThreadID: threadID, UserID: userID, Status: models.RunCompleted, ModelName: "demo-fast", StartedAt: t0, EndedAt: &ended}},
			ev(74_100, "", agent.RunEnd{RunID: runID, Status: models.RunCompleted}),
		},
	}}
}

// commit writes recs through the journal the runtime writes through, so
// open pages get them as frames.
func (a *testApp) commit(recs ...models.Record) {
	a.t.Helper()
	if err := a.hub.Preparing(a.writer).Write(context.Background(), recs...); err != nil {
		a.t.Fatal(err)
	}
}

// resumedNotices are the texts of a page's run-resumed notices, in page
// order.
var resumedNotices = regexp.MustCompile(`<p class="run-resumed" id="run-resumed-\d+" role="note" data-seq="\d+" data-run-id="([^"]+)" data-at="([^"]+)" data-lost-ms="(\d+)"><span class="run-resumed-icon" aria-hidden="true">↻</span> <span class="run-resumed-text">([^<]*)</span></p>`)

// TestResumedRunReloaded: a run that resumed twice shows, after a reload,
// a notice where each resumption is in the conversation (after the call
// whose card was cut, before the answer), with its lost time; the card's
// steps from the events API hold each resumed step with its words and
// lost time, as a step of its own kind, never rendered as the model's
// Markdown.
func TestResumedRunReloaded(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("resumed")
	run := newResumedRun(t, th, u.id, time.Now().Add(-2*time.Minute))
	for _, b := range run.batches {
		a.commit(b...)
	}

	page := u.do("GET", "/threads/"+th, nil)
	if page.status != 200 {
		t.Fatalf("GET the thread: %d", page.status)
	}
	body := string(page.body)
	found := resumedNotices.FindAllStringSubmatch(body, -1)
	var texts []string
	for _, m := range found {
		texts = append(texts, m[4])
		if m[1] != run.runID {
			t.Errorf("notice %q of run %s, want %s", m[4], m[1], run.runID)
		}
	}
	if want := []string{restartNotice, failoverNotice}; !slices.Equal(texts, want) {
		t.Fatalf("the page's resumed notices: %q, want %q", texts, want)
	}
	if found[0][3] != "4200" || found[1][3] != "65000" {
		t.Errorf("lost ms %s and %s, want 4200 and 65000", found[0][3], found[1][3])
	}
	card, first, answer := strings.Index(body, `id="card-`+run.runID), strings.Index(body, restartNotice), strings.Index(body, "All done: three points.")
	if card < 0 || answer < 0 || !(card < first && first < strings.Index(body, failoverNotice) && strings.Index(body, failoverNotice) < answer) {
		t.Errorf("the notices are not between the card (at %d) and the answer (at %d): at %d and %d", card, answer, first, strings.Index(body, failoverNotice))
	}
	if !strings.Contains(body, `<template id="run-resumed-template">`) {
		t.Error("the page has no run-resumed template for live frames")
	}

	var steps struct {
		Events []struct {
			Content map[string]any `json:"content"`
		} `json:"events"`
	}
	u.mustJSON("GET", "/api/threads/"+th+"/events?event_types=subagent.step&task_id="+run.task, nil, 200, &steps)
	var got []string
	for _, e := range steps.Events {
		c := e.Content
		_, html := c["text_html"]
		got = append(got, strings.Join([]string{c["kind"].(string), c["text"].(string), jsonString(c["lost_ms"]), map[bool]string{true: "html"}[html]}, "|"))
	}
	want := []string{"ai|Reading.||html", "resumed|" + restartStep + "|4200|", "resumed|" + failoverStep + "|65000|", "ai|Three points.||html"}
	if !slices.Equal(got, want) {
		t.Errorf("the card's steps:\n got %q\nwant %q", got, want)
	}

	var events struct {
		Events []struct {
			RunID string `json:"run_id"`
		} `json:"events"`
	}
	u.mustJSON("GET", "/api/threads/"+th+"/events?event_types=run.resumed&run_id="+run.runID, nil, 200, &events)
	if len(events.Events) != 2 {
		t.Errorf("the events API finds %d run.resumed of the run, want 2", len(events.Events))
	}
}

func jsonString(v any) string {
	if v == nil {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestResumedCardWhileRunning: a subagent of a live run resumes; a reload
// shows its card running with the resumed step's words as its status
// line, and the run's notice above it.
func TestResumedCardWhileRunning(t *testing.T) {
	started, gate := make(chan string, 1), make(chan struct{})
	a := newApp(t, func(c *appConfig) { c.provider = waitProvider(started, gate) })
	u := a.newUser("ann@example.com", false)
	th := u.newThread("resumed live")
	runID := u.startRun(th, "jobs 1")
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the subagent never called its model")
	}
	defer func() {
		close(gate)
		a.waitIdle(th)
	}()
	// The task's start was queued before its model call: flushed, it is
	// committed.
	if err := a.writer.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	var live struct {
		Tasks []agent.Card `json:"tasks"`
	}
	u.mustJSON("GET", "/api/threads/"+th, nil, 200, &live)
	if len(live.Tasks) != 1 || live.Tasks[0].Status != agent.StatusRunning {
		t.Fatalf("tasks %+v, want one running", live.Tasks)
	}
	c := live.Tasks[0]
	now := time.Now()
	a.commit(
		eventRecord(t, th, runID, "", now, agent.RunResumed{RunID: runID, Resumes: 1, LostMS: 4200, Cause: "restart"}),
		eventRecord(t, th, runID, c.TaskID, now, agent.TaskStep{
			TaskRef:      agent.TaskRef{TaskID: c.TaskID, ExecutionID: c.ExecutionID, RunID: runID, Version: c.Version + 1},
			MessageIndex: c.Steps + 1, StepBody: agent.StepBody{Kind: "resumed", Text: restartStep, LostMS: 4200},
		}),
	)
	page := u.do("GET", "/threads/"+th, nil)
	body := string(page.body)
	if !strings.Contains(body, `data-activity="`+restartStep+`"`) || !strings.Contains(body, `<span class="card-status">`+restartStep+`</span>`) {
		t.Errorf("the running card does not say %q after a reload", restartStep)
	}
	if texts := resumedNotices.FindAllStringSubmatch(body, -1); len(texts) != 1 || texts[0][4] != restartNotice {
		t.Errorf("the page's resumed notices: %q, want one %q", texts, restartNotice)
	}
}

// TestResumedRunRegenerated: a Regenerate hides a completed run's answer
// and with it where that run resumed; the new run's page shows no notice
// of the old one.
func TestResumedRunRegenerated(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("regenerated")
	run := newResumedRun(t, th, u.id, time.Now().Add(-2*time.Minute))
	for _, b := range run.batches {
		a.commit(b...)
	}
	again, now := uuid.NewString(), time.Now()
	a.commit(
		models.Record{Run: &models.Run{ID: again, ThreadID: th, UserID: u.id, Status: models.RunCompleted, ModelName: "demo-fast", StartedAt: now, EndedAt: &now, RetryOf: run.runID}},
		eventRecord(t, th, again, "", now, agent.RunStart{RunID: again, ModelName: "demo-fast", RetryOf: run.runID}),
		models.Record{Message: &models.Message{ID: uuid.NewString(), ThreadID: th, RunID: again, Type: agent.TypeAI, ModelName: "demo-fast", Content: "Three points, again."}},
		eventRecord(t, th, again, "", now, agent.RunEnd{RunID: again, Status: models.RunCompleted}),
	)
	body := string(u.do("GET", "/threads/"+th, nil).body)
	if !strings.Contains(body, "Three points, again.") || strings.Contains(body, "All done: three points.") {
		t.Fatal("the page does not show the regenerated answer in place of the old one")
	}
	if n := len(resumedNotices.FindAllString(body, -1)); n != 0 {
		t.Errorf("the page shows %d notices of the replaced run, want none", n)
	}
}
