package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"herd/agent/tools"
	"herd/models"
)

// TestSubagentCheckpoint: while a subagent runs, the checkpoint pieces
// committed with its steps add up to exactly the conversation its next
// model call is sent (after the system prompt): its prompt, each AI
// message whole with its tool calls and signed reasoning, each tool
// result whole, though the steps shown are cut at 8,192 characters. The
// run's end deletes them.
func TestSubagentCheckpoint(t *testing.T) {
	long := strings.Repeat("a finding that goes on; ", 800) // past the steps' cap
	var (
		mu        sync.Mutex
		sent      []Message
		kept      []Message
		readErr   error
		harnessOf func() *harness
		runID     string
	)
	llm := llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
		if isLead(req) {
			if usedTurns(req) == 0 {
				return reply("", nil, taskCall("t1", "look", "general-purpose")), nil
			}
			return reply("ok", nil), nil
		}
		switch usedTurns(req) {
		case 0:
			r := reply(long, nil, ToolCall{ID: "c1", Name: "list_dir", Args: json.RawMessage(`{"path":"."}`)})
			r.Thinking = []ThinkingBlock{{Thinking: "look first", Signature: "sig-1"}}
			return r, nil
		case 1:
			return reply("then read", nil, ToolCall{ID: "c2", Name: "read_file", Args: json.RawMessage(`{"path":"missing.md"}`)}), nil
		}
		h := harnessOf()
		if err := h.writer.Flush(ctx); err != nil {
			return Response{}, err
		}
		mu.Lock()
		defer mu.Unlock()
		sent = append([]Message(nil), req.Messages[1:]...)
		runs, err := h.store.RunningRuns(ctx)
		if err != nil || len(runs) != 1 {
			readErr = fmt.Errorf("running runs %v, %v", runs, err)
			return reply("done", nil), nil
		}
		runID = runs[0].ID
		cs, err := h.store.Checkpoints(ctx, runID)
		if err != nil {
			readErr = err
		}
		for _, c := range cs {
			b, err := c.Data()
			if err != nil {
				readErr = err
				break
			}
			var ms []Message
			if err := json.Unmarshal(b, &ms); err != nil || c.Format != checkpointFormat {
				readErr = err
				break
			}
			kept = append(kept, ms...)
		}
		return reply("done", nil), nil
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("gpt", llm)}})
	harnessOf = func() *harness { return h }
	h.run("go")
	mu.Lock()
	defer mu.Unlock()
	if readErr != nil {
		t.Fatal(readErr)
	}
	a, _ := json.Marshal(sent)
	b, _ := json.Marshal(kept)
	if len(sent) != 5 || string(a) != string(b) {
		t.Fatalf("the checkpoint holds\n%s\nthe model was sent\n%s", b, a)
	}
	if cs, err := h.store.Checkpoints(context.Background(), runID); err != nil || len(cs) != 0 {
		t.Errorf("after the run's end: %d pieces, %v; want none", len(cs), err)
	}
}

// TestRunEventsCarryTheirRun: every event of a run is stored with its run
// id, which the run's queries (resume's count of run.resumed) and the
// writer's fence read.
func TestRunEventsCarryTheirRun(t *testing.T) {
	for _, ev := range []Event{
		RunStart{RunID: "r", ModelName: "m"},
		RunEnd{RunID: "r", Status: "completed"},
		RunWait{RunID: "r"},
		RunResumed{RunID: "r", Resumes: 1, Cause: ResumeRestart},
		WorkspaceChanged{RunID: "r", Changes: []FileChange{{Path: "a"}}},
	} {
		rec, err := eventRecord("th", "", ev)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Event.RunID != "r" {
			t.Errorf("%s stored with run %q, want r", ev.EventType(), rec.Event.RunID)
		}
	}
	if n := len(payloadTypes); n != 10 {
		t.Errorf("%d event types: give a new one its case in runIDOf and here", n)
	}
}

