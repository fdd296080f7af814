package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"herd/agent/tools"
	"herd/models"
)

// Resuming a run (docs/DESIGN.md §11): a run left running by a crash, a
// deploy or a lost instance continues from what its log and checkpoints
// hold, instead of being closed. The lead's history is the thread's
// messages; each subagent's is its checkpoint pieces. What was in flight
// when the process died is settled first: a model call is made again
// (the lost one is a ledger row of its own, usage unknown), a repeatable
// tool call runs again, any other gets a result that says its outcome
// is unknown, a task continues with the same task id and version
// sequence, a queued task queues again in its order.

// ResumeConfig is the runs: section: whether runs resume after a restart
// or a failover, and how often one run may (a crash loop ends it).
type ResumeConfig struct {
	Enabled    bool
	MaxResumes int
}

// ResumeStore is what resuming reads; models.Store implements it.
type ResumeStore interface {
	RecoveryStore
	Checkpoints(ctx context.Context, runID string) ([]models.Checkpoint, error)
	Usage(ctx context.Context, threadID, runID string) (models.UsageReport, error)
}

// Why a run resumes (RunResumed.Cause).
const (
	ResumeRestart  = "restart"
	ResumeFailover = "failover"
)

// interruptedCall is the result of a call a restart cut off that is not
// run again: nobody knows whether it took effect.
const interruptedCall = "Error: interrupted by a server restart; the outcome is unknown — check before repeating."

// resumePlan is what a restart left open of a run, for its loop to
// finish before its next model call (run.finishOpen).
type resumePlan struct {
	calls []ToolCall            // the lead's last AI message's calls without a result
	tasks map[string]*openState // their tasks' states, by task id (none: never dispatched)
	lost  time.Duration
	cause string
	// resumes counts the run's resumptions, this one included: a call
	// cut again after a resume is a lost call of its own (lostCall keys).
	resumes int64
	// final: the lead's answer was written before the restart; the run
	// only ends.
	final bool
}

// Continue settles runs left running, at start (cause ResumeRestart, its
// own) or on failover (ResumeFailover, a lost instance's, which the
// caller has taken over): resumed when runs.resume is on, else closed as
// interrupted (Recover, Failover). A run that cannot resume is closed
// too, saying why: resumed runs.max_resumes times, a checkpoint format
// this herd does not know, a model no longer configured. It returns how
// many it resumed and how many it closed.
func (rt *Runtime) Continue(ctx context.Context, st ResumeStore, runs []models.Run, cause string) (resumed, closed int, err error) {
	for _, row := range runs {
		why := ""
		if rt.resume.Enabled {
			if why, err = rt.resumeRun(ctx, st, row, cause); err != nil {
				return resumed, closed, fmt.Errorf("agent: resume run %s: %w", row.ID, err)
			}
			if why == "" {
				resumed++
				rt.log.Warn("resumed a run", "cause", cause, "thread", row.ThreadID, "run", row.ID)
				continue
			}
		}
		if err := rt.closeRun(ctx, st, row, cause, why); err != nil {
			return resumed, closed, err
		}
		closed++
	}
	return resumed, closed, nil
}

