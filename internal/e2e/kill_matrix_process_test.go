package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The kill matrix (docs/DESIGN.md §11, "Resume"): herd is killed with
// twenty subagents of every kind in flight — thinking (a model call
// under way), a command sleeping, a long MCP operation, queued — and
// after each restart the run goes on; whatever the number of kills, every
// card completes once with the task id it had, the log is whole, and the
// ledger, the cards and the thread's total agree.

const (
	matrixRunning = 8  // subagents.max_running
	matrixTasks   = 20 // the list's items
	// The long operation: in flight at the kill, run again after it.
	matrixOperation = `{"duration": 6, "steps": 6}`
)

// killMatrixEnv is the herd of the matrix: eight slots for twenty tasks
// of one response, researchers on a slow demo-deep (a model call is in
// flight most of their time), and an operator type that has the
// everything server's long-running operation.
func killMatrixEnv(t *testing.T) []string {
	return []string{
		everythingEnv(t),
		fmt.Sprintf("HERD_SUBAGENTS_MAX_RUNNING=%d", matrixRunning),
		fmt.Sprintf("HERD_SUBAGENTS_MAX_RUNNING_PER_USER=%d", matrixRunning),
		fmt.Sprintf("HERD_SUBAGENTS_MAX_CONCURRENT_PER_RESPONSE=%d", matrixTasks),
		fmt.Sprintf("HERD_SUBAGENTS_MAX_TOTAL_PER_RUN=%d", matrixTasks),
		"HERD_MODELS_1_LATENCY_MS=1500",
		"HERD_SUBAGENTS_AGENTS={" +
			"researcher: {description: Investigates., tools: [ls, read_file, write_file], model: demo-deep}, " +
			"operator: {description: Runs long operations., tools: ['mcp:everything/trigger-long-running-operation']}}",
	}
}

// matrixMessage is one message whose list makes the twenty subagents,
// dispatched in its order: the first eight take the slots (a command, the
// MCP operation, six researchers), the twelve notes queue.
func matrixMessage() string {
	var b strings.Builder
	b.WriteString("Twenty jobs:\n")
	b.WriteString("- bash: `echo ran >> count.txt; sleep 60`\n")
	b.WriteString("- operator: use everything/trigger-long-running-operation with " + matrixOperation + "\n")
	for i := range matrixRunning - 2 {
		fmt.Fprintf(&b, "- researcher: question %d\n", i+1)
	}
	for i := range matrixTasks - matrixRunning {
		fmt.Fprintf(&b, "- note %d\n", i+1)
	}
	return b.String()
}

// matrixEvent is an event as the matrix reads it.
type matrixEvent struct {
	Seq       int64  `json:"seq"`
	EventType string `json:"event_type"`
	TaskID    string `json:"task_id"`
	Content   struct {
		Version   int64  `json:"version"`
		Kind      string `json:"kind"`
		Text      string `json:"text"`
		ToolName  string `json:"tool_name"`
		ToolCalls []struct {
			Name string `json:"name"`
		} `json:"tool_calls"`
		Status string       `json:"status"`
		Usage  *usageReport `json:"usage"`
	} `json:"content"`
}

// usageTotals and usageReport are models.UsageTotals and UsageReport as
// the API writes them.
type usageTotals struct {
	InputTokens     int64 `json:"input_tokens"`
	OutputTokens    int64 `json:"output_tokens"`
	TotalTokens     int64 `json:"total_tokens"`
	CacheReadTokens int64 `json:"cache_read_tokens"`
	Calls           int64 `json:"calls"`
	UnreportedCalls int64 `json:"unreported_calls"`
	LostCalls       int64 `json:"lost_calls"`
}

type usageReport struct {
	Total     usageTotals `json:"total"`
	Lead      usageTotals `json:"lead"`
	Subagents usageTotals `json:"subagents"`
}