// TestCallCommitsWithItsStep: a model call's ledger row is in the
// journal's job of what it produced — a subagent's AI step (and its
// checkpoint piece), the lead's answer — which commits whole, so that a
// kill between two commits cannot keep the row of a call whose answer a
// resume makes again (docs/DESIGN.md §11).
func TestCallCommitsWithItsStep(t *testing.T) {
	var (
		mu   sync.Mutex
		jobs [][]models.Record
	)
	u := &Usage{InputTokens: 3, OutputTokens: 2, TotalTokens: 5}
	h := newHarness(t, harnessConfig{
		jobs: func(recs []models.Record) {
			mu.Lock()
			jobs = append(jobs, recs)
			mu.Unlock()
		},
		models: []*Model{model("m", split(
			func(ctx context.Context, req Request) (Response, error) {
				if usedTurns(req) == 0 {
					return reply("", u, taskCall("a", "a", SubagentGeneral), taskCall("b", "b", SubagentGeneral), taskCall("c", "c", SubagentGeneral)), nil
				}
				return reply("summary", u), nil
			},
			func(ctx context.Context, req Request) (Response, error) {
				if n := usedTurns(req); n < 3 {
					return reply("looking", u, ToolCall{ID: fmt.Sprintf("ls%s%d", lastHuman(req), n), Name: tools.Ls, Args: []byte(`{}`)}), nil
				}
				return reply("done", u), nil
			},
		))},
	})
	h.run("go")
	mu.Lock()
	defer mu.Unlock()
	rows := 0
	for _, recs := range jobs {
		for _, r := range recs {
			if r.Usage == nil {
				continue
			}
			rows++
			with := slices.ContainsFunc(recs, func(o models.Record) bool {
				if r.Usage.TaskID == "" {
					return o.Message != nil && o.Message.Type == TypeAI
				}
				st, ok := o.Payload.(TaskStep)
				return ok && o.Event.TaskID == r.Usage.TaskID && st.Kind == stepAI
			})
			if !with {
				t.Errorf("the ledger row of call %s (task %q) is written without its step or answer", r.Usage.CallID, r.Usage.TaskID)
			}
		}
	}
	if rows != 2+3*3 {
		t.Errorf("%d ledger rows written, want 11", rows)
	}
}

// TestLeadThinkingResumed: a run released (as a deploy's stop does) while
// its lead's next call is in flight, after a turn of tool use whose
// reasoning the provider signed, is resumed by another runtime on the same
// database: the call made again carries that signed reasoning back, as
// the provider requires within a turn of tool use; the thread's messages
// alone do not hold it.
func TestLeadThinkingResumed(t *testing.T) {
	signed := []ThinkingBlock{{Thinking: "list first", Signature: "sig-lead"}}
	first := llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
		if usedTurns(req) == 0 {
			r := reply("", nil, ToolCall{ID: "c1", Name: "ls", Args: json.RawMessage(`{"path":"."}`)})
			r.Thinking = signed
			return r, nil
		}
		<-ctx.Done() // in flight when the process stops
		return Response{}, ctx.Err()
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("gpt", first)}})
	h.start("look")
	h.until("the tool's result", func(recs []models.Record) bool {
		return slices.ContainsFunc(recs, func(r models.Record) bool { return r.Message != nil && r.Message.Type == TypeTool })
	})
	if _, err := h.rt.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	sent := make(chan Request, 1)
	second := llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
		select {
		case sent <- req:
		default:
		}
		return reply("done", nil), nil
	})
	rt, _ := h.resumeOn(second, 5, nil)
	req := <-sent
	var ai *Message
	for i := range req.Messages {
		if req.Messages[i].Type == TypeAI {
			ai = &req.Messages[i]
		}
	}
	if ai == nil || len(ai.Thinking) != 1 || ai.Thinking[0].Signature != "sig-lead" {
		t.Fatalf("the resumed call's AI message %+v; want the signed reasoning back", ai)
	}
	if err := rt.Wait(context.Background(), h.thread); err != nil {
		t.Fatal(err)
	}
}