// resumeRun resumes one run, or says why it cannot ("" when it did).
func (rt *Runtime) resumeRun(ctx context.Context, st ResumeStore, row models.Run, cause string) (string, error) {
	evs, _, err := st.Events(ctx, row.ThreadID, models.EventFilter{RunID: row.ID})
	if err != nil {
		return "", err
	}
	var (
		start   *RunStart
		resumes int64 = 1
		last    time.Time
	)
	for i := range evs {
		last = later(last, evs[i].CreatedAt)
		switch evs[i].EventType {
		case eventRunStart:
			if p, err := PayloadOf(&evs[i]); err == nil {
				s := p.(RunStart)
				start = &s
			}
		case eventRunResumed:
			resumes++
		}
	}
	if start == nil {
		return "its start was never written", nil
	}
	if max := rt.resume.MaxResumes; resumes > int64(max) {
		return fmt.Sprintf("resumed %d times: runs.max_resumes is %d", resumes-1, max), nil
	}
	pieces, err := st.Checkpoints(ctx, row.ID)
	if err != nil {
		return "", err
	}
	histories, why := decodeCheckpoints(pieces)
	if why != "" {
		return why, nil
	}
	cat := rt.cat.Load()
	model, err := cat.model(row.ModelName)
	if err != nil {
		return fmt.Sprintf("its model %q is no longer configured", row.ModelName), nil
	}
	msgs, err := st.Messages(ctx, row.ThreadID)
	if err != nil {
		return "", err
	}
	turns := 0
	for _, m := range msgs {
		if m.RunID == row.ID {
			last = later(last, m.CreatedAt)
			if m.Type == TypeAI {
				turns++
			}
		}
	}
	box, err := rt.toolbox(ctx, cat, start.Commands, start.Admin)
	if err != nil {
		return "", err
	}
	base, err := st.Usage(ctx, row.ThreadID, row.ID)
	if err != nil {
		return "", err
	}
	req := StartRequest{ThreadID: row.ThreadID, UserID: row.UserID, Commands: start.Commands, Admin: start.Admin, RetryOf: row.RetryOf, EditOf: row.EditOf, Continue: row.Continues}
	r := rt.newRun(req, model, box)
	r.id = row.ID
	r.parent = row.ParentRun
	r.sink = rt.runEnv.newSink(owner{r.threadID, r.userID}, r.id)
	r.sink.base = base
	if r.budget, err = rt.resumedBudget(ctx, r.userID, r.sink); err != nil {
		return "", err
	}
	if rt.lease != nil {
		r.lease = rt.lease()
	}
	if rt.mcp != nil {
		r.rebox = func(b *toolbox) *toolbox { return rt.refresh(b, cat, req.Commands, req.Admin, r.logger()) }
	}
	if r.workspace, err = rt.runEnv.workspace(r.threadID); err != nil {
		return "", err
	}
	plan := &resumePlan{tasks: map[string]*openState{}, lost: rt.now().Sub(last), cause: cause, resumes: resumes}
	open, dispatched := taskStates(evs)
	lead := leadTurn(msgs, row.ID)
	switch {
	case lead.final:
		plan.final = true // its answer was written: the run only ends
	case len(lead.open) > 0:
		plan.calls = lead.open
		for _, t := range open {
			if slices.ContainsFunc(lead.open, func(c ToolCall) bool { return c.ID == t.intro.TaskID }) {
				t.history = history(histories[t.intro.TaskID])
				plan.tasks[t.intro.TaskID] = t
			}
		}
	}
	resumedEv, err := eventRecord(r.threadID, "", RunResumed{RunID: r.id, Resumes: resumes, LostMS: max(plan.lost.Milliseconds(), 0), Cause: cause})
	if err != nil {
		return "", err
	}
	// Claimed here before anything is written: the thread is this run's
	// (whatever the user's count: the run was admitted once already).
	if err := rt.claimResumed(r); err != nil {
		return "", err
	}
	if err := rt.journal.Write(ctx, resumedEv); err != nil {
		rt.release(r)
		r.cancel(nil)
		return "", err
	}
	if !plan.final && len(plan.calls) == 0 {
		// The lead was calling its model (or about to): that call is lost.
		r.sink.recordLost(models.LostCall(r.threadID, r.userID, r.id, "", model.Config.Name, fmt.Sprintf("s%d.r%d", lead.seq, resumes)))
	}
	r.tasks.Store(int32(dispatched))
	r.held = heldIn(msgs, row.ID)
	if kept := history(histories[""]); len(kept) > 0 {
		r.thinking = &kept[len(kept)-1]
	}
	if !plan.final && len(plan.calls) == 0 {
		// Cut off while it streamed its answer: the answer goes on from
		// what the page showed.
		r.continued = cutAnswer(histories[""], func(id string) bool {
			return slices.ContainsFunc(msgs, func(m models.Message) bool { return m.ID == id })
		})
	}
	r.resumed = plan
	r.turnsUsed = turns
	rt.wg.Go(r.loop)
	return "", nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// decodeCheckpoints is each task's history from its pieces, or why they
// cannot be read; the lead's ("") holds its signed reasoning and its
// streamed batches (typeStreamed).
func decodeCheckpoints(pieces []models.Checkpoint) (map[string][]streamedPiece, string) {
	out := map[string][]streamedPiece{}
	for i := range pieces {
		c := &pieces[i]
		if !knownFormat(c.Format) {
			return nil, fmt.Sprintf("its checkpoint is of format %d, which this herd version does not know", c.Format)
		}
		b, err := c.Data()
		if err != nil {
			return nil, "its checkpoint cannot be read"
		}
		var ms []streamedPiece
		if err := json.Unmarshal(b, &ms); err != nil {
			return nil, "its checkpoint cannot be read"
		}
		out[c.TaskID] = append(out[c.TaskID], ms...)
	}
	return out, ""
}

// history is a task's conversation from its pieces.
func history(pieces []streamedPiece) []Message {
	out := make([]Message, 0, len(pieces))
	for _, p := range pieces {
		if p.Type != typeStreamed {
			out = append(out, p.Message)
		}
	}
	return out
}

// leadOpen is where the lead's last turn of a run stands as stored:
// after its last AI message (seq, 0 before any), with the calls of that
// message that have no result (open), or its final answer written.
type leadOpen struct {
	seq   int64
	open  []ToolCall
	final bool
}

// leadTurn is the run's lead turn as the thread's messages hold it.
func leadTurn(msgs []models.Message, runID string) leadOpen {
	var (
		t        leadOpen
		answered map[string]bool
	)
	for _, m := range msgs {
		if m.RunID != runID {
			continue
		}
		switch m.Type {
		case TypeAI:
			var calls []ToolCall
			if len(m.ToolCalls) > 0 {
				_ = json.Unmarshal(m.ToolCalls, &calls)
			}
			var kw struct{ Incomplete, Stopped bool }
			if len(m.AdditionalKwargs) > 0 {
				_ = json.Unmarshal(m.AdditionalKwargs, &kw)
			}
			t = leadOpen{seq: m.Seq, open: calls, final: len(calls) == 0 && !kw.Incomplete && !kw.Stopped}
			answered = map[string]bool{}
		case TypeTool:
			answered[m.ToolCallID] = true
		}
	}
	t.open = slices.DeleteFunc(t.open, func(c ToolCall) bool { return answered[c.ID] })
	return t
}

// finishOpen settles what a restart left open of the lead's last turn,
// before the loop's next model call: each task call's execution goes on
// (or starts, if it never did), a repeatable tool runs again, any other
// call gets interruptedCall. It reports whether the run may go on.
func (r *run) finishOpen(p *resumePlan) bool {
	r.resumed = nil
	// Queued tasks queue again in their first order: by the version
	// sequence they were dispatched in, running ones first.
	calls := slices.Clone(p.calls)
	slices.SortStableFunc(calls, func(a, b ToolCall) int {
		sa, sb := p.tasks[a.ID], p.tasks[b.ID]
		return cmp.Compare(queueRank(sa), queueRank(sb))
	})
	var wg sync.WaitGroup
	for _, call := range calls {
		if call.Name != ToolTask {
			wg.Go(func() {
				t, ok := r.box.tools.Get(call.Name)
				if ok && tools.IsRepeatable(t) {
					result, output := r.runTool(call)
					r.finishTool(call, result, output)
					return
				}
				r.finishTool(call, interruptedCall, nil)
			})
			continue
		}
		s := p.tasks[call.ID]
		asked := make(chan struct{})
		wg.Go(func() {
			var o Outcome
			var release func()
			ask := sync.OnceFunc(func() { close(asked) })
			if s == nil {
				o, release = r.env.exec.delegate(r.scope(), call, ask)
			} else {
				o, release = r.env.exec.resume(r.scope(), call, s, p, ask)
			}
			r.finishTask(call, o, release)
		})
		// The next task asks for its slot once this one has: admission
		// is first come, first served.
		<-asked
	}
	wg.Wait()
	return r.ctx.Err() == nil
}

// queueRank orders open tasks: running ones first, then queued ones by
// version (their dispatch order), then those never dispatched.
func queueRank(s *openState) int64 {
	switch {
	case s == nil:
		return 1 << 62
	case s.started:
		return 0
	}
	return s.version
}

// resume continues a task a restart cut off, with the same task id,
// execution id and version sequence (docs/DESIGN.md §11): from its
// checkpoint when it had started, from admission when it was queued.
//
// asked is called once the task has asked for its slot (or will not).
func (x *executor) resume(s taskScope, call ToolCall, st *openState, p *resumePlan, asked func()) (Outcome, func()) {
	defer asked()
	args, spec, refused := taskSpec(s, call)
	if refused != nil {
		return *refused, nil
	}
	e := x.newExecution(s, call.ID, args, spec)
	e.ID, e.version, e.steps = cmp.Or(st.intro.ExecutionID, e.ID), st.version, st.steps
	e.log = s.log.With("task", call.ID, "execution", e.ID)
	e.collector.seed(st.usage)
	x.reg.add(e)
	release := func() { x.reg.delivered(e) }
	defer e.cancel(errTaskOver)
	if !st.started || len(st.history) == 0 {
		// Queued, or started before checkpoints were kept: it starts
		// over from its prompt (it made no call a checkpoint would hold).
		e.asked = asked
		x.admit(e)
		return x.await(e, spec), release
	}
	history, open, lost := splitHistory(st.history)
	if lost {
		row := models.LostCall(s.threadID, s.userID, s.runID, call.ID, e.ModelName, fmt.Sprintf("v%d.r%d", st.version, p.resumes))
		s.sink.recordLost(row)
	}
	e.admittedAt = st.startedAt // wall time: the timeout runs across the restart
	w, ok := x.slots.tryAcquire(e.userID)
	asked()
	if !ok {
		x.queued.Add(1)
		err := x.slots.wait(e.ctx, e.userID, w)
		x.queued.Add(-1)
		if err != nil {
			e.finish(Outcome{Status: StatusCancelled})
			return x.await(e, spec), release
		}
	}
	e.emitResumed(p)
	if !time.Now().Before(e.admittedAt.Add(spec.timeout)) {
		x.slots.release(e.userID)
		e.finish(Outcome{Status: StatusTimedOut, Error: executionTimedOut(spec.timeout)})
		return x.await(e, spec), release
	}
	if last := history[len(history)-1]; last.Type == TypeAI && len(last.ToolCalls) == 0 && len(open) == 0 {
		// Its answer was written and the restart came before its end.
		x.slots.release(e.userID)
		e.finish(Outcome{Status: StatusCompleted, Result: last.Content})
		return x.await(e, spec), release
	}
	x.start(e, func(ctx context.Context) Outcome { return e.executeFrom(ctx, history, open) })
	return x.await(e, spec), release
}

// splitHistory is a subagent's checkpoint: its messages, the calls of
// its last AI message without a result (open), and whether a model call
// was in flight (lost): the history ends with its prompt or a result.
func splitHistory(h []Message) (history []Message, open []ToolCall, lost bool) {
	answered := map[string]bool{}
	lastAI := -1
	for i, m := range h {
		switch m.Type {
		case TypeAI:
			lastAI = i
			clear(answered)
		case TypeTool:
			answered[m.ToolCallID] = true
		}
	}
	if lastAI < 0 {
		return h, nil, true
	}
	for _, c := range h[lastAI].ToolCalls {
		if !answered[c.ID] {
			open = append(open, c)
		}
	}
	last := h[len(h)-1]
	lost = len(open) == 0 && (last.Type == TypeTool || last.Type == TypeHuman) && len(h[lastAI].ToolCalls) > 0
	return h, open, lost
}

// emitResumed writes the card's step that says it continued, and how
// long it was gone.
func (e *execution) emitResumed(p *resumePlan) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if isTerminal(e.status()) {
		return
	}
	e.setStateLocked(StatusRunning)
	e.steps++
	text := ResumedStepText(p.cause, p.lost.Milliseconds())
	st := TaskStep{TaskRef: e.nextRefLocked(), MessageIndex: e.steps, StepBody: StepBody{Kind: stepResumed, Text: text, LostMS: max(p.lost.Milliseconds(), 0)}, ModelName: e.ModelName, Usage: e.collector.Snapshot()}
	e.sink.emit(e.TaskID, st)
}

// claimResumed makes r, a run resumed, its thread's active run.
func (rt *Runtime) claimResumed(r *run) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch {
	case rt.closed:
		return ErrShuttingDown
	case rt.active[r.threadID] != nil:
		return ErrRunActive
	}
	rt.active[r.threadID] = r
	rt.byUser[r.userID]++
	return nil
}

// releasable is the runtime's journal: once released (Runtime.Release)
// it refuses every record of a run, so a run stopped for a deploy keeps
// the state of its last commit for whoever resumes it. A thread's title
// call (no run) still writes.
type releasable struct {
	Journal
	released *atomic.Bool
}

func (j releasable) Write(ctx context.Context, recs ...models.Record) error {
	if j.refuses(recs) {
		return ErrReleased
	}
	return j.Journal.Write(ctx, recs...)
}

func (j releasable) Enqueue(ctx context.Context, recs ...models.Record) error {
	if j.refuses(recs) {
		return ErrReleased
	}
	return j.Journal.Enqueue(ctx, recs...)
}

func (j releasable) refuses(recs []models.Record) bool {
	return j.released.Load() && slices.ContainsFunc(recs, func(r models.Record) bool { return r.RunID() != "" })
}
