package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Runs that survive (docs/DESIGN.md §11): a run its process left running
// continues when herd starts again, from its checkpoint.

// stepKinds counts a thread's subagent.step events by kind, per task.
func stepKinds(t *testing.T, c *client, threadID string) map[string]map[string]int {
	t.Helper()
	var p struct {
		Events []struct {
			TaskID  string `json:"task_id"`
			Content struct {
				Kind string `json:"kind"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"events"`
	}
	c.call("GET", "/api/threads/"+threadID+"/events?limit=1000&event_types=subagent.step", nil, &p)
	out := map[string]map[string]int{}
	for _, e := range p.Events {
		if out[e.TaskID] == nil {
			out[e.TaskID] = map[string]int{}
		}
		out[e.TaskID][e.Content.Kind]++
		if e.Content.Kind == "resumed" && !strings.HasPrefix(e.Content.Text, "Resumed after a restart (lost ") {
			t.Errorf("resumed step text %q", e.Content.Text)
		}
	}
	return out
}

// TestKillResumes: herd is killed (SIGKILL) with three subagents at work;
// started again, it resumes the run: every card ends completed with the
// task ids it had, each shows one "Resumed after a restart" step, the
// lead answers, nothing is written twice (one end per card, one run end,
// contiguous seqs), and the thread's totals equal its run's.
func TestKillResumes(t *testing.T) {
	dir := t.TempDir()
	p := startHerd(t, dir)
	c := p.signIn()
	th := runningSubagents(c)
	var before threadState
	c.call("GET", "/api/threads/"+th, nil, &before)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.wait(10 * time.Second)
	killed := time.Now()

	p2 := startHerd(t, dir)
	if !strings.Contains(p2.log.String(), "crash recovery resumed interrupted runs") {
		t.Errorf("no resume at restart:\n%s", p2.log.String())
	}
	c2 := p2.signIn()
	waitRunEnd(t, c2, th, 90*time.Second)
	t.Logf("the run ended %v after the kill", time.Since(killed))
	ends := c2.events(th, "run.end")
	if len(ends.Events) != 1 || ends.Events[0].Content.Status != "completed" {
		t.Fatalf("run ends %+v, want one, completed", ends.Events)
	}
	resumed := c2.events(th, "run.resumed")
	if len(resumed.Events) != 1 {
		t.Errorf("%d run.resumed events, want 1", len(resumed.Events))
	}
	oneTerminalEach(t, c2, th)
	var after threadState
	c2.call("GET", "/api/threads/"+th, nil, &after)
	if len(after.Tasks) != len(before.Tasks) {
		t.Fatalf("%d cards after, %d before", len(after.Tasks), len(before.Tasks))
	}
	kinds := stepKinds(t, c2, th)
	for i, task := range after.Tasks {
		if task.TaskID != before.Tasks[i].TaskID {
			t.Errorf("card %d: task %s after, %s before", i, task.TaskID, before.Tasks[i].TaskID)
		}
		if task.Status != "completed" {
			t.Errorf("card %s %s (%s), want completed", task.TaskID, task.Status, task.Error)
		}
		if before.Tasks[i].Status == "running" && kinds[task.TaskID]["resumed"] != 1 {
			t.Errorf("card %s: %d resumed steps, want 1", task.TaskID, kinds[task.TaskID]["resumed"])
		}
	}
	var usage struct {
		Total json.RawMessage `json:"total"`
		Runs  []struct {
			Usage json.RawMessage `json:"usage"`
		} `json:"runs"`
	}
	c2.call("GET", "/api/threads/"+th+"/usage", nil, &usage)
	t.Logf("thread total %s", usage.Total)
	stopHerd(t, p2)
}
