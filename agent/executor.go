package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// executor runs subagents: admission, the two timeout layers, cancellation
// and the registry of executions (docs/DESIGN.md §5). It holds its
// configuration and a clock; what a task needs of its run, the models
// its type may name included, comes with each dispatch (taskScope).
type executor struct {
	cfg    SubagentsConfig
	slots  *admission // fair across users, FIFO within one
	reg    *registry
	wg     sync.WaitGroup // subagent goroutines
	strays *strays        // their tool and model calls
	queued atomic.Int64
	now    func() time.Time
	newID  func() string
	// janitorGrace is janitorGrace; tests shorten it.
	janitorGrace time.Duration
	// onEnd arms the janitor of a terminal execution; made once, not per
	// execution.
	onEnd func(*execution)
}

// taskScope is what a dispatch needs of the run that makes it.
type taskScope struct {
	ctx      context.Context // the run's: Stop cancels every task
	runID    string
	userID   string // whose slots the task takes
	threadID string
	model    *Model // the lead's model of the run: what inherit means
	// models are the run's catalog (docs/DESIGN.md §12): a model an
	// admin changed since the run started is not seen by its tasks.
	models    map[string]*Model
	workspace string
	agents    *specSet // the types the run may choose, tools as its toolbox has them
	box       *toolbox // the run's toolbox of agents
	rebox     func(*toolbox) *toolbox
	log       *slog.Logger
	sink      taskSink
	budget    *budgetGuard // the run's; nil: no budget
}

// newExecutor builds the executor; cfg has its defaults filled in
// (withDefaults).
func newExecutor(cfg SubagentsConfig, st *strays, now func() time.Time, newID func() string) *executor {
	x := &executor{
		cfg:    cfg,
		slots:  newAdmission(cfg.MaxRunning, cfg.MaxRunningPerUser),
		reg:    newRegistry(),
		strays: st,
		now:    now,
		newID:  newID,

		janitorGrace: janitorGrace,
	}
	x.onEnd = func(e *execution) { x.reg.scheduleJanitor(e, x.janitorGrace) }
	return x
}

// resolveModel returns the effective model: inherit → the lead's model for
// this run, a name → that model of the run's catalog. Resolved once per
// dispatch and used for every call and event.
func resolveModel(spec *subagentSpec, lead *Model, models map[string]*Model) *Model {
	if spec.model != "inherit" {
		if m, ok := models[spec.model]; ok {
			return m
		}
	}
	return lead
}

// taskSpec is a task call's arguments and the subagent type they name,
// or the failed outcome of a call that names none the run may use.
func taskSpec(s taskScope, call ToolCall) (taskArgs, *subagentSpec, *Outcome) {
	args, err := parseTaskArgs(call.Args)
	if err != nil {
		return args, nil, &Outcome{Status: StatusFailed, Error: err.Error()}
	}
	spec, ok := s.agents.byName[args.SubagentType]
	if !ok {
		return args, nil, &Outcome{Status: StatusFailed, Error: unknownSubagentType(args.SubagentType, s.agents.order)}
	}
	return args, spec, nil
}

// delegate runs one task call to its terminal state and returns the outcome
// with a release func the caller calls once the ToolMessage is persisted.
// It blocks until the subagent is terminal, waiting on a signal.
//
// asked is called once the task has asked admission for its slot (or
// will not), so that the caller dispatches the next one after it.
func (x *executor) delegate(s taskScope, call ToolCall, asked func()) (Outcome, func()) {
	defer asked()
	args, spec, refused := taskSpec(s, call)
	if refused != nil {
		return *refused, nil
	}
	e := x.newExecution(s, call.ID, args, spec)
	x.reg.add(e)
	release := func() { x.reg.delivered(e) }
	// Once it is terminal, the execution's context lets go of the run's:
	// until cancelled, a context stays among its parent's children, and
	// the run's would keep every task's (with its done channel and
	// children) until the run ends.
	defer e.cancel(errTaskOver)

	e.asked = asked
	x.admit(e)
	return x.await(e, spec), release
}