// TestLeadAnswerContinued: a run released while its answer streams is
// resumed by another runtime on the same database. The answer goes on
// under the same message id from exactly the text the page was shown:
// the continuing call gets that text and ContinueNote, the page's text
// is reset to it and grows, the saved answer is that text followed by
// the rest, and the cut call is a lost call of the ledger.
func TestLeadAnswerContinued(t *testing.T) {
	pub := &streamed{text: map[string]string{}, reasoning: map[string]string{}}
	first := llmFunc(func(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
		req.OnReasoning("thinking it over")
		onDelta("The answer ")
		onDelta("begins")
		<-ctx.Done() // in flight when the process stops
		return Response{}, ctx.Err()
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("gpt", first)}, publisher: pub})
	h.start("ask")
	h.until("the streamed text kept", func(recs []models.Record) bool {
		return slices.ContainsFunc(recs, func(r models.Record) bool {
			b, _ := checkpointData(r)
			return strings.Contains(string(b), "begins")
		})
	})
	if _, err := h.rt.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	pub.mu.Lock()
	var msgID string
	for id, text := range pub.text {
		msgID = id
		if text != "The answer begins" {
			t.Errorf("shown %q before the restart", text)
		}
	}
	pub.mu.Unlock()

	sent := make(chan Request, 1)
	second := llmFunc(func(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
		select {
		case sent <- req:
		default:
		}
		onDelta(" and ends.")
		return Response{CallID: "c2", Text: " and ends.", Reasoning: ""}, nil
	})
	rt, _ := h.resumeOn(second, 5, pub)
	req := <-sent
	n := len(req.Messages)
	if n < 2 || req.Messages[n-2].Type != TypeAI || req.Messages[n-2].Content != "The answer begins" ||
		req.Messages[n-1].Type != TypeHuman || req.Messages[n-1].Content != ContinueNote {
		t.Fatalf("the continuing call ends with %+v; want the text so far and ContinueNote", req.Messages[max(n-2, 0):])
	}
	if err := rt.Wait(context.Background(), h.thread); err != nil {
		t.Fatal(err)
	}
	msgs, err := h.store.Messages(context.Background(), h.thread)
	if err != nil {
		t.Fatal(err)
	}
	var answers []models.Message
	for _, m := range msgs {
		if m.Type == TypeAI {
			answers = append(answers, m)
		}
	}
	const want = "The answer begins and ends."
	if len(answers) != 1 || answers[0].ID != msgID || answers[0].Content != want {
		t.Fatalf("saved answers %+v; want one, id %s, %q", answers, msgID, want)
	}
	if !strings.Contains(string(answers[0].AdditionalKwargs), "thinking it over") {
		t.Errorf("the answer's reasoning %s lost what was streamed before the restart", answers[0].AdditionalKwargs)
	}
	pub.mu.Lock()
	if got := pub.text[msgID]; got != want {
		t.Errorf("the page shows %q, want %q", got, want)
	}
	pub.mu.Unlock()
	u, err := h.store.Usage(context.Background(), h.thread, "")
	if err != nil || u.Total.LostCalls != 1 {
		t.Errorf("usage %+v, %v: want the cut call as one lost call", u.Total, err)
	}
	// The lost call bills the run's user, as every ledger row does.
	hist, err := h.store.UsageHistory(context.Background(), time.Now(), 1)
	if err != nil || len(hist.ByUser) != 1 || hist.ByUser[0].Key != "u1" || hist.ByUser[0].Total.LostCalls != 1 {
		t.Errorf("the admin's history per user is %+v, %v: want the lost call under u1", hist.ByUser, err)
	}
}

// checkpointData is a record's checkpoint piece, uncompressed.
func checkpointData(r models.Record) ([]byte, error) {
	if r.Checkpoint == nil {
		return nil, nil
	}
	return r.Checkpoint.Data()
}

