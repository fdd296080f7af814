package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Defaults of SPEC §4.4 and §4.5.
const (
	defaultGeneralMaxTurns = 100
	defaultBashMaxTurns    = 40
	defaultCustomMaxTurns  = 100
	defaultCustomTimeout   = 900
)

// catalogEntry is one subagent type the lead may choose.
type catalogEntry struct {
	name        string
	description string
}

// subagentSpec is a subagent type with its configuration resolved.
type subagentSpec struct {
	name         string
	description  string
	systemPrompt string
	tools        *Toolset
	model        string // "inherit" or a model name
	maxTurns     int
	timeout      time.Duration
	tokenBudget  int64
}

// Executor runs subagents: admission, the two timeout layers, cancellation
// and the registry of executions (SPEC §4.5).
type Executor struct {
	rt     *Runtime
	cfg    SubagentsConfig
	specs  map[string]*subagentSpec
	order  []string
	slots  *semaphore.Weighted // FIFO: waiters are admitted in arrival order
	reg    *Registry
	wg     sync.WaitGroup // subagent goroutines
	queued atomic.Int64
	// janitorGrace is janitorGrace; tests shorten it.
	janitorGrace time.Duration
}

func newExecutor(rt *Runtime, cfg SubagentsConfig) (*Executor, error) {
	if cfg.MaxRunning <= 0 {
		cfg.MaxRunning = 32
	}
	if cfg.MaxConcurrentPerResponse <= 0 {
		cfg.MaxConcurrentPerResponse = 4
	}
	if cfg.MaxTotalPerRun <= 0 {
		cfg.MaxTotalPerRun = 12
	}
	if cfg.QueueTimeoutSeconds <= 0 {
		cfg.QueueTimeoutSeconds = 600
	}
	if cfg.TimeoutSeconds <= 0 {
		cfg.TimeoutSeconds = 1800
	}
	if cfg.LoopLimit < 2 {
		cfg.LoopLimit = 3
	}
	if cfg.CancelGraceSeconds <= 0 {
		cfg.CancelGraceSeconds = 5
	}
	x := &Executor{
		rt:    rt,
		cfg:   cfg,
		specs: map[string]*subagentSpec{},
		slots: semaphore.NewWeighted(int64(cfg.MaxRunning)),
		reg:   NewRegistry(),

		janitorGrace: janitorGrace,
	}
	if err := x.buildSpecs(); err != nil {
		return nil, err
	}
	return x, nil
}

