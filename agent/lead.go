package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"herd/agent/event"
	"herd/models"
)

// History reads a thread's messages for the lead's prompt; models.Store
// implements it.
type History interface {
	Messages(ctx context.Context, threadID string) ([]models.Message, error)
	// Runs lists the thread's runs, oldest first: which replaced what.
	Runs(ctx context.Context, threadID string) ([]models.Run, error)
}

// runEnv is what every run needs, built once by New and read-only after
// (but for the shared persist bound): where to persist and stream, the
// lead's tools, the executor for task calls, a clock and ids. Runs hold
// it, never the Runtime.
type runEnv struct {
	exec      *executor
	journal   Journal
	history   History
	pub       Publisher
	lead      LeadConfig
	wsRoot    string
	log       *slog.Logger
	now       func() time.Time
	newID     func() string
	persistTO time.Duration
	bound     atomic.Pointer[persistBound] // persistShared
	// strays runs the lead's tool and model calls; one that outlives a
	// Stop by the cancel grace is abandoned, so a Stop always ends the run.
	strays *strays
	// images keeps the images tools return; nil keeps none.
	images *ToolImages
	// decodes holds a slot per attached image being decoded (maxDecodes).
	decodes chan struct{}
}

type nopPublisher struct{}

func (nopPublisher) Publish(string, string, event.Frame) {}

// workspace returns the thread's workspace directory, creating it.
func (env *runEnv) workspace(threadID string) (string, error) {
	dir, err := WorkspaceDir(env.wsRoot, threadID)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("agent: workspace: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("agent: workspace: %w", err)
	}
	return abs, nil
}

// persistCtx bounds a write that must happen even when ctx was cancelled
// (a run's start and end, a title's ledger row).
func (env *runEnv) persistCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), env.persistTO)
}

// persistBound is a context that ends persistTO after it was made.
type persistBound struct {
	ctx     context.Context
	cancel  context.CancelFunc // not called: the deadline releases it
	renewAt time.Time
}

// persistShared bounds the writes of runs and tasks, which must happen
// even after a Stop (a step, a ledger row, a task's end, a run's end): the
// Writer waits at most persistTO for room in its queue. One context serves
// every such write made within an eighth of persistTO, so the bound is
// between 7/8 of persistTO and persistTO: a context, its timer and its
// done channel per write were ~10% of a task hand-off's allocations
// (BenchmarkTaskHandoff, docs/PERFORMANCE.md). Nothing reads its values.
func (env *runEnv) persistShared() context.Context {
	now := time.Now()
	if b := env.bound.Load(); b != nil && now.Before(b.renewAt) {
		return b.ctx
	}
	b := &persistBound{renewAt: now.Add(env.persistTO / 8)}
	b.ctx, b.cancel = context.WithTimeout(context.Background(), env.persistTO)
	env.bound.Store(b)
	return b.ctx
}

// run is one user message and everything the lead does for it.
type run struct {
	env *runEnv
	// ending is set once the run writes its end (Runtime.claimWhenEnded).
	ending atomic.Bool
	box    *toolbox // with or without commands
	// rebox, when set, gives the toolbox for the next model call: the
	// MCP tools may have changed meanwhile.
	rebox func(*toolbox) *toolbox
	// release frees the thread for its next run; the runtime sets it.
	release  func(*run)
	id       string
	threadID string
	userID   string
	model    *Model
	// maxTurns is lead.max_turns as the run started (Runtime.SetLimits).
	maxTurns int
	ctx      context.Context
	cancel   context.CancelCauseFunc
	done     chan struct{}

	workspace string
	tasks     atomic.Int32 // task calls dispatched, for max_total_per_run
	// held are the task calls the per-response limit refused that no
	// later call continues yet (agent/continues.go).
	held heldCalls
	// retryOf and editOf are what the run replaces (StartRequest).
	retryOf, editOf string
	// parent is the run it follows, versions the versions of its answer
	// when it starts another (Runtime.place).
	parent   string
	versions []string
	// continues: a Continue of the stopped run retryOf; continued then
	// holds its answer so far.
	continues bool
	// commands and admin are what the run was granted (StartRequest).
	commands, admin bool
	// resumed, when set, is what a restart left open of the run: the
	// loop finishes it before its next model call (agent/resume.go).
	resumed *resumePlan
	// thinking, when set, is the lead's last AI message as its checkpoint
	// kept it, with the signed reasoning the thread's messages do not
	// hold (a resumed run).
	thinking *Message
	// continued, when set, is the answer a restart cut off while it
	// streamed: the run's first call continues it (a resumed run).
	continued *openAnswer
	// turnsUsed are the lead's turns before a restart (a resumed run):
	// lead.max_turns counts them too.
	turnsUsed int
	// lease is what the run was claimed under (Options.Lease); zero on
	// SQLite.
	lease models.Fence
	// budget is its user's token budget (StartRequest.Budget); nil: none.
	budget *budgetGuard

	// sink is where the run and its tasks write (events, messages,
	// ledger rows, tools' live output) and what holds its usage.
	sink *runSink
}

