package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd/internal/pgtest"
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

// TestTerminateReleases: a deploy's stop (SIGTERM, drain_seconds 0)
// writes nothing more of a run with three subagents at work and exits at
// once; started again, herd resumes it and every card ends completed,
// once each.
func TestTerminateReleases(t *testing.T) {
	dir := t.TempDir()
	p := startHerdWith(t, dir, "HERD_SERVER_DRAIN_SECONDS=0")
	c := p.signIn()
	th := runningSubagents(c)
	stopped := time.Now()
	stopHerd(t, p)
	t.Logf("herd stopped in %v", time.Since(stopped))
	if !strings.Contains(p.log.String(), "runs released, to resume") {
		t.Errorf("the stop did not release the run:\n%s", p.log.String())
	}
	p2 := startHerd(t, dir)
	c2 := p2.signIn()
	if ends := c2.events(th, "subagent.end"); len(ends.Events) != 0 {
		t.Errorf("the stop ended %d cards; want none (they resume)", len(ends.Events))
	}
	waitRunEnd(t, c2, th, 90*time.Second)
	if ends := c2.events(th, "run.end"); len(ends.Events) != 1 || ends.Events[0].Content.Status != "completed" {
		t.Fatalf("run ends %+v, want one, completed", ends.Events)
	}
	oneTerminalEach(t, c2, th)
	var state threadState
	c2.call("GET", "/api/threads/"+th, nil, &state)
	for _, task := range state.Tasks {
		if task.Status != "completed" {
			t.Errorf("card %s %s (%s), want completed", task.TaskID, task.Status, task.Error)
		}
	}
	stopHerd(t, p2)
}

// TestClusterDeployResumes: instance A is stopped for a deploy (SIGTERM,
// drain_seconds 0) with three subagents at work; B, which a page watches
// the thread on, resumes the run at its next renewal (A retired: no lease
// to wait out), and the page sees the run continue and end without a
// reload: the resumed frames, then every card's end and the run's, in
// contiguous seq order.
func TestClusterDeployResumes(t *testing.T) {
	dsn := pgtest.DSN(t)
	env := clusterEnv(dsn, "HERD_SERVER_DRAIN_SECONDS=0")
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca, cb := a.signIn(), b.signIn()
	th := runningSubagents(ca)
	conn := dialStream(t, b, cb, th)
	stopped := time.Now()
	stopHerd(t, a)
	var (
		last     int64
		resumedF bool
		ended    = map[string]bool{}
	)
	for {
		f := readFrame(t, conn, b)
		if f.Seq != nil {
			if last != 0 && *f.Seq != last+1 {
				t.Fatalf("seq %d after %d on B's page", *f.Seq, last)
			}
			last = *f.Seq
		}
		switch {
		case f.Type == "run.resumed":
			if !resumedF {
				t.Logf("B resumed the run %v after A's stop", time.Since(stopped))
			}
			resumedF = true
		case strings.HasPrefix(f.Type, "task_") && f.Type != "task_running" && f.Type != "task_started" && f.Type != "task_queued" && f.Type != "task_waiting":
			var d struct {
				TaskID string `json:"task_id"`
			}
			_ = json.Unmarshal(f.Data, &d)
			if ended[d.TaskID] {
				t.Errorf("card %s ended twice on B's page", d.TaskID)
			}
			ended[d.TaskID] = true
			if f.Type != "task_completed" {
				t.Errorf("card %s ended %s on B's page", d.TaskID, f.Type)
			}
		}
		if f.Type == "run.end" {
			break
		}
	}
	if !resumedF || len(ended) != 3 {
		t.Errorf("B's page: resumed %v, %d cards ended; want the resume and 3", resumedF, len(ended))
	}
	oneTerminalEach(t, cb, th)
	stopHerd(t, b)
}

// TestKillDuringCommand: herd is killed while a subagent's command runs
// (it counts its runs in a file, then sleeps). Resumed, the command is not
// run again: its result says the outcome is unknown, the subagent's model
// goes on from there and the card completes; the file counts one run.
func TestKillDuringCommand(t *testing.T) {
	dir := t.TempDir()
	p := startHerd(t, dir)
	c := p.signIn()
	var th struct{ ID string }
	c.call("POST", "/api/threads", map[string]string{"title": "cmd"}, &th)
	c.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": "Run `echo ran >> count.txt; sleep 60`"}, nil)
	count := dir + "/workspaces/" + th.ID + "/count.txt"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if b, _ := os.ReadFile(count); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command never ran:\n%s", p.log.String())
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.wait(10 * time.Second)
	p2 := startHerd(t, dir)
	c2 := p2.signIn()
	waitRunEnd(t, c2, th.ID, 60*time.Second)
	var state threadState
	c2.call("GET", "/api/threads/"+th.ID, nil, &state)
	if len(state.Tasks) != 1 || state.Tasks[0].Status != "completed" {
		t.Fatalf("cards %+v, want one completed", state.Tasks)
	}
	var steps struct {
		Events []struct {
			Content struct {
				Kind, Text string
			} `json:"content"`
		} `json:"events"`
	}
	c2.call("GET", "/api/threads/"+th.ID+"/events?limit=1000&event_types=subagent.step", nil, &steps)
	found := false
	for _, e := range steps.Events {
		if e.Content.Kind == "tool" && strings.Contains(e.Content.Text, "the outcome is unknown") {
			found = true
		}
	}
	if !found {
		t.Errorf("no tool step says the command's outcome is unknown: %+v", steps.Events)
	}
	if b, _ := os.ReadFile(count); strings.Count(string(b), "ran") != 1 {
		t.Errorf("count.txt %q: the command ran again", b)
	}
	oneTerminalEach(t, c2, th.ID)
	stopHerd(t, p2)
}

