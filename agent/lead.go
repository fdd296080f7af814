package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"herd/models"
)

// run is one user message and everything the lead does for it.
type run struct {
	rt       *Runtime
	id       string
	threadID string
	userID   string
	model    *Model
	ctx      context.Context
	cancel   context.CancelCauseFunc
	done     chan struct{}

	workspace string
	tasks     atomic.Int32 // task calls dispatched, for max_total_per_run

	mu    sync.Mutex
	usage map[string]models.UsageEntry // every LLM call of the run, by call id
}

func (r *run) logger() *slog.Logger {
	return r.rt.log.With("thread", r.threadID, "run", r.id)
}

// begin persists the run row, run.start and the user's message.
func (r *run) begin(ctx context.Context, msgID, content string) error {
	ws, err := r.rt.workspace(r.threadID)
	if err != nil {
		return err
	}
	r.workspace = ws
	now := r.rt.now().UTC()
	start, err := eventRecord(r.threadID, r.id, "", EventRunStart, map[string]any{"run_id": r.id, "model_name": r.model.Config.Name})
	if err != nil {
		return err
	}
	err = r.rt.journal.Write(ctx,
		models.Record{Run: &models.Run{ID: r.id, ThreadID: r.threadID, UserID: r.userID, Status: models.RunRunning, ModelName: r.model.Config.Name, StartedAt: now}},
		start,
		models.Record{Message: &models.Message{ID: msgID, ThreadID: r.threadID, RunID: r.id, Type: TypeHuman, Content: content}},
	)
	if err != nil {
		return fmt.Errorf("agent: start run: %w", err)
	}
	return nil
}

// loop is the lead loop (SPEC §4.1): model call → tool calls (in parallel)
// → results → next call, until a response without tool calls.
func (r *run) loop() {
	defer close(r.done)
	log := r.logger()
	status, errText := r.converse(log)
	if cause := context.Cause(r.ctx); cause != nil && status != models.RunCompleted {
		status = models.RunCancelled
		if errors.Is(cause, ErrShuttingDown) {
			errText = "interrupted: server shutting down"
		} else {
			errText = ""
		}
	}
	r.end(status, errText)
	r.cancel(nil)
	r.rt.release(r)
	log.Info("run ended", "status", status, "error", errText)
}

func (r *run) converse(log *slog.Logger) (status, errText string) {
	stored, err := r.rt.history.Messages(r.ctx, r.threadID)
	if err != nil {
		log.Error("load history", "err", err)
		return models.RunFailed, "could not load the conversation"
	}
	msgs := append([]Message{{Type: TypeSystem, Content: r.rt.leadPrompt()}}, replayable(stored)...)
	tools := append(r.rt.tools.Specs(), r.rt.taskSpec)
	for turn := 1; turn <= r.rt.lead.MaxTurns; turn++ {
		msgID := r.rt.newID()
		var streamed strings.Builder
		deltas := newDeltaStream(func(text string) { r.rt.pub.Delta(r.threadID, r.id, msgID, text) })
		resp, err := r.model.Provider.Complete(r.ctx, Request{Model: r.model.Config.Model, Messages: msgs, Tools: tools}, func(d string) {
			streamed.WriteString(d)
			deltas.write(d)
		})
		deltas.close()
		if err != nil {
			if r.ctx.Err() != nil {
				r.keepPartial(msgID, streamed.String())
				return models.RunCancelled, ""
			}
			log.Warn("lead model call failed", "err", err, "model", r.model.Config.Name)
			return models.RunFailed, err.Error()
		}
		r.recordUsage("", resp)
		ai := Message{Type: TypeAI, Content: resp.Text, ToolCalls: resp.ToolCalls}
		if err := r.persist(&models.Message{
			ID: msgID, Type: TypeAI, Content: resp.Text, ToolCalls: toolCallsJSON(resp.ToolCalls),
			Usage: usageJSON(resp.Usage), ModelName: resp.Model,
		}); err != nil {
			log.Error("persist ai message", "err", err)
			return models.RunFailed, "could not save the answer"
		}
		msgs = append(msgs, ai)
		if len(resp.ToolCalls) == 0 {
			if strings.TrimSpace(resp.Text) == "" {
				return models.RunFailed, "No response generated"
			}
			return models.RunCompleted, ""
		}
		results := r.runTools(resp.ToolCalls)
		msgs = append(msgs, results...)
		if r.ctx.Err() != nil {
			return models.RunCancelled, ""
		}
	}
	return models.RunFailed, fmt.Sprintf("the lead reached lead.max_turns (%d) without a final answer", r.rt.lead.MaxTurns)
}