// logger is the run's logger.
func (r *run) logger() *slog.Logger { return r.sink.logger() }

// newSink is the sink of run runID of own's thread: what of env its
// writes need, and its usage book.
func (env *runEnv) newSink(own owner, runID string) *runSink {
	threadID := own.threadID
	return &runSink{
		threadID: threadID, userID: own.userID, runID: runID,
		journal: env.journal, shared: env.persistShared, newID: env.newID, pub: env.pub, images: env.images, baseLog: env.log,
		usage: map[string]*models.UsageEntry{}, watch: newWorkspaceWatch(env.log.With("thread", threadID, "run", runID)),
	}
}

// begin persists the run row, run.start and the user's message with its
// attachments; a run that answers an earlier message again (retryOf) has
// none of its own.
func (r *run) begin(ctx context.Context, msgID, content string, atts []Attachment) error {
	ws, err := r.env.workspace(r.threadID)
	if err != nil {
		return err
	}
	r.workspace = ws
	now := r.env.now().UTC()
	start, err := eventRecord(r.threadID, "", RunStart{RunID: r.id, ModelName: r.model.Config.Name, RetryOf: r.retryOf, EditOf: r.editOf, Continue: r.continues, Versions: r.versions, Commands: r.commands, Admin: r.admin})
	if err != nil {
		return err
	}
	recs := []models.Record{
		{Run: &models.Run{ID: r.id, ThreadID: r.threadID, UserID: r.userID, Status: models.RunRunning, ModelName: r.model.Config.Name, StartedAt: now, RetryOf: r.retryOf, EditOf: r.editOf, ParentRun: r.parent, Continues: r.continues}},
		start,
	}
	if r.retryOf == "" {
		recs = append(recs, models.Record{Message: &models.Message{ID: msgID, ThreadID: r.threadID, RunID: r.id, Type: TypeHuman, Content: content, AdditionalKwargs: humanKwargs(atts)}})
	}
	if err = r.env.journal.Write(ctx, recs...); err != nil {
		return fmt.Errorf("agent: start run: %w", err)
	}
	return nil
}

// loop is the lead loop (docs/DESIGN.md §3): model call → tool calls (in parallel)
// → results → next call, until a response without tool calls.
func (r *run) loop() {
	defer close(r.done)
	log := r.logger()
	var e ending
	switch p := r.resumed; {
	case p != nil && p.final:
		// Resumed after its answer was written: it only ends.
		r.resumed = nil
		e = ending{status: models.RunCompleted}
	case p != nil && !r.finishOpen(p):
		e = ending{status: models.RunCancelled}
	default:
		e = r.converse(log)
	}
	if cause := context.Cause(r.ctx); cause != nil && e.status != models.RunCompleted {
		e = stopped(cause)
	}
	r.end(e)
	r.cancel(nil)
	r.release(r)
	log.Info("run ended", "status", e.status, "error", e.err)
}

// ending is how a run ended: its status, the error the API and the log
// show, the notice the thread shows in plain words (RunEnd.Notice) and,
// for a failed model call, its kind (RunEnd.ErrorKind).
type ending struct {
	status, err, notice, kind string
	cut                       bool   // the answer stopped at the model's output limit
	stop                      string // budget: the user's token budget stopped it
}

func failed(errText, notice string) ending {
	return ending{status: models.RunFailed, err: errText, notice: notice}
}

// stopped is the ending of a run whose context was cancelled: a Stop, or
// the server shutting down.
func stopped(cause error) ending {
	if errors.Is(cause, ErrShuttingDown) {
		return ending{status: models.RunCancelled, err: "interrupted: server shutting down", notice: "The server shut down before this answer was finished."}
	}
	if errors.Is(cause, ErrReleased) {
		// Never written (the journal refuses it): for the log.
		return ending{status: models.RunCancelled, err: "released for resuming", notice: ""}
	}
	if errors.Is(cause, ErrLeaseTaken) {
		// Never written (the database refuses it): for the log.
		return ending{status: models.RunCancelled, err: "interrupted: another instance took the run over", notice: ""}
	}
	return ending{status: models.RunCancelled, err: "", notice: "Stopped by you."}
}