// buildSpecs resolves every subagent type with the precedence of SPEC §4.4:
// subagents.agents.<name>.<field> > global subagents.timeout_seconds
// (built-ins only) > the agent's own default.
func (x *Executor) buildSpecs() error {
	all := x.rt.tools
	globalTurns := func(def int) int {
		if x.cfg.MaxTurns != nil {
			return *x.cfg.MaxTurns
		}
		return def
	}
	override := func(spec *subagentSpec, ac AgentConfig) {
		if ac.Model != "" {
			spec.model = ac.Model
		}
		if ac.MaxTurns != nil {
			spec.maxTurns = *ac.MaxTurns
		}
		if ac.TimeoutSeconds != nil {
			spec.timeout = time.Duration(*ac.TimeoutSeconds) * time.Second
		}
		if ac.TokenBudget != nil {
			spec.tokenBudget = *ac.TokenBudget
		}
	}
	builtinTimeout := time.Duration(x.cfg.TimeoutSeconds) * time.Second

	gp := &subagentSpec{
		name:         SubagentGeneral,
		description:  "A capable general agent with every tool you have except task. Use it for independent research, writing or analysis.",
		systemPrompt: "You are a subagent of herd. Complete the task you are given on your own, using your tools, then reply with a complete, self-contained final answer in Markdown. You cannot ask questions.",
		tools:        all.Filter(nil, []string{ToolTask}),
		model:        "inherit",
		maxTurns:     globalTurns(defaultGeneralMaxTurns),
		timeout:      builtinTimeout,
	}
	override(gp, x.cfg.Agents[SubagentGeneral])
	x.add(gp)

	if _, ok := all.Get(ToolBash); ok {
		b := &subagentSpec{
			name:         SubagentBash,
			description:  "Runs shell commands in the thread's workspace and reports their output. Use it for builds, tests and scripts.",
			systemPrompt: "You are a command-execution subagent of herd. Run the commands the task needs with the bash tool in the workspace, then reply with what they printed and whether they succeeded.",
			tools:        all.Filter(&[]string{ToolBash, ToolLs, ToolReadFile, ToolWriteFile, ToolStrReplace}, nil),
			model:        "inherit",
			maxTurns:     globalTurns(defaultBashMaxTurns),
			timeout:      builtinTimeout,
		}
		override(b, x.cfg.Agents[SubagentBash])
		x.add(b)
	}

	names := make([]string, 0, len(x.cfg.Agents))
	for n := range x.cfg.Agents {
		if n != SubagentGeneral && n != SubagentBash {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		ac := x.cfg.Agents[n]
		deny := []string{ToolTask}
		if ac.DisallowedTools != nil {
			deny = append(deny, *ac.DisallowedTools...)
		}
		spec := &subagentSpec{
			name:         n,
			description:  ac.Description,
			systemPrompt: ac.SystemPrompt,
			tools:        all.Filter(ac.Tools, deny),
			model:        "inherit",
			maxTurns:     globalTurns(defaultCustomMaxTurns),
			timeout:      defaultCustomTimeout * time.Second,
		}
		override(spec, ac)
		if spec.model != "inherit" {
			if _, ok := x.rt.models[spec.model]; !ok {
				return fmt.Errorf("agent: subagents.agents.%s.model: unknown model %q", n, spec.model)
			}
		}
		x.add(spec)
	}
	return nil
}

func (x *Executor) add(s *subagentSpec) {
	if s.model == "" {
		s.model = "inherit"
	}
	if s.systemPrompt == "" {
		s.systemPrompt = "You are a subagent of herd. Complete the task on your own and reply with a complete final answer."
	}
	x.specs[s.name] = s
	x.order = append(x.order, s.name)
}

func (x *Executor) catalog() []catalogEntry {
	out := make([]catalogEntry, 0, len(x.order))
	for _, n := range x.order {
		out = append(out, catalogEntry{name: n, description: x.specs[n].description})
	}
	return out
}

// resolveModel returns the effective model: inherit → the lead's model for
// this run. Resolved once per dispatch and used for every call and event.
func (x *Executor) resolveModel(spec *subagentSpec, r *run) *Model {
	if spec.model != "inherit" {
		if m, ok := x.rt.models[spec.model]; ok {
			return m
		}
	}
	return r.model
}

// Sentinel causes that tell how an execution's context ended.
var (
	errTaskCancelled = errors.New("task cancelled by user")
	errSafetyNet     = errors.New("safety net: stopped waiting")
)

// delegate runs one task call to its terminal state and returns the outcome
// with a release func the caller calls once the ToolMessage is persisted.
// It blocks until the subagent is terminal, waiting on a signal.
func (x *Executor) delegate(r *run, call ToolCall) (Outcome, func()) {
	args, err := parseTaskArgs(call.Args)
	if err != nil {
		return Outcome{Status: StatusFailed, Error: err.Error()}, nil
	}
	spec, ok := x.specs[args.SubagentType]
	if !ok {
		return Outcome{Status: StatusFailed, Error: fmt.Sprintf("Unknown subagent type '%s'. Available: %s", args.SubagentType, strings.Join(x.order, ", "))}, nil
	}
	model := x.resolveModel(spec, r)
	e := newExecution(x, r, call.ID, args, spec, model)
	x.reg.add(e)
	release := func() { x.reg.delivered(e) }

	x.admit(e)
	if e.isTerminal() {
		<-e.done
		return e.outcome(), release
	}
	safety := time.NewTimer(time.Until(e.admittedAt.Add(spec.timeout + time.Duration(x.cfg.SafetyMarginSeconds)*time.Second)))
	defer safety.Stop()
	select {
	case <-e.done:
	case <-safety.C:
		e.cancel(errSafetyNet)
		e.finish(Outcome{Status: StatusPollingTimedOut, Error: fmt.Sprintf(
			"Task polling timed out: no terminal state within %d s (execution timeout %d s + %d s safety margin); the subagent was cancelled.",
			int((spec.timeout).Seconds())+x.cfg.SafetyMarginSeconds, int(spec.timeout.Seconds()), x.cfg.SafetyMarginSeconds)})
	case <-e.ctx.Done():
		// Stop or a per-task cancel: give the subagent a bounded grace to
		// write its own terminal state, then write it for it.
		grace := time.NewTimer(time.Duration(x.cfg.CancelGraceSeconds) * time.Second)
		select {
		case <-e.done:
		case <-grace.C:
			e.finish(Outcome{Status: StatusCancelled, Error: "the subagent did not stop within the cancel grace period"})
		}
		grace.Stop()
	}
	<-e.done
	return e.outcome(), release
}

// admit waits for a running slot in FIFO order, bounded by the queue
// timeout, then starts the subagent. On failure e is terminal.
func (x *Executor) admit(e *Execution) {
	if !x.slots.TryAcquire(1) {
		e.emitQueued()
		x.queued.Add(1)
		qctx, cancel := context.WithTimeout(e.ctx, time.Duration(x.cfg.QueueTimeoutSeconds)*time.Second)
		err := x.slots.Acquire(qctx, 1)
		cancel()
		x.queued.Add(-1)
		if err != nil {
			if e.ctx.Err() != nil {
				e.finish(Outcome{Status: StatusCancelled})
			} else {
				e.finish(Outcome{Status: StatusTimedOut, Error: fmt.Sprintf(
					"Queue timed out after %d seconds waiting for a free subagent slot (subagents.max_running = %d)", x.cfg.QueueTimeoutSeconds, x.cfg.MaxRunning)})
			}
			return
		}
	}
	e.admittedAt = x.rt.now()
	e.emitStarted()
	execCtx, cancel := context.WithDeadline(e.ctx, e.admittedAt.Add(e.spec.timeout))
	x.wg.Go(func() {
		defer x.slots.Release(1)
		defer cancel()
		o := e.execute(execCtx)
		e.decidedAt = time.Now()
		e.finish(o)
	})
}

func (x *Executor) cancelTask(runID, taskID string) bool {
	found := false
	for _, e := range x.reg.byRun(runID) {
		if e.TaskID == taskID && !e.isTerminal() {
			e.cancel(errTaskCancelled)
			found = true
		}
	}
	return found
}

// wait blocks until every subagent goroutine has returned.
func (x *Executor) wait() { x.wg.Wait() }

// close disarms the janitors of whatever the registry still holds; at
// shutdown nothing is left to deliver to.
func (x *Executor) close() {
	for _, e := range x.reg.all() {
		x.reg.delivered(e)
	}
}

// Stats is a point-in-time view of the executor, for metrics.
type Stats struct {
	Registry int
	Queued   int64
	ByStatus map[string]int
}

// Stats reports the registry size, queued subagents and executions by
// status.
func (rt *Runtime) Stats() Stats {
	x := rt.exec
	st := Stats{Queued: x.queued.Load(), ByStatus: map[string]int{}}
	for _, e := range x.reg.all() {
		st.Registry++
		st.ByStatus[e.status()]++
	}
	return st
}

// Registry holds live executions by execution id. An entry is removed once
// its terminal state has been delivered (the ToolMessage persisted).
type Registry struct {
	mu     sync.Mutex
	byExec map[string]*Execution
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{byExec: map[string]*Execution{}} }

func (g *Registry) add(e *Execution) {
	g.mu.Lock()
	g.byExec[e.ID] = e
	g.mu.Unlock()
}

// delivered removes e once its terminal state reached the lead.
func (g *Registry) delivered(e *Execution) {
	e.mu.Lock()
	if e.janitor != nil {
		e.janitor.Stop()
	}
	e.mu.Unlock()
	g.mu.Lock()
	delete(g.byExec, e.ID)
	g.mu.Unlock()
}

// janitorGrace is how long a terminal execution may wait for its delivery
// before the janitor removes it (the lead's goroutine died, say).
const janitorGrace = 2 * time.Minute

// scheduleJanitor arms the removal of a terminal execution that is never
// delivered; delivered disarms it.
func (g *Registry) scheduleJanitor(e *Execution, grace time.Duration) {
	e.janitor = time.AfterFunc(grace, func() {
		g.mu.Lock()
		_, still := g.byExec[e.ID]
		delete(g.byExec, e.ID)
		g.mu.Unlock()
		if still {
			e.log.Warn("janitor removed a terminal execution that was never delivered")
		}
	})
}

func (g *Registry) all() []*Execution {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*Execution, 0, len(g.byExec))
	for _, e := range g.byExec {
		out = append(out, e)
	}
	return out
}

