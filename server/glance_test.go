package server

import (
	"net/http"
	"testing"
	"time"

	"herd/agent"
)

// TestTaskTimes: the thread API's tasks carry when each was queued,
// started and ended, from the commit times of their events, and a
// finished task's activity is empty; a task that waited for a slot has
// its wait before its start.
func TestTaskTimes(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 100, 1)), withSubagents(agent.SubagentsConfig{MaxRunningPerUser: 1}))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("times")
	before := time.Now().UTC()
	u.mustJSON("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "Two:\n- alpha\n- beta"}, http.StatusAccepted, nil)
	a.waitIdle(th)
	var page struct {
		Tasks []struct {
			Status    string     `json:"status"`
			Activity  string     `json:"activity"`
			QueuedAt  *time.Time `json:"queued_at"`
			StartedAt *time.Time `json:"started_at"`
			EndedAt   *time.Time `json:"ended_at"`
		} `json:"tasks"`
	}
	u.mustJSON("GET", "/api/threads/"+th, nil, http.StatusOK, &page)
	if len(page.Tasks) != 2 {
		t.Fatalf("tasks: %+v", page.Tasks)
	}
	waited := 0
	for i, task := range page.Tasks {
		if task.Status != "completed" || task.Activity != "" || task.StartedAt == nil || task.EndedAt == nil {
			t.Fatalf("task %d: %+v", i, task)
		}
		if task.StartedAt.Before(before) || task.EndedAt.Before(*task.StartedAt) {
			t.Errorf("task %d started %v and ended %v, the run began %v", i, task.StartedAt, task.EndedAt, before)
		}
		if task.QueuedAt != nil {
			waited++
			if task.StartedAt.Before(*task.QueuedAt) {
				t.Errorf("task %d started %v before it was queued %v", i, task.StartedAt, task.QueuedAt)
			}
		}
	}
	if waited != 1 {
		t.Errorf("%d tasks waited for a slot, want 1 (one runs at a time)", waited)
	}
}