func (r *run) converse(log *slog.Logger) ending {
	stored, err := r.prompt()
	if err != nil {
		log.Error("load history", "err", err)
		return failed("could not load the conversation", "herd could not read this conversation from its database.")
	}
	msgs := append([]Message{{Type: TypeSystem, Content: r.box.prompt}}, replayable(stored)...)
	r.present(msgs)
	if r.thinking != nil {
		// Resumed within a turn of tool use: its signed reasoning goes
		// back to the provider as it came (agent/checkpoint.go).
		keepThinking(msgs, *r.thinking)
		r.thinking = nil
	}
	var trimmed *fitReport // the latest call of the run that left turns out
	for turn := 1 + r.turnsUsed; turn <= r.maxTurns; turn++ {
		if r.budget.spent() {
			// The calls of the last turn, its subagents' included, have
			// finished: no further one starts (docs/DESIGN.md §6).
			return ending{status: models.RunCancelled, err: "token budget used up", notice: BudgetNotice(r.budget.ResetsAt), stop: stopBudget}
		}
		msgID, call, before := r.env.newID(), msgs, partial{}
		if c := r.continued; c != nil {
			r.continued = nil
			msgID, call, before = c.id, continuing(msgs, c.text), partial{text: c.text, reasoning: c.reasoning}
			// Where the answer stands, for an instance whose page had it
			// already and one whose page did not.
			r.env.pub.Publish(r.threadID, r.id, event.Delta{MessageID: msgID, Text: c.text, Reset: true})
		}
		resp, fit, streamed, err := r.complete(msgID, call)
		streamed = partial{text: before.text + streamed.text, reasoning: before.reasoning + streamed.reasoning}
		resp.Text, resp.Reasoning = before.text+resp.Text, before.reasoning+resp.Reasoning
		if fit.Trimmed() {
			trimmed = &fit
		}
		if err != nil {
			// What was streamed stays, marked: the user saw it.
			byUser := errors.Is(context.Cause(r.ctx), errStopped)
			r.keepPartial(msgID, streamed, trimmed, byUser)
			if r.ctx.Err() != nil {
				return ending{status: models.RunCancelled}
			}
			log.Warn("lead model call failed", "err", err, "model", r.model.Config.Name)
			f := FailureOf(err, r.model.Config)
			return ending{status: models.RunFailed, err: err.Error(), notice: f.Notice, kind: f.Kind}
		}
		// The call's ledger row commits with its answer (keepUsage).
		used := r.sink.keepUsage("", r.model.Config.Name, resp)
		ai := Message{Type: TypeAI, Content: resp.Text, ToolCalls: resp.ToolCalls, Thinking: resp.Thinking}
		final := len(resp.ToolCalls) == 0
		// The links go with the calls, so a page joins a continuing call
		// to its held card before any of its events (docs/DESIGN.md §9).
		kwargs := answerKwargs(answerState{final: final, cut: final && resp.Cut}, trimmed, resp.Reasoning, r.held.link(resp.ToolCalls))
		if err := r.sink.persist(&models.Message{
			ID: msgID, Type: TypeAI, Content: resp.Text, ToolCalls: toolCallsJSON(resp.ToolCalls),
			// The herd model's name, as on the run and the cards, so that the
			// meta line can show its display name; the provider's own name
			// for it (which may carry a date) stays in the ledger and logs.
			Usage: usageJSON(resp.Usage), ModelName: r.model.Config.Name,
			AdditionalKwargs: kwargs,
		}, r.sink.answerRecords(used, ai)...); err != nil {
			r.sink.writeUsage(used) // the call was made: counted all the same
			log.Error("persist ai message", "err", err)
			return failed("could not save the answer", "herd could not save the answer to its database.")
		}
		msgs = append(msgs, ai)
		if final {
			if strings.TrimSpace(resp.Text) == "" {
				return failed("No response generated", "The model returned an empty answer.")
			}
			if resp.Cut {
				return ending{status: models.RunCompleted, cut: true, notice: CutNotice}
			}
			return ending{status: models.RunCompleted}
		}
		results := r.runTools(resp.ToolCalls)
		msgs = append(msgs, results...)
		if r.ctx.Err() != nil {
			return ending{status: models.RunCancelled}
		}
	}
	return failed(fmt.Sprintf("the lead reached lead.max_turns (%d) without a final answer", r.maxTurns),
		fmt.Sprintf("The lead stopped after %d turns without a final answer (lead.max_turns).", r.maxTurns))
}