func (g *Registry) byRun(runID string) []*Execution {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*Execution
	for _, e := range g.byExec {
		if e.RunID == runID {
			out = append(out, e)
		}
	}
	return out
}

// Len is the number of live executions.
func (g *Registry) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.byExec)
}

// Execution is one dispatched task call: the registry entry and the state
// machine queued → running → exactly one terminal status.
type Execution struct {
	ID          string // server-generated execution id, the registry key
	TaskID      string // the LLM's tool-call id, the key for everything user-visible
	RunID       string
	ThreadID    string
	Description string
	Prompt      string
	Type        string
	ModelName   string // the effective model, resolved once

	x          *Executor
	run        *run
	spec       *subagentSpec
	model      *Model
	ctx        context.Context
	cancel     context.CancelCauseFunc
	collector  *Collector
	admittedAt time.Time
	log        *slog.Logger
	// decidedAt is when execute returned the outcome, just before finish
	// persists it. Only BenchmarkTaskHandoff reads it, to time the hand-off
	// from outcome to delegate's return (docs/PERFORMANCE.md); it is
	// written once, before done is closed.
	decidedAt time.Time

	mu      sync.Mutex
	state   string
	version int64
	steps   int
	final   Outcome
	done    chan struct{} // closed once the terminal state is set and persisted
	janitor *time.Timer   // removes the entry if it is never delivered
}