// TestAnswerCommitsWithTheEnd: a subagent's answer step commits in the
// commit of its task's end, with its ledger row and no checkpoint piece
// (an ended task is never resumed), so the task hand-off waits for one
// commit; the steps before it keep their pieces.
func TestAnswerCommitsWithTheEnd(t *testing.T) {
	var (
		mu      sync.Mutex
		batches [][]models.Record
	)
	llm := llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
		switch {
		case !isLead(req) && usedTurns(req) == 0:
			return reply("", &Usage{InputTokens: 3, OutputTokens: 2, TotalTokens: 5}, ToolCall{ID: "ls1", Name: "ls", Args: json.RawMessage(`{"path":"."}`)}), nil
		case !isLead(req):
			return reply("the sub's answer", &Usage{InputTokens: 3, OutputTokens: 2, TotalTokens: 5}), nil
		case usedTurns(req) == 0:
			return reply("", nil, taskCall("t1", "look", "general-purpose")), nil
		}
		return reply("done", nil), nil
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("m", llm)}, onCommit: func(recs []models.Record) {
		mu.Lock()
		batches = append(batches, slices.Clone(recs))
		mu.Unlock()
	}})
	h.run("go")
	mu.Lock()
	defer mu.Unlock()
	var pieces int
	for _, b := range batches {
		var end, answer, usage, tool bool
		for _, r := range b {
			if r.Checkpoint != nil && r.Checkpoint.TaskID == "t1" {
				pieces++
				if d, _ := r.Checkpoint.Data(); strings.Contains(string(d), "the sub's answer") {
					t.Error("the answer's step has a checkpoint piece")
				}
			}
			if r.Usage != nil && r.Usage.TaskID == "t1" {
				usage = true
			}
			if r.Message != nil && r.Message.Type == TypeTool && r.Message.ToolCallID == "t1" {
				tool = true
			}
			if r.Event == nil || r.Event.TaskID != "t1" {
				continue
			}
			switch p, _ := PayloadOf(r.Event); e := p.(type) {
			case TaskEnd:
				end = true
			case TaskStep:
				answer = answer || (e.Kind == stepAI && e.Text == "the sub's answer")
			}
		}
		if end != answer || (end && !(usage && tool)) {
			t.Errorf("a commit with the end %v, the answer's step %v, its ledger row %v, the ToolMessage %v: want all or none", end, answer, usage, tool)
		}
	}
	if pieces != 3 { // the prompt, the call of ls, its result
		t.Errorf("%d pieces for task t1, want 3", pieces)
	}
}

// TestResumedLeadKeepsItsTurnBudget: lead.max_turns counts the turns a
// run took before a restart; resuming does not start the count again.
func TestResumedLeadKeepsItsTurnBudget(t *testing.T) {
	ls := func(id string) Response {
		return reply("", nil, ToolCall{ID: id, Name: "ls", Args: json.RawMessage(`{"path":"."}`)})
	}
	first := llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
		if usedTurns(req) == 0 {
			return ls("c1"), nil
		}
		<-ctx.Done() // in flight when the process stops
		return Response{}, ctx.Err()
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("gpt", first)}})
	h.start("look")
	h.until("the tool's result", func(recs []models.Record) bool {
		return slices.ContainsFunc(recs, func(r models.Record) bool { return r.Message != nil && r.Message.Type == TypeTool })
	})
	if _, err := h.rt.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	second := llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
		return ls(fmt.Sprintf("c%d", 2+calls.Add(1))), nil // never a final answer
	})
	rt, run := h.resumeOn(second, 3, nil)
	if err := rt.Wait(context.Background(), h.thread); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d calls after the restart, want 2: the run had taken 1 of its 3 turns", n)
	}
	if row := h.runRow(run.ID); row == nil || row.Status != models.RunFailed || !strings.Contains(row.Error, "max_turns") {
		t.Errorf("run %+v, want failed at lead.max_turns", row)
	}
}

// resumeOn resumes the harness's one running run on a new runtime with
// llm for its model, as a herd started again on the same database does
// (its lead allowed maxTurns, its frames to pub when set), and returns
// that runtime and the run's row.
func (h *harness) resumeOn(llm llmFunc, maxTurns int, pub Publisher) (*Runtime, models.Run) {
	h.t.Helper()
	rt, err := New(Options{Models: []*Model{model("gpt", llm)}, Subagents: defaultSubagents(), Lead: LeadConfig{MaxTurns: maxTurns},
		WorkspaceRoot: h.t.TempDir(), Tools: tools.Workspace(), Journal: h.writer, History: h.store, Claims: h.store, Publisher: pub,
		Resume: ResumeConfig{Enabled: true, MaxResumes: 3}})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	runs, err := h.store.RunningRuns(context.Background())
	if err != nil || len(runs) != 1 {
		h.t.Fatalf("running runs %v, %v", runs, err)
	}
	if resumed, _, err := rt.Continue(context.Background(), h.store, runs, ResumeRestart); err != nil || resumed != 1 {
		h.t.Fatalf("resumed %d, %v", resumed, err)
	}
	return rt, runs[0]
}