// prompt is the thread's stored messages the lead's prompt replays:
// without what later runs replaced (Replaced), this run's own replaced
// answer included.
func (r *run) prompt() ([]models.Message, error) {
	stored, err := r.env.history.Messages(r.ctx, r.threadID)
	if err != nil {
		return nil, err
	}
	runs, err := r.env.history.Runs(r.ctx, r.threadID)
	if err != nil {
		return nil, err
	}
	return ReplacedIn(runs).Prompt(stored), nil
}

// complete makes one call of the lead's model, streaming its text and,
// apart, its reasoning as message msgID, and returns the response and
// what was streamed so far. A provider that ignores a Stop is abandoned
// after the cancel grace, as a stuck tool is (strays).
func (r *run) complete(msgID string, msgs []Message) (Response, fitReport, partial, error) {
	var mu sync.Mutex // an abandoned call may stream on
	var text, reasoning strings.Builder
	// Each batch is kept before it is shown (answerStream): a restart
	// continues the answer from what the page showed. Reasoning goes out
	// before text, the order the model wrote in.
	stream := newAnswerStream(
		func(t, rs string) error { return r.sink.keepStreamed(msgID, t, rs) },
		func(t, rs string) {
			if rs != "" {
				r.env.pub.Publish(r.threadID, r.id, event.Reasoning{MessageID: msgID, Text: rs})
			}
			if t != "" {
				r.env.pub.Publish(r.threadID, r.id, event.Delta{MessageID: msgID, Text: t})
			}
		})
	gather := func(b *strings.Builder, write func(string)) func(string) {
		return func(d string) {
			mu.Lock()
			b.WriteString(d)
			mu.Unlock()
			write(d)
		}
	}
	req := Request{Model: r.model.Config.Model, Messages: msgs, Tools: r.box.specs, OnReasoning: gather(&reasoning, stream.writeReasoning)}
	ctx := withModelWait(r.ctx, r.emitWaiting)
	resp, fit, err := callFitted(ctx, r.env.strays, r.logger(), r.model, req, gather(&text, stream.writeText))
	stream.close()
	if fit.Trimmed() {
		r.logger().Info("left turns out to fit the context window", "model", r.model.Config.Name, "sent", fit.Sent, "total", fit.Total)
	}
	mu.Lock()
	defer mu.Unlock()
	return resp, fit, partial{text: text.String(), reasoning: reasoning.String()}, err
}

// continuing is msgs with the answer so far and ContinueNote after them:
// the call that continues an answer a restart cut off. An answer with no
// text yet (only reasoning was streamed) is simply asked again.
func continuing(msgs []Message, text string) []Message {
	if strings.TrimSpace(text) == "" {
		return msgs
	}
	return append(slices.Clip(msgs), Message{Type: TypeAI, Content: text}, Message{Type: TypeHuman, Content: ContinueNote})
}

// partial is what a call streamed before it ended.
type partial struct{ text, reasoning string }

// answerState is how an AI message ended: final (the run's answer),
// stopped by the user, or incomplete (cut off by a failure or a
// shutdown); a stopped or incomplete answer is what was streamed.
type answerState struct{ final, stopped, incomplete, cut bool }

// answerKwargs is an AI message's additional_kwargs: stopped for an answer
// the user stopped, incomplete for one a failure cut off, on a run's
// answer (final, or cut off) the note that turns were left out of the
// run's requests (docs/API.md), and the model's reasoning as
// reasoning_content (LangChain's key for it): kept for the page, never
// replayed to a model (replayable), and the held task calls its calls
// continue (kwargTaskContinues).
func answerKwargs(st answerState, trimmed *fitReport, reasoning string, continues map[string]string) models.JSON {
	kw := map[string]any{}
	if len(continues) > 0 {
		kw[kwargTaskContinues] = continues
	}
	if st.stopped {
		kw["stopped"] = true
	}
	if st.incomplete {
		kw["incomplete"] = true
	}
	if st.cut {
		kw["cut"] = true // at the model's output limit: Continue goes on
	}
	if reasoning = strings.TrimSpace(reasoning); reasoning != "" {
		kw["reasoning_content"] = reasoning
	}
	if trimmed != nil && (st.final || st.stopped || st.incomplete) {
		kw[kwargContextTrimmed] = map[string]int{"sent": trimmed.Sent, "total": trimmed.Total}
	}
	if len(kw) == 0 {
		return nil
	}
	return models.MustJSON(kw)
}