func newExecution(x *Executor, r *run, taskID string, args taskArgs, spec *subagentSpec, model *Model) *Execution {
	e := &Execution{
		ID:          x.rt.newID(),
		TaskID:      taskID,
		RunID:       r.id,
		ThreadID:    r.threadID,
		Description: args.Description,
		Prompt:      args.fullPrompt(),
		Type:        spec.name,
		ModelName:   model.Config.Name,
		x:           x,
		run:         r,
		spec:        spec,
		model:       model,
		collector:   NewCollector(),
		state:       StatusQueued,
		done:        make(chan struct{}),
	}
	e.ctx, e.cancel = context.WithCancelCause(r.ctx)
	e.log = r.logger().With("task", taskID, "execution", e.ID)
	return e
}

func (e *Execution) status() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state
}

func (e *Execution) isTerminal() bool { return IsTerminal(e.status()) }

// outcome is the terminal outcome; valid once done is closed.
func (e *Execution) outcome() Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.final
}

func (e *Execution) baseContent() map[string]any {
	return map[string]any{"task_id": e.TaskID, "execution_id": e.ID, "run_id": e.RunID, "version": e.version}
}

// emit validates and enqueues one event of this task. The caller holds
// e.mu, so versions and sequence numbers advance together and nothing is
// emitted after the terminal event.
func (e *Execution) emitLocked(eventType string, content map[string]any, wait bool) {
	rec, err := eventRecord(e.ThreadID, e.RunID, e.TaskID, eventType, content)
	if err != nil {
		e.log.Error("event rejected at the producer", "type", eventType, "err", err)
		return
	}
	ctx, cancel := e.x.rt.persistCtx(e.ctx)
	defer cancel()
	if wait {
		err = e.x.rt.journal.Write(ctx, rec)
	} else {
		err = e.x.rt.journal.Enqueue(ctx, rec)
	}
	if err != nil {
		e.log.Error("persist event", "type", eventType, "err", err)
	}
}

