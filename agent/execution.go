package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"herd/agent/tools"
	"herd/models"
)

// taskSink is what an execution needs from its run's sink (runSink): persist
// its events, its end with its ToolMessage (returning once committed), and
// record an LLM call in the usage ledger, once per call; each even after
// the task or its run was stopped. callOutput shows a tool call of the
// subagent's live and keeps its images.
type taskSink interface {
	emit(taskID string, ev Event, with ...models.Record)
	// emitKept is emit with the pieces of the task's exact history the
	// event's step adds, committed with it (agent/checkpoint.go).
	// usage, when set, is the ledger row of the call that made the step
	// (keepUsage), committed with it too.
	emitKept(taskID string, ev Event, msgs []Message, usage *models.UsageEntry)
	// deliver commits the task's end and ToolMessage, after before (the
	// answer's step, held for that commit).
	deliver(end TaskEnd, o Outcome, before ...models.Record)
	// records are an event's records with its commit's others, without
	// queuing them; nil for an event the contract refuses.
	records(taskID string, ev Event, with ...models.Record) []models.Record
	keepUsage(taskID, model string, resp Response) *models.UsageEntry
	writeUsage(e *models.UsageEntry)
	callOutput(taskID, callID string) *callOutput
	// watchCall watches a tool call in workspace dir; the function it
	// returns, after the call, records what the call changed there.
	watchCall(ctx context.Context, taskID, dir string, t tools.Tool, args json.RawMessage) (changed func())
	// recordLost records a model call a restart cut off (lostCall).
	recordLost(e *models.UsageEntry)
}

// execution is one dispatched task call: the registry entry and the state
// machine queued → running → exactly one terminal status. It is built with
// everything it needs — its spec and limits, its model, its workspace, a
// sink for events and usage, a clock — and knows nothing of its owners.
type execution struct {
	ID          string // server-generated execution id, the registry key
	TaskID      string // the LLM's tool-call id, the key for everything user-visible
	RunID       string
	ThreadID    string
	Description string
	Prompt      string
	Type        string
	ModelName   string // the effective model, resolved once

	userID string // whose running slot it takes
	spec   *subagentSpec
	// tools are the tools of its next model call: spec's, or its type's in
	// a toolbox rebuilt since (retool). box is that toolbox and rebox
	// rebuilds it (nil: the tools never change).
	tools     *tools.Set
	box       *toolbox
	rebox     func(*toolbox) *toolbox
	loopLimit int
	// budget is the run's token budget: checked before each model call.
	budget *budgetGuard
	// strays runs its tool and model calls, abandoning one that
	// outlives the end of its context by the cancel grace.
	strays    *strays
	model     *Model
	workspace string
	sink      taskSink
	now       func() time.Time
	// onEnd is told once the terminal state is persisted (the registry
	// arms its janitor).
	onEnd func(*execution)
	// asked, when set, is told once admission has its request (a resumed
	// task queueing again in order, agent/resume.go).
	asked func()

	ctx        context.Context
	cancel     context.CancelCauseFunc
	collector  collector
	admittedAt time.Time
	log        *slog.Logger
	// decidedAt is when execute returned the outcome, just before finish
	// persists it. Only BenchmarkTaskHandoff reads it, to time the hand-off
	// from outcome to delegate's return (docs/PERFORMANCE.md); it is
	// written once, before done is closed.
	decidedAt time.Time

	mu sync.Mutex
	// state is set under mu (setStateLocked) but read without it: finish
	// holds mu across the journal write of the end, and metrics and stats
	// must answer even while the database is locked (docs/DESIGN.md §5).
	// nil is queued.
	state   atomic.Pointer[string]
	version int64
	steps   int64
	final   Outcome
	// answer is the records of the step of the subagent's answer (an AI
	// message without tool calls, the loop's last), held for the commit
	// of the task's end (finish): an ended task is never resumed, so that
	// step needs no checkpoint piece, and the task hand-off waits for one
	// commit with one INSERT fewer.
	answer  []models.Record
	done    chan struct{} // closed once the terminal state is set and persisted
	janitor *time.Timer   // removes the entry if it is never delivered
}

// status is the current state, read without waiting on mu.
func (e *execution) status() string {
	if p := e.state.Load(); p != nil {
		return *p
	}
	return StatusQueued
}

// setStateLocked moves the state machine on; the caller holds e.mu.
func (e *execution) setStateLocked(s string) {
	e.state.Store(&s)
}

func (e *execution) isTerminal() bool { return isTerminal(e.status()) }

// outcome is the terminal outcome; valid once done is closed.
func (e *execution) outcome() Outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.final
}

// ref is the next version of the task's reference. The caller holds e.mu,
// so versions and sequence numbers advance together and nothing is
// emitted after the terminal event.
func (e *execution) nextRefLocked() TaskRef {
	e.version++
	return TaskRef{TaskID: e.TaskID, ExecutionID: e.ID, RunID: e.RunID, Version: e.version}
}