// kwargContextTrimmed is the additional_kwargs key of the note.
const kwargContextTrimmed = "context_trimmed"

// kwargToolOutput is the additional_kwargs key of a lead's tool call's
// images and log lines (ToolOutput).
const kwargToolOutput = "tool_output"

// emitWaiting shows that the lead's model call waits for a slot of its
// model, or has got one (withModelWait); nothing once the run is stopping.
func (r *run) emitWaiting(waiting bool) {
	if r.ctx.Err() == nil {
		r.sink.emit("", RunWait{RunID: r.id, Waiting: waiting})
	}
}

// keepPartial saves what was streamed of an answer that did not finish,
// so a reload shows what the user saw, its reasoning included: marked
// stopped when the user stopped it, incomplete when a failure or a
// shutdown cut it off.
func (r *run) keepPartial(msgID string, p partial, trimmed *fitReport, byUser bool) {
	if strings.TrimSpace(p.text) == "" && strings.TrimSpace(p.reasoning) == "" {
		return
	}
	err := r.sink.persist(&models.Message{
		ID: msgID, Type: TypeAI, Content: p.text, ModelName: r.model.Config.Name,
		AdditionalKwargs: answerKwargs(answerState{stopped: byUser, incomplete: !byUser}, trimmed, p.reasoning, nil),
	})
	if err != nil {
		r.logger().Error("persist partial answer", "err", err)
	}
}

// runTools executes one response's tool calls in parallel and persists each
// result as it arrives. Task calls beyond max_concurrent_per_response or
// max_total_per_run are refused with their own failed ToolMessage.
func (r *run) runTools(calls []ToolCall) []Message {
	out := make([]Message, len(calls))
	var wg sync.WaitGroup
	perResponse := 0
	for i, call := range calls {
		if call.Name == ToolTask {
			perResponse++
			if refusal := r.admitTask(perResponse); refusal != nil {
				if refusal.Reason == RefusedPerResponse {
					r.held.hold(call)
				}
				out[i] = r.finishTask(call, refused(refusal), nil)
				continue
			}
		}
		if call.Name != ToolTask {
			wg.Go(func() {
				result, output := r.runTool(call)
				out[i] = r.finishTool(call, result, output)
			})
			continue
		}
		asked := make(chan struct{})
		wg.Go(func() {
			o, release := r.env.exec.delegate(r.scope(), call, sync.OnceFunc(func() { close(asked) }))
			out[i] = r.finishTask(call, o, release)
		})
		// The next task asks for its slot once this one has: one user's
		// subagents start in the order they were asked for (docs/DESIGN.md
		// §5), those of one response too.
		<-asked
	}
	wg.Wait()
	if r.rebox != nil {
		r.box = r.rebox(r.box)
	}
	return out
}

// admitTask is the refusal of the nth task call of a response, nil when
// the call may start.
func (r *run) admitTask(nthInResponse int) *Refusal {
	cfg := r.env.exec.cfg
	if nthInResponse > cfg.MaxConcurrentPerResponse {
		return &Refusal{Reason: RefusedPerResponse, Limit: int64(cfg.MaxConcurrentPerResponse)}
	}
	if n := r.tasks.Add(1); int(n) > cfg.MaxTotalPerRun {
		return &Refusal{Reason: RefusedPerRun, Limit: int64(cfg.MaxTotalPerRun)}
	}
	return nil
}

// runTool runs one of the lead's tools (strays.runTool), and says what
// it showed beside its result (callOutput).
func (r *run) runTool(call ToolCall) (string, *ToolOutput) {
	t, ok := r.box.tools.Get(call.Name)
	if !ok {
		return fmt.Sprintf("Error: unknown tool %q. Available: %s", call.Name, strings.Join(append(r.box.tools.Names(), ToolTask), ", ")), nil
	}
	out := r.sink.callOutput("", call.ID)
	changed := r.sink.watchCall(r.ctx, "", r.workspace, t, call.Args)
	result := r.env.strays.runTool(r.ctx, r.logger(), t, out.env(r.workspace, r.userID, r.id), call)
	changed()
	return result, out.finish()
}