func (e *Execution) startContent() map[string]any {
	c := e.baseContent()
	c["description"] = e.Description
	c["prompt"] = e.Prompt
	c["subagent_type"] = e.Type
	c["model_name"] = e.ModelName
	return c
}

func (e *Execution) emitQueued() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.version++
	e.emitLocked(EventSubagentQueued, e.startContent(), false)
}

func (e *Execution) emitStarted() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if IsTerminal(e.state) {
		return
	}
	e.state = StatusRunning
	e.version++
	e.emitLocked(EventSubagentStart, e.startContent(), false)
}

// emitStep publishes one bounded step with the cumulative usage snapshot.
func (e *Execution) emitStep(kind, text string, calls []ToolCall, toolName string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if IsTerminal(e.state) {
		return
	}
	e.version++
	e.steps++
	c := e.baseContent()
	c["message_index"] = e.steps
	c["kind"] = kind
	c["text"], c["truncated"] = cut(text, EventTextCap)
	c["model_name"] = e.ModelName
	if kind == StepAI && len(calls) > 0 {
		list := make([]any, 0, len(calls))
		for _, tc := range calls {
			args, truncated := cut(string(tc.Args), EventTextCap)
			item := map[string]any{"name": tc.Name, "args": args}
			if truncated {
				item["args_truncated"] = true
			}
			list = append(list, item)
		}
		c["tool_calls"] = list
	}
	if kind == StepTool {
		c["tool_name"] = toolName
	}
	if u := e.collector.Snapshot(); u != nil {
		c["usage"] = u.asMap()
	}
	e.emitLocked(EventSubagentStep, c, false)
}

// finish sets the terminal state if none is set yet (the first terminal
// wins), persists subagent.end and then signals done, so whoever sees done
// also sees the payload and a committed end row. It reports whether this
// call won.
func (e *Execution) finish(o Outcome) bool {
	e.mu.Lock()
	if IsTerminal(e.state) {
		e.mu.Unlock()
		return false
	}
	o.ModelName = e.ModelName
	o.Usage = e.collector.Snapshot()
	if o.Status == StatusCancelled && o.Error == "" {
		if cause := context.Cause(e.ctx); cause != nil && errors.Is(cause, ErrShuttingDown) {
			o.Error = "interrupted: server shutting down"
		}
	}
	e.state = o.Status
	e.final = o
	e.version++
	c := e.baseContent()
	c["status"] = o.Status
	c["model_name"] = e.ModelName
	if o.Usage != nil {
		c["usage"] = o.Usage.asMap()
	}
	if o.StopReason != "" {
		c["stop_reason"] = o.StopReason
	}
	if r := strings.TrimSpace(o.Result); r != "" && o.Status == StatusCompleted {
		c["result"], c["result_truncated"] = cut(r, EventTextCap)
	}
	if msg := strings.TrimSpace(o.Error); msg != "" && o.Status != StatusCompleted {
		c["error"], c["error_truncated"] = cut(msg, EventTextCap)
	}
	e.emitLocked(EventSubagentEnd, c, true)
	e.x.reg.scheduleJanitor(e, e.x.janitorGrace)
	e.mu.Unlock()
	close(e.done)
	e.log.Info("subagent ended", "status", o.Status, "stop_reason", o.StopReason)
	return true
}