// keepPartial saves what was streamed of an answer the user stopped, so a
// reload shows what they saw.
func (r *run) keepPartial(msgID, text string) {
	if strings.TrimSpace(text) == "" {
		return
	}
	err := r.persist(&models.Message{
		ID: msgID, Type: TypeAI, Content: text, ModelName: r.model.Config.Name,
		AdditionalKwargs: models.MustJSON(map[string]any{"stopped": true}),
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
			if refusal := r.admitTask(perResponse); refusal != "" {
				out[i] = r.finishTask(call, taskRefused(refusal), nil)
				continue
			}
		}
		wg.Go(func() {
			if call.Name == ToolTask {
				o, release := r.rt.exec.delegate(r, call)
				out[i] = r.finishTask(call, o, release)
				return
			}
			out[i] = r.finishTool(call, r.runTool(call))
		})
	}
	wg.Wait()
	return out
}

func (r *run) admitTask(nthInResponse int) string {
	cfg := r.rt.exec.cfg
	if nthInResponse > cfg.MaxConcurrentPerResponse {
		return fmt.Sprintf("Not started: one response may start at most %d subagents (subagents.max_concurrent_per_response); call task again for this one after the others finish.", cfg.MaxConcurrentPerResponse)
	}
	if n := r.tasks.Add(1); int(n) > cfg.MaxTotalPerRun {
		return fmt.Sprintf("Not started: this run already started its limit of %d subagents (subagents.max_total_per_run).", cfg.MaxTotalPerRun)
	}
	return ""
}

func (r *run) runTool(call ToolCall) (result string) {
	defer func() {
		if p := recover(); p != nil {
			r.logger().Error("tool panicked", "tool", call.Name, "panic", p)
			result = fmt.Sprintf("Error: the %s tool failed internally", call.Name)
		}
	}()
	t, ok := r.rt.tools.Get(call.Name)
	if !ok {
		return fmt.Sprintf("Error: unknown tool %q. Available: %s", call.Name, strings.Join(append(r.rt.tools.Names(), ToolTask), ", "))
	}
	out, err := t.Run(r.ctx, ToolEnv{Workspace: r.workspace}, call.Args)
	if err != nil {
		return "Error: " + err.Error()
	}
	return out
}

func (r *run) finishTool(call ToolCall, result string) Message {
	m := Message{Type: TypeTool, Content: result, ToolCallID: call.ID, Name: call.Name}
	if err := r.persist(&models.Message{ID: r.rt.newID(), Type: TypeTool, Content: result, ToolCallID: call.ID, Name: call.Name}); err != nil {
		r.logger().Error("persist tool message", "tool", call.Name, "err", err)
	}
	return m
}

// finishTask persists a task call's ToolMessage, then lets the executor
// forget the execution: its terminal state has been delivered.
func (r *run) finishTask(call ToolCall, o Outcome, release func()) Message {
	content, kwargs, err := o.ToolMessage()
	if err != nil {
		r.logger().Error("task outcome outside the contract", "task", call.ID, "err", err)
		content, kwargs, _ = Outcome{Status: StatusFailed, Error: "internal error: " + err.Error()}.ToolMessage()
	}
	if err := r.persist(&models.Message{
		ID: r.rt.newID(), Type: TypeTool, Content: content, ToolCallID: call.ID, Name: ToolTask,
		AdditionalKwargs: models.MustJSON(kwargs), ModelName: o.ModelName,
	}); err != nil {
		r.logger().Error("persist task result", "task", call.ID, "err", err)
	}
	if release != nil {
		release()
	}
	return Message{Type: TypeTool, Content: content, ToolCallID: call.ID, Name: ToolTask}
}

// persist writes one message of the run, even after the run was stopped.
func (r *run) persist(m *models.Message) error {
	m.ThreadID, m.RunID = r.threadID, r.id
	ctx, cancel := r.rt.persistCtx(r.ctx)
	defer cancel()
	return r.rt.journal.Write(ctx, models.Record{Message: m})
}