func (e *execution) introLocked() TaskIntro {
	return TaskIntro{TaskRef: e.nextRefLocked(), Description: e.Description, Prompt: e.Prompt, SubagentType: e.Type, ModelName: e.ModelName}
}

func (e *execution) emitQueued() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sink.emit(e.TaskID, TaskQueued{e.introLocked()})
}

func (e *execution) emitStarted() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if isTerminal(e.status()) {
		return
	}
	e.setStateLocked(StatusRunning)
	// The conversation's first piece: its prompt, whole.
	e.sink.emitKept(e.TaskID, TaskStarted{e.introLocked()}, []Message{{Type: TypeHuman, Content: e.Prompt}}, nil)
}

// emitStep publishes one bounded step with the cumulative usage snapshot;
// an AI step's reasoning is kept apart from its text, bounded the same way.
// kept is what the step adds to the task's exact history; usage, the
// ledger row of the call that made it, is written with it, or alone when
// the task has ended (a call that completes is counted).
func (e *execution) emitStep(kind, text, reasoning string, calls []ToolCall, toolName string, kept Message, usage *models.UsageEntry) {
	e.emitStepWith(kind, text, reasoning, calls, toolName, nil, kept, usage)
}

func (e *execution) emitStepWith(kind, text, reasoning string, calls []ToolCall, toolName string, output *ToolOutput, kept Message, usage *models.UsageEntry) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if isTerminal(e.status()) {
		if usage != nil {
			e.sink.writeUsage(usage)
		}
		return
	}
	e.steps++
	st := TaskStep{TaskRef: e.nextRefLocked(), MessageIndex: e.steps, StepBody: StepBody{Kind: kind}, ModelName: e.ModelName, Usage: e.collector.Snapshot()}
	st.Text, st.Truncated = cut(text, eventTextCap)
	st.Reasoning, st.ReasoningTruncated = cut(reasoning, eventTextCap)
	if kind == stepAI {
		for _, tc := range calls {
			c := StepCall{Name: tc.Name, Title: e.toolTitle(tc.Name)}
			c.Args, c.ArgsTruncated = cut(string(tc.Args), eventTextCap)
			st.ToolCalls = append(st.ToolCalls, c)
		}
	} else {
		st.ToolName, st.ToolTitle, st.Output = toolName, e.toolTitle(toolName), output
	}
	if kind == stepAI && len(calls) == 0 {
		var with []models.Record
		if usage != nil {
			with = append(with, usageRecord(usage))
		}
		e.answer = e.sink.records(e.TaskID, st, with...)
		return
	}
	e.sink.emitKept(e.TaskID, st, []Message{kept}, usage)
}

// emitToolStep publishes a tool's result step with what the call showed
// beside it (its images and log lines); m is the result whole.
func (e *execution) emitToolStep(m Message, output *ToolOutput) {
	e.emitStepWith(stepTool, m.Content, "", nil, m.Name, output, m, nil)
}

// emitWaiting tells the card that the next model call waits for a slot of
// its model, or has got one (withModelWait). A late word from an
// abandoned call after the end changes nothing.
func (e *execution) emitWaiting(waiting bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if isTerminal(e.status()) {
		return
	}
	e.sink.emit(e.TaskID, TaskWait{TaskRef: e.nextRefLocked(), Waiting: waiting})
}

// finish sets the terminal state if none is set yet (the first terminal
// wins), persists subagent.end with the task's ToolMessage and then
// signals done, so whoever sees done also sees the payload and committed
// rows. It reports whether this call won.
func (e *execution) finish(o Outcome) bool {
	e.mu.Lock()
	if isTerminal(e.status()) {
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
	e.setStateLocked(o.Status)
	e.final = o
	end := TaskEnd{TaskRef: e.nextRefLocked(), Status: o.Status, ModelName: e.ModelName, Usage: o.Usage, StopReason: o.StopReason}
	if r := strings.TrimSpace(o.Result); r != "" && o.Status == StatusCompleted {
		end.Result, end.ResultTruncated = cut(r, eventTextCap)
	}
	if msg := strings.TrimSpace(o.Error); msg != "" && o.Status != StatusCompleted {
		end.Error, end.ErrorTruncated = cut(msg, eventTextCap)
	}
	e.sink.deliver(end, o, e.answer...)
	e.answer = nil
	e.onEnd(e)
	e.mu.Unlock()
	close(e.done)
	e.log.Info("subagent ended", "status", o.Status, "stop_reason", o.StopReason)
	return true
}

// toolTitle is the title the execution's tool of that name has (an MCP
// tool's server › tool, tools.Titled), "" for one without.
func (e *execution) toolTitle(name string) string {
	if e.tools == nil {
		return ""
	}
	if t, ok := e.tools.Get(name); ok {
		if titled, ok := t.(tools.Titled); ok {
			return titled.Title()
		}
	}
	return ""
}