// finishTool persists a tool's ToolMessage; what it showed beside its
// result is additional_kwargs.tool_output, for the page only.
func (r *run) finishTool(call ToolCall, result string, output *ToolOutput) Message {
	m := Message{Type: TypeTool, Content: result, ToolCallID: call.ID, Name: call.Name}
	var kwargs models.JSON
	if output != nil {
		kwargs = models.MustJSON(map[string]any{kwargToolOutput: output})
	}
	if err := r.sink.persist(&models.Message{ID: r.env.newID(), Type: TypeTool, Content: result, ToolCallID: call.ID, Name: call.Name, AdditionalKwargs: kwargs}); err != nil {
		r.logger().Error("persist tool message", "tool", call.Name, "err", err)
	}
	return m
}

// finishTask hands a task call's outcome to the lead. An execution has
// already persisted its ToolMessage with its end (deliver), so release
// only lets the executor forget it; a call refused before any execution
// (release nil: a limit, bad arguments, an unknown type) is persisted here.
func (r *run) finishTask(call ToolCall, o Outcome, release func()) Message {
	var content string
	if release != nil {
		release()
		content = r.sink.taskContent(call.ID, o) // the metadata went with the end
	} else {
		var kwargs taskKwargs
		content, kwargs = r.sink.taskOutcome(call.ID, o)
		if err := r.sink.persist(r.sink.taskMessage(call.ID, content, kwargs, o)); err != nil {
			r.logger().Error("persist task result", "task", call.ID, "err", err)
		}
	}
	return Message{Type: TypeTool, Content: content, ToolCallID: call.ID, Name: ToolTask}
}

// scope is what the executor needs of this run for a task call.
func (r *run) scope() taskScope {
	return taskScope{budget: r.budget, ctx: r.ctx, runID: r.id, userID: r.userID, threadID: r.threadID, model: r.model, models: r.box.models, workspace: r.workspace, agents: &r.box.agents, box: r.box, rebox: r.rebox, log: r.logger(), sink: r.sink}
}

// end writes the run's final status and run.end.
func (r *run) end(e ending) {
	r.ending.Store(true)
	now := r.env.now().UTC()
	totals := r.sink.totals()
	ev, err := eventRecord(r.threadID, "", RunEnd{RunID: r.id, Status: e.status, Error: e.err, Notice: e.notice, ErrorKind: e.kind, Cut: e.cut, StopReason: e.stop, Usage: &totals})
	if err != nil {
		r.logger().Error("run.end outside the contract", "err", err)
		return
	}
	ctx, cancel := r.env.persistCtx(r.ctx)
	defer cancel()
	err = r.env.journal.Write(ctx,
		models.Record{Run: &models.Run{ID: r.id, ThreadID: r.threadID, UserID: r.userID, Status: e.status, ModelName: r.model.Config.Name, Error: e.err, EndedAt: &now, RetryOf: r.retryOf, EditOf: r.editOf, ParentRun: r.parent, Continues: r.continues}},
		ev,
	)
	if err != nil {
		r.logger().Error("persist run end", "err", err)
	}
}

func toolCallsJSON(calls []ToolCall) models.JSON {
	if len(calls) == 0 {
		return nil
	}
	return models.MustJSON(calls)
}

func usageJSON(u *Usage) models.JSON {
	if u == nil {
		return nil
	}
	return models.MustJSON(u)
}

// replayable converts stored messages into the lead's prompt history in
// the shape providers require: each AI message is followed by the results
// of its tool calls, in call order. A call without a result (a run cut off
// by a crash) reads as interrupted; a result without a call is dropped.
// Tool-call ids may repeat across runs, so results are matched within
// their run.
func replayable(stored []models.Message) []Message {
	results := map[string]models.Message{}
	for _, m := range stored {
		if m.Type == TypeTool {
			results[callKey(m.RunID, m.ToolCallID)] = m
		}
	}
	var out []Message
	for _, m := range stored {
		switch m.Type {
		case TypeHuman:
			out = append(out, Message{Type: TypeHuman, Content: m.Content, attached: AttachmentsOf(&m)})
		case TypeAI:
			var calls []ToolCall
			if len(m.ToolCalls) > 0 {
				_ = json.Unmarshal(m.ToolCalls, &calls)
			}
			out = append(out, Message{Type: TypeAI, Content: m.Content, ToolCalls: calls})
			for _, c := range calls {
				res, ok := results[callKey(m.RunID, c.ID)]
				content := res.Content
				if !ok {
					content = "Error: no result (the run was interrupted)."
				}
				out = append(out, Message{Type: TypeTool, ToolCallID: c.ID, Name: c.Name, Content: content})
			}
		}
	}
	return out
}