// recordUsage writes an LLM call to the ledger (once, by call id) and keeps
// it for the run's totals.
func (r *run) recordUsage(taskID string, resp Response) *models.UsageEntry {
	e, ok := ledgerEntry(r.threadID, r.id, taskID, resp)
	if !ok {
		return nil
	}
	r.mu.Lock()
	r.usage[e.CallID] = *e
	r.mu.Unlock()
	ctx, cancel := r.rt.persistCtx(r.ctx)
	defer cancel()
	row := *e // the writer stamps its own copy; callers keep reading e
	if err := r.rt.journal.Enqueue(ctx, models.Record{Usage: &row}); err != nil {
		r.logger().Error("record usage", "call", e.CallID, "err", err)
	}
	return e
}

func (r *run) totals() models.UsageReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := models.UsageReport{ByModel: map[string]models.UsageTotals{}}
	for _, e := range r.usage {
		t := models.UsageTotals{InputTokens: e.InputTokens, OutputTokens: e.OutputTokens, TotalTokens: e.TotalTokens, CacheReadTokens: e.CacheReadTokens, Calls: 1}
		addTotals(&rep.Total, t)
		if e.TaskID == "" {
			addTotals(&rep.Lead, t)
		} else {
			addTotals(&rep.Subagents, t)
		}
		m := rep.ByModel[e.ModelName]
		addTotals(&m, t)
		rep.ByModel[e.ModelName] = m
	}
	return rep
}

func addTotals(dst *models.UsageTotals, t models.UsageTotals) {
	dst.InputTokens += t.InputTokens
	dst.OutputTokens += t.OutputTokens
	dst.TotalTokens += t.TotalTokens
	dst.CacheReadTokens += t.CacheReadTokens
	dst.Calls += t.Calls
}

// end writes the run's final status and run.end.
func (r *run) end(status, errText string) {
	now := r.rt.now().UTC()
	content := map[string]any{"run_id": r.id, "status": status}
	if errText != "" {
		content["error"] = errText
	}
	content["usage"] = r.totals()
	ev, err := eventRecord(r.threadID, r.id, "", EventRunEnd, content)
	if err != nil {
		r.logger().Error("run.end outside the contract", "err", err)
		return
	}
	ctx, cancel := r.rt.persistCtx(r.ctx)
	defer cancel()
	err = r.rt.journal.Write(ctx,
		models.Record{Run: &models.Run{ID: r.id, ThreadID: r.threadID, UserID: r.userID, Status: status, ModelName: r.model.Config.Name, Error: errText, EndedAt: &now}},
		ev,
	)
	if err != nil {
		r.logger().Error("persist run end", "err", err)
	}
}

// eventRecord validates an event at the producer and wraps it for the
// journal; a malformed event is an error and is never written.
func eventRecord(threadID, runID, taskID, eventType string, content map[string]any) (models.Record, error) {
	b, err := json.Marshal(content)
	if err != nil {
		return models.Record{}, fmt.Errorf("agent: encode %s: %w", eventType, err)
	}
	decoded, err := DecodeContent(b)
	if err != nil {
		return models.Record{}, err
	}
	if err := ValidateEvent(eventType, decoded); err != nil {
		return models.Record{}, fmt.Errorf("agent: %w", err)
	}
	return models.Record{Event: &models.RunEvent{
		ThreadID: threadID, RunID: runID, TaskID: taskID, EventType: eventType,
		Category: eventSpecs[eventType].Category, Content: models.JSON(b),
	}}, nil
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
			results[m.RunID+"\x00"+m.ToolCallID] = m
		}
	}
	var out []Message
	for _, m := range stored {
		switch m.Type {
		case TypeHuman:
			out = append(out, Message{Type: TypeHuman, Content: m.Content})
		case TypeAI:
			var calls []ToolCall
			if len(m.ToolCalls) > 0 {
				_ = json.Unmarshal(m.ToolCalls, &calls)
			}
			out = append(out, Message{Type: TypeAI, Content: m.Content, ToolCalls: calls})
			for _, c := range calls {
				res, ok := results[m.RunID+"\x00"+c.ID]
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

// leadPrompt is the lead's system prompt.
func (rt *Runtime) leadPrompt() string {
	p := `You are herd's lead agent. You answer the user directly and well. You may delegate bounded, self-contained pieces of work to subagents with the task tool, which blocks until the subagent finishes and returns its result; never poll for status, there is no status tool. Use the workspace tools (ls, read_file, write_file, str_replace) and bash when available for small steps yourself. Answer in Markdown.`
	if s := strings.TrimSpace(rt.lead.SystemPrompt); s != "" {
		p += "\n\n" + s
	}
	return p
}