// matrixThread is the thread as the matrix reads it.
type matrixThread struct {
	Messages []struct {
		Seq        int64           `json:"seq"`
		RunID      string          `json:"run_id"`
		Type       string          `json:"type"`
		ToolCalls  json.RawMessage `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	} `json:"messages"`
	Tasks   []matrixCard `json:"tasks"`
	HasMore bool         `json:"has_more"`
	LastSeq int64        `json:"last_seq"`
}

type matrixCard struct {
	TaskID       string `json:"task_id"`
	SubagentType string `json:"subagent_type"`
	Status       string `json:"status"`
	Error        string `json:"error"`
	Result       string `json:"result"`
	Usage        *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
}

// allEvents is every event of threadID, page by page.
func allEvents(c *client, threadID string) []matrixEvent {
	var out []matrixEvent
	for after := int64(0); ; {
		var p struct {
			Events  []matrixEvent `json:"events"`
			Next    int64         `json:"next_after_seq"`
			HasMore bool          `json:"has_more"`
		}
		c.call("GET", fmt.Sprintf("/api/threads/%s/events?limit=1000&after_seq=%d", threadID, after), nil, &p)
		out = append(out, p.Events...)
		if !p.HasMore {
			return out
		}
		after = p.Next
	}
}

// matrixStart creates the thread, watches its stream for the long
// operation's progress, and sends the message.
func matrixStart(t *testing.T, p *proc, c *client) (threadID string, progress func(taskID string) bool) {
	t.Helper()
	var th struct{ ID string }
	c.call("POST", "/api/threads", map[string]string{"title": "kill matrix"}, &th)
	conn := dialStream(t, p, c, th.ID)
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	// The reader ends when the kill cuts the socket.
	go func() {
		for {
			var f struct {
				Type string `json:"type"`
				Data struct {
					TaskID string `json:"task_id"`
				} `json:"data"`
			}
			_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
			if err := conn.ReadJSON(&f); err != nil {
				return
			}
			if f.Type == "task_progress" {
				mu.Lock()
				seen[f.Data.TaskID] = true
				mu.Unlock()
			}
		}
	}()
	c.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": matrixMessage()}, nil)
	return th.ID, func(taskID string) bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[taskID]
	}
}

// waitAllKinds waits until every kind is in flight: the eight running
// tasks have written steps, the twelve others are queued, the command has
// counted its run and the MCP operation reports progress. It returns the
// cards as they are then.
func waitAllKinds(t *testing.T, p *proc, c *client, th, count string, progress func(string) bool) matrixThread {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the matrix never had every kind in flight:\n%s", p.log.String())
		}
		var state matrixThread
		c.call("GET", "/api/threads/"+th, nil, &state)
		if len(state.Tasks) != matrixTasks {
			continue
		}
		started, stepped, queued := map[string]bool{}, map[string]bool{}, map[string]bool{}
		for _, e := range allEvents(c, th) {
			switch e.EventType {
			case "subagent.start":
				started[e.TaskID] = true
			case "subagent.step":
				stepped[e.TaskID] = true
			case "subagent.queued":
				queued[e.TaskID] = true
			}
		}
		ok := len(started) == matrixRunning
		for i, task := range state.Tasks {
			switch {
			case i < matrixRunning:
				ok = ok && stepped[task.TaskID]
			default:
				ok = ok && queued[task.TaskID] && !started[task.TaskID]
			}
			if task.SubagentType == "operator" {
				ok = ok && progress(task.TaskID)
			}
		}
		if b, _ := os.ReadFile(count); ok && len(b) > 0 {
			return state
		}
	}
}

// kill ends p with SIGKILL.
func kill(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.wait(10 * time.Second)
}

// TestKillMatrix: one kill with twenty subagents in flight of every kind.
// Started again, herd resumes the run once: every card ends completed
// with the task id it had; the command is not run again (its result says
// the outcome is unknown, the count file has one run) and its model goes
// on; the long operation, read-only and idempotent by its annotations,
// runs again and completes; the model calls the kill cut are lost calls
// in the ledger; and the thread's total, the run's end and the cards plus
// the lead agree (checkMatrix).
func TestKillMatrix(t *testing.T) {
	dir := t.TempDir()
	env := killMatrixEnv(t)
	p := startHerdWith(t, dir, env...)
	c := p.signIn()
	th, progress := matrixStart(t, p, c)
	count := dir + "/workspaces/" + th + "/count.txt"
	before := waitAllKinds(t, p, c, th, count, progress)
	kill(t, p)

	p2 := startHerdWith(t, dir, env...)
	c2 := p2.signIn()
	waitRunEnd(t, c2, th, 90*time.Second)
	checkMatrix(t, c2, th, before, count, 1)
	stopHerd(t, p2)
}

// TestKillTwiceAgrees: killed with every kind in flight, then again once
// the resumed run has moved on (a queued task has ended since), herd
// resumes twice (runs.max_resumes 3) and everything agrees as after one
// kill: each cut call is one lost call, whichever kill cut it, and no
// call is in the ledger twice.
func TestKillTwiceAgrees(t *testing.T) {
	dir := t.TempDir()
	env := killMatrixEnv(t)
	p := startHerdWith(t, dir, env...)
	c := p.signIn()
	th, progress := matrixStart(t, p, c)
	count := dir + "/workspaces/" + th + "/count.txt"
	before := waitAllKinds(t, p, c, th, count, progress)
	kill(t, p)

	p2 := startHerdWith(t, dir, env...)
	c2 := p2.signIn()
	queued := map[string]bool{}
	for _, task := range before.Tasks[matrixRunning:] {
		queued[task.TaskID] = true
	}
	// The second kill comes once the resumed run has moved on: a task
	// queued at the first kill has ended since.
	for deadline := time.Now().Add(60 * time.Second); !slices.ContainsFunc(allEvents(c2, th), func(e matrixEvent) bool {
		return e.EventType == "subagent.end" && queued[e.TaskID]
	}); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the resumed run never moved on:\n%s", p2.log.String())
		}
	}
	kill(t, p2)

	p3 := startHerdWith(t, dir, env...)
	c3 := p3.signIn()
	waitRunEnd(t, c3, th, 90*time.Second)
	checkMatrix(t, c3, th, before, count, 2)
	stopHerd(t, p3)
}

// checkMatrix asserts what must hold after kills kills and the run's end
// (before: the cards at the first kill; count: the command's count file).
func checkMatrix(t *testing.T, c *client, th string, before matrixThread, count string, kills int) {
	t.Helper()
	evs := allEvents(c, th)
	var state matrixThread
	c.call("GET", "/api/threads/"+th, nil, &state)
	if state.HasMore {
		t.Fatal("the thread's messages are on more than one page")
	}

	// One end, completed; one run.resumed per kill; one end per card.
	var end *matrixEvent
	resumes := 0
	for i, e := range evs {
		switch e.EventType {
		case "run.end":
			if end != nil {
				t.Errorf("a second run.end at seq %d", e.Seq)
			}
			end = &evs[i]
		case "run.resumed":
			resumes++
		}
	}
	if end == nil || end.Content.Status != "completed" {
		t.Fatalf("run end %+v, want completed", end)
	}
	if resumes != kills {
		t.Errorf("%d run.resumed events, want %d", resumes, kills)
	}
	oneTerminalEach(t, c, th)

	// The log is whole: events and messages hold seqs 1..last_seq once each.
	var seqs []int64
	for _, e := range evs {
		seqs = append(seqs, e.Seq)
	}
	for _, m := range state.Messages {
		seqs = append(seqs, m.Seq)
	}
	slices.Sort(seqs)
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Errorf("seq %d where %d was due: a gap or a seq written twice", s, i+1)
			break
		}
	}
	if int64(len(seqs)) != state.LastSeq {
		t.Errorf("%d records, last seq %d", len(seqs), state.LastSeq)
	}

	// Every card completed, with the task id it had, in its place.
	if len(state.Tasks) != matrixTasks {
		t.Fatalf("%d cards, want %d", len(state.Tasks), matrixTasks)
	}
	for i, task := range state.Tasks {
		if task.TaskID != before.Tasks[i].TaskID {
			t.Errorf("card %d: task %s, %s before the kill", i, task.TaskID, before.Tasks[i].TaskID)
		}
		if task.Status != "completed" {
			t.Errorf("card %s (%s) %s: %s, want completed", task.TaskID, task.SubagentType, task.Status, task.Error)
		}
	}

	// No task event twice: each task's versions rise, and each task has a
	// resumed step for every resume that found it started.
	last := map[string]int64{}
	resumed := map[string]int{}
	for _, e := range evs {
		// A task's own events carry its versions; a workspace.changed of
		// one of its calls names the task but has none.
		if e.TaskID == "" || !strings.HasPrefix(e.EventType, "subagent.") {
			continue
		}
		if e.Content.Version <= last[e.TaskID] {
			t.Errorf("task %s: %s at seq %d has version %d after %d", e.TaskID, e.EventType, e.Seq, e.Content.Version, last[e.TaskID])
		}
		last[e.TaskID] = e.Content.Version
		if e.Content.Kind == "resumed" {
			resumed[e.TaskID]++
		}
	}
	open := openAtResumes(evs)
	for _, task := range state.Tasks {
		want := 0
		for _, at := range open {
			if _, ok := at[task.TaskID]; ok {
				want++
			}
		}
		if resumed[task.TaskID] != want {
			t.Errorf("task %s (%s): %d resumed steps, want %d", task.TaskID, task.SubagentType, resumed[task.TaskID], want)
		}
	}

	checkCommandAndOperation(t, evs, state, count)
	checkLedger(t, c, th, evs, state, end, open)
}

// openAtResumes is, for each run.resumed in order, the tasks started and
// not ended before it, each with whether a model call of its was in
// flight: its last step (its resumed ones aside) is a tool's result, or it
// has none (its history ended with its prompt or a result, as its
// checkpoint, committed with its steps, did).
func openAtResumes(evs []matrixEvent) []map[string]bool {
	var out []map[string]bool
	started, ended := map[string]bool{}, map[string]bool{}
	lastKind := map[string]string{}
	for _, e := range evs {
		switch {
		case e.EventType == "run.resumed":
			at := map[string]bool{}
			for id := range started {
				if !ended[id] {
					at[id] = lastKind[id] == "" || lastKind[id] == "tool"
				}
			}
			out = append(out, at)
		case e.EventType == "subagent.start":
			started[e.TaskID] = true
		case e.EventType == "subagent.end":
			ended[e.TaskID] = true
		case e.EventType == "subagent.step" && e.Content.Kind != "resumed":
			lastKind[e.TaskID] = e.Content.Kind
		}
	}
	return out
}

// checkCommandAndOperation: the command ran once and its result says its
// outcome is unknown, then its model went on; the long operation, which
// its server annotates read-only and idempotent (tools.Repeatable), ran
// again and completed.
func checkCommandAndOperation(t *testing.T, evs []matrixEvent, state matrixThread, count string) {
	t.Helper()
	steps := map[string][]matrixEvent{}
	for _, e := range evs {
		if e.EventType == "subagent.step" {
			steps[e.TaskID] = append(steps[e.TaskID], e)
		}
	}
	for _, task := range state.Tasks {
		switch task.SubagentType {
		case "bash":
			ss := steps[task.TaskID]
			i := slices.IndexFunc(ss, func(e matrixEvent) bool {
				return e.Content.Kind == "tool" && strings.Contains(e.Content.Text, "the outcome is unknown")
			})
			if i < 0 || !slices.ContainsFunc(ss[i:], func(e matrixEvent) bool { return e.Content.Kind == "ai" }) {
				t.Errorf("the command's steps: %+v; want a result saying its outcome is unknown, then its model's", ss)
			}
			if !strings.Contains(task.Result, "interrupted by a server restart") {
				t.Errorf("the command's card result %q does not say it was interrupted", task.Result)
			}
		case "operator":
			var results []string
			for _, e := range steps[task.TaskID] {
				if e.Content.Kind == "tool" {
					results = append(results, e.Content.Text)
				}
			}
			if len(results) != 1 || !strings.Contains(results[0], "Long running operation completed") {
				t.Errorf("the operation's results %q, want it run again and completed, once", results)
			}
		}
	}
	if b, _ := os.ReadFile(count); strings.Count(string(b), "ran") != 1 {
		t.Errorf("count.txt %q: the command ran again", b)
	}
}

// checkLedger: the thread's total is the run end's, and the cards plus
// the lead: tokens equal, and calls are the AI steps and lead messages the
// log holds plus the lost calls, one per call a kill cut (open), none
// twice.
func checkLedger(t *testing.T, c *client, th string, evs []matrixEvent, state matrixThread, end *matrixEvent, open []map[string]bool) {
	t.Helper()
	var usage usageReport
	c.call("GET", "/api/threads/"+th+"/usage", nil, &usage)
	if end.Content.Usage == nil || *end.Content.Usage != usage {
		t.Errorf("the thread's usage %+v, the run end's %+v", usage, end.Content.Usage)
	}
	var cards usageTotals
	for _, task := range state.Tasks {
		if task.Usage == nil {
			t.Errorf("card %s reports no usage", task.TaskID)
			continue
		}
		cards.InputTokens += task.Usage.InputTokens
		cards.OutputTokens += task.Usage.OutputTokens
		cards.TotalTokens += task.Usage.TotalTokens
	}
	sub := usage.Subagents
	if sub.InputTokens != cards.InputTokens || sub.OutputTokens != cards.OutputTokens || sub.TotalTokens != cards.TotalTokens {
		t.Errorf("the ledger's subagents %+v, the cards' sum %+v", sub, cards)
	}
	if usage.Total.TotalTokens != usage.Lead.TotalTokens+cards.TotalTokens {
		t.Errorf("the thread's total %d, the lead %d plus the cards %d", usage.Total.TotalTokens, usage.Lead.TotalTokens, cards.TotalTokens)
	}

	aiSteps, leadAI := int64(0), int64(0)
	for _, e := range evs {
		if e.EventType == "subagent.step" && e.Content.Kind == "ai" {
			aiSteps++
		}
	}
	for _, m := range state.Messages {
		if m.Type == "ai" {
			leadAI++
		}
	}
	lostSub, lostLead := int64(0), int64(0)
	for i, at := range open {
		for _, inFlight := range at {
			if inFlight {
				lostSub++
			}
		}
		if leadCalling(evs, state, i) {
			lostLead++
		}
	}
	t.Logf("ledger: %d subagent calls (%d lost), %d lead calls (%d lost); %d tokens", sub.Calls, sub.LostCalls, usage.Lead.Calls, usage.Lead.LostCalls, usage.Total.TotalTokens)
	if sub.LostCalls != lostSub || usage.Lead.LostCalls != lostLead {
		t.Errorf("lost calls: subagents %d, lead %d; the kills cut %d and %d", sub.LostCalls, usage.Lead.LostCalls, lostSub, lostLead)
	}
	if usage.Total.LostCalls < 1 {
		t.Error("no lost call: the kill found no model call in flight")
	}
	if sub.Calls != aiSteps+sub.LostCalls || usage.Lead.Calls != leadAI+usage.Lead.LostCalls {
		t.Errorf("calls: subagents %d for %d AI steps and %d lost, lead %d for %d answers and %d lost",
			sub.Calls, aiSteps, sub.LostCalls, usage.Lead.Calls, leadAI, usage.Lead.LostCalls)
	}
}

// leadCalling reports whether the lead's model call was in flight at the
// i-th run.resumed: its last answer before it had calls, all answered.
func leadCalling(evs []matrixEvent, state matrixThread, i int) bool {
	at := int64(0)
	for _, e := range evs {
		if e.EventType == "run.resumed" {
			if i == 0 {
				at = e.Seq
				break
			}
			i--
		}
	}
	var calls []toolCallID
	answered, answers := map[string]bool{}, 0
	for _, m := range state.Messages {
		if m.Seq > at {
			break
		}
		switch m.Type {
		case "ai":
			answers++
			calls = nil
			_ = json.Unmarshal(m.ToolCalls, &calls)
			clear(answered)
		case "tool":
			answered[m.ToolCallID] = true
		}
	}
	// No answer yet: its first call was in flight.
	return answers == 0 || len(calls) > 0 && !slices.ContainsFunc(calls, func(c toolCallID) bool { return !answered[c.ID] })
}

type toolCallID struct {
	ID string `json:"id"`
}