// TestCrashLoopEnds: with runs.max_resumes 1, a run killed twice is
// resumed once, then ends failed saying why: a poison run cannot keep a
// server busy forever.
func TestCrashLoopEnds(t *testing.T) {
	dir := t.TempDir()
	env := []string{"HERD_RUNS_MAX_RESUMES=1", "HERD_MODELS_0_LATENCY_MS=2000", "HERD_MODELS_1_LATENCY_MS=2000"}
	p := startHerdWith(t, dir, env...)
	th := runningSubagents(p.signIn())
	for i := range 2 {
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = p.wait(10 * time.Second)
		p = startHerdWith(t, dir, env...)
		if i == 0 && !strings.Contains(p.log.String(), "crash recovery resumed interrupted runs") {
			t.Fatalf("the first restart did not resume:\n%s", p.log.String())
		}
	}
	c := p.signIn()
	ends := c.events(th, "run.end")
	if len(ends.Events) != 1 || ends.Events[0].Content.Status != "failed" || !strings.Contains(ends.Events[0].Content.Error, "runs.max_resumes is 1") {
		t.Fatalf("run ends %+v, want one, failed for runs.max_resumes", ends.Events)
	}
	oneTerminalEach(t, c, th)
	stopHerd(t, p)
}

// TestKillMidAnswer: herd is killed while the lead streams its answer;
// started again, it continues that answer instead of writing it anew:
// one answer, under the message id that streamed, beginning with every
// word a client was shown before the kill, and word for word the answer
// an uninterrupted run gives; the cut call is one lost call.
func TestKillMidAnswer(t *testing.T) {
	t.Parallel()
	const question = "What is a good name for a sheepdog that herds goats?"
	dir := t.TempDir()
	slow := []string{"HERD_MODELS_0_LATENCY_MS=0", "HERD_MODELS_0_CHUNK_MS=60"}
	p := startHerdWith(t, dir, slow...)
	c := p.signIn()
	var th struct{ ID string }
	c.call("POST", "/api/threads", map[string]string{"title": "cut"}, &th)
	conn := dialThread(t, p, c, th.ID)
	c.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": question}, nil)
	var (
		msgID string
		shown strings.Builder
	)
	for deltas := 0; deltas < 4; {
		f := readFrame(t, conn, p)
		if f.Type != "ai_delta" {
			continue
		}
		var d struct {
			MessageID string `json:"message_id"`
			Text      string `json:"text"`
		}
		_ = json.Unmarshal(f.Data, &d)
		msgID = d.MessageID
		shown.WriteString(d.Text)
		deltas++
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.wait(10 * time.Second)

	p2 := startHerdWith(t, dir, slow...)
	c2 := p2.signIn()
	waitRunEnd(t, c2, th.ID, 60*time.Second)
	answers := aiMessages(c2, th.ID)
	if len(answers) != 1 || answers[0].ID != msgID {
		t.Fatalf("answers %+v; want one, the message %s that streamed", answers, msgID)
	}
	if !strings.HasPrefix(answers[0].Content, shown.String()) {
		t.Errorf("the answer %q does not begin with what was shown before the kill, %q", answers[0].Content, shown.String())
	}
	var th2 struct{ ID string }
	c2.call("POST", "/api/threads", map[string]string{"title": "whole"}, &th2)
	c2.call("POST", "/api/threads/"+th2.ID+"/runs", map[string]string{"content": question}, nil)
	waitRunEnd(t, c2, th2.ID, 60*time.Second)
	if whole := aiMessages(c2, th2.ID); len(whole) != 1 || whole[0].Content != answers[0].Content {
		t.Errorf("continued answer %q; an uninterrupted run answers %+v", answers[0].Content, whole)
	}
	var usage struct {
		Total struct {
			LostCalls int `json:"lost_calls"`
		} `json:"total"`
	}
	c2.call("GET", "/api/threads/"+th.ID+"/usage", nil, &usage)
	if usage.Total.LostCalls != 1 {
		t.Errorf("%d lost calls, want the cut one", usage.Total.LostCalls)
	}
	stopHerd(t, p2)
}

// aiMessages are a thread's saved AI messages.
func aiMessages(c *client, threadID string) []struct{ ID, Content string } {
	var th struct {
		Messages []struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	c.call("GET", "/api/threads/"+threadID, nil, &th)
	var out []struct{ ID, Content string }
	for _, m := range th.Messages {
		if m.Type == "ai" {
			out = append(out, struct{ ID, Content string }{m.ID, m.Content})
		}
	}
	return out
}