// await waits for an admitted execution to end: the task tool's safety
// net past the execution deadline, and a cancel's grace (docs/DESIGN.md
// §5).
func (x *executor) await(e *execution, spec *subagentSpec) Outcome {
	if e.isTerminal() {
		<-e.done
		return e.outcome()
	}
	safety := time.NewTimer(time.Until(e.admittedAt.Add(spec.timeout + time.Duration(x.cfg.SafetyMarginSeconds)*time.Second)))
	defer safety.Stop()
	select {
	case <-e.done:
	case <-safety.C:
		e.cancel(errSafetyNet)
		e.finish(Outcome{Status: StatusPollingTimedOut, Error: pollingTimedOut(spec.timeout, x.cfg.SafetyMarginSeconds)})
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
	return e.outcome()
}

// admit waits for a running slot, fairly across users and in FIFO order
// within one (admission), bounded by the queue timeout, then starts the
// subagent. On failure e is terminal.
func (x *executor) admit(e *execution) {
	w, ok := x.slots.tryAcquire(e.userID)
	if e.asked != nil {
		e.asked()
	}
	if !ok {
		e.emitQueued()
		x.queued.Add(1)
		qctx, cancel := context.WithTimeout(e.ctx, time.Duration(x.cfg.QueueTimeoutSeconds)*time.Second)
		err := x.slots.wait(qctx, e.userID, w)
		cancel()
		x.queued.Add(-1)
		if err != nil {
			if e.ctx.Err() != nil {
				e.finish(Outcome{Status: StatusCancelled})
			} else {
				e.finish(Outcome{Status: StatusTimedOut, Error: fmt.Sprintf(
					"Queue timed out after %d seconds waiting for a free subagent slot (subagents.max_running = %d, subagents.max_running_per_user = %d)",
					x.cfg.QueueTimeoutSeconds, x.cfg.MaxRunning, x.cfg.MaxRunningPerUser)})
			}
			return
		}
	}
	e.admittedAt = x.now()
	e.emitStarted()
	x.start(e, e.execute)
}

// start runs an admitted execution (holding its slot) until run returns,
// under its deadline: admittedAt plus its timeout, wall time, across a
// restart too.
func (x *executor) start(e *execution, run func(context.Context) Outcome) {
	execCtx, cancel := context.WithDeadline(e.ctx, e.admittedAt.Add(e.spec.timeout))
	x.wg.Go(func() {
		defer x.slots.release(e.userID)
		defer cancel()
		o := run(execCtx)
		e.decidedAt = time.Now()
		e.finish(o)
	})
}

func (x *executor) cancelTask(runID, taskID string) bool {
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
func (x *executor) wait() { x.wg.Wait() }

// close disarms the janitors of whatever the registry still holds; at
// shutdown nothing is left to deliver to.
func (x *executor) close() {
	for _, e := range x.reg.all() {
		x.reg.delivered(e)
	}
}

// Stats is a point-in-time view of the executor, for metrics.
type Stats struct {
	Registry int
	Queued   int64
	ByStatus map[string]int
	// Abandoned counts the tool and model calls a run or subagent
	// stopped waiting for that have not returned yet (strays).
	Abandoned int64
}

// stats reports the registry size, queued subagents and executions by
// status.
func (x *executor) stats() Stats {
	st := Stats{Queued: x.queued.Load(), ByStatus: map[string]int{}}
	for _, e := range x.reg.all() {
		st.Registry++
		st.ByStatus[e.status()]++
	}
	return st
}

// newExecution builds the execution of one task call, its model resolved
// once for every call, event and card.
func (x *executor) newExecution(s taskScope, taskID string, args taskArgs, spec *subagentSpec) *execution {
	model := resolveModel(spec, s.model, s.models)
	e := &execution{
		ID:          x.newID(),
		TaskID:      taskID,
		RunID:       s.runID,
		ThreadID:    s.threadID,
		userID:      s.userID,
		Description: args.Description,
		Prompt:      args.fullPrompt(),
		Type:        spec.name,
		ModelName:   model.Config.Name,
		spec:        spec,
		tools:       spec.tools,
		box:         s.box,
		rebox:       s.rebox,
		budget:      s.budget,
		loopLimit:   x.cfg.LoopLimit,
		strays:      x.strays,
		model:       model,
		workspace:   s.workspace,
		sink:        s.sink,
		now:         x.now,
		onEnd:       x.onEnd,
		done:        make(chan struct{}),
	}
	e.ctx, e.cancel = context.WithCancelCause(s.ctx)
	e.log = s.log.With("task", taskID, "execution", e.ID)
	return e
}
