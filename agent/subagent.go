package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"herd/agent/tools"
)

// execute is the subagent's own loop: LLM call → tools → next call, until a
// final answer, a cap, an error or the end of ctx (its execution deadline,
// a cancel). It returns the outcome; finish makes it terminal.
func (e *execution) execute(ctx context.Context) (o Outcome) {
	return e.executeFrom(ctx, []Message{{Type: TypeHuman, Content: e.Prompt}}, nil)
}

// executeFrom is execute from a conversation already under way: history
// (after the system prompt) as its checkpoint kept it, and open, the
// tool calls of its last AI message that a restart cut off, which are
// answered first (resumeCalls). A fresh execution's history is its
// prompt.
func (e *execution) executeFrom(ctx context.Context, history []Message, open []ToolCall) (o Outcome) {
	defer func() {
		if p := recover(); p != nil {
			e.log.Error("subagent panicked", "panic", p)
			o = Outcome{Status: StatusFailed, Error: fmt.Sprintf("internal error: %v", p)}
		}
	}()
	msgs := append([]Message{{Type: TypeSystem, Content: e.spec.systemPrompt}}, history...)
	ctx = withModelWait(ctx, e.emitWaiting)
	repeats := map[string]int{}
	lastText := ""
	turn := 1
	for _, m := range history {
		if m.Type != TypeAI {
			continue
		}
		turn++
		if strings.TrimSpace(m.Content) != "" {
			lastText = m.Content
		}
		for _, c := range m.ToolCalls {
			repeats[c.Name+"\x00"+canonicalJSON(c.Args)]++
		}
	}
	if len(open) > 0 {
		msgs = append(msgs, e.runTools(ctx, open, true)...)
		if ctx.Err() != nil {
			return e.interrupted(ctx, ctx.Err())
		}
	}
	for ; ; turn++ {
		if turn > e.spec.maxTurns {
			return capped(stopTurnCapped, lastText, fmt.Sprintf("reached the turn budget (max_turns %d) before a final answer", e.spec.maxTurns))
		}
		if e.budget.spent() {
			return capped(stopBudget, lastText, e.budget.why())
		}
		e.retool()
		// Its conversation grows with every tool step; the oldest steps are
		// left out when it outgrows the model's window (callFitted).
		resp, fit, err := callFitted(ctx, e.strays, e.log, e.model, Request{Model: e.model.Config.Model, Messages: msgs, Tools: e.tools.Specs()}, nil)
		if fit.Trimmed() {
			e.log.Info("left tool steps out to fit the context window", "model", e.model.Config.Name, "sent", fit.Sent, "total", fit.Total)
		}
		if err != nil {
			return e.interrupted(ctx, err)
		}
		// A call that completes is counted even if ctx ended meanwhile;
		// its ledger row commits with its step (keepUsage).
		used := e.sink.keepUsage(e.TaskID, e.model.Config.Name, resp)
		e.collector.Record(used)
		ai := Message{Type: TypeAI, Content: resp.Text, ToolCalls: resp.ToolCalls, Thinking: resp.Thinking}
		e.emitStep(stepAI, resp.Text, resp.Reasoning, resp.ToolCalls, "", ai, used)
		if t := strings.TrimSpace(resp.Text); t != "" {
			lastText = resp.Text
		}
		if len(resp.ToolCalls) == 0 {
			if strings.TrimSpace(resp.Text) == "" {
				return Outcome{Status: StatusFailed, Error: "No response generated"}
			}
			return Outcome{Status: StatusCompleted, Result: resp.Text}
		}
		if b := e.spec.tokenBudget; b > 0 {
			if u := e.collector.Snapshot(); u != nil && u.TotalTokens >= b {
				return capped(stopTokenCapped, lastText, fmt.Sprintf("used %d tokens of a %d token budget before a final answer", u.TotalTokens, b))
			}
		}
		for _, c := range resp.ToolCalls {
			key := c.Name + "\x00" + canonicalJSON(c.Args)
			repeats[key]++
			if repeats[key] >= e.loopLimit {
				return capped(stopLoopCapped, lastText, fmt.Sprintf("called %s with the same arguments %d times", c.Name, repeats[key]))
			}
		}
		msgs = append(msgs, ai)
		msgs = append(msgs, e.runTools(ctx, resp.ToolCalls, false)...)
		if ctx.Err() != nil {
			return e.interrupted(ctx, ctx.Err())
		}
	}
}

// capped ends a subagent stopped by a guardrail: completed when it has
// usable output, else failed, with the stop reason either way.
func capped(reason, output, why string) Outcome {
	if strings.TrimSpace(output) != "" {
		return Outcome{Status: StatusCompleted, StopReason: reason, Result: output}
	}
	return Outcome{Status: StatusFailed, StopReason: reason, Error: "Stopped: " + why}
}

// interrupted maps an error after ctx ended (or a provider error) to its
// terminal outcome.
func (e *execution) interrupted(ctx context.Context, err error) Outcome {
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		switch {
		case errors.Is(cause, context.DeadlineExceeded):
			return Outcome{Status: StatusTimedOut, Error: executionTimedOut(e.spec.timeout)}
		case errors.Is(cause, errTaskCancelled), errors.Is(cause, errStopped):
			return Outcome{Status: StatusCancelled}
		case errors.Is(cause, ErrShuttingDown):
			return Outcome{Status: StatusCancelled, Error: "interrupted: server shutting down"}
		}
		return Outcome{Status: StatusCancelled, Error: cause.Error()}
	}
	return Outcome{Status: StatusFailed, Error: err.Error()}
}

// runTools runs one response's tool calls in parallel and emits a step for
// each result, in call order. resumed calls are those a restart cut off:
// only a repeatable tool runs again (tools.Repeatable), any other gets
// the result that says its outcome is unknown.
func (e *execution) runTools(ctx context.Context, calls []ToolCall, resumed bool) []Message {
	out := make([]Message, len(calls))
	shown := make([]*ToolOutput, len(calls))
	call := func(i int) {
		c := calls[i]
		var content string
		if t, ok := e.tools.Get(c.Name); resumed && ok && !tools.IsRepeatable(t) {
			content = interruptedCall
		} else {
			content, shown[i] = e.runTool(ctx, c)
		}
		out[i] = Message{Type: TypeTool, ToolCallID: c.ID, Name: c.Name, Content: content}
	}
	if len(calls) == 1 {
		call(0) // the usual case: strays already runs the tool in a goroutine of its own
	} else {
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() { call(i) })
		}
		wg.Wait()
	}
	for i, m := range out {
		e.emitToolStep(m, shown[i])
	}
	return out
}

// runTool runs one of the subagent's tools (strays.runTool), and says
// what it showed beside its result (callOutput).
func (e *execution) runTool(ctx context.Context, c ToolCall) (string, *ToolOutput) {
	t, ok := e.tools.Get(c.Name)
	if !ok {
		return fmt.Sprintf("Error: tool %q is not available to this subagent. Available: %s", c.Name, strings.Join(e.tools.Names(), ", ")), nil
	}
	out := e.sink.callOutput(e.TaskID, c.ID)
	changed := e.sink.watchCall(ctx, e.TaskID, e.workspace, t, c.Args)
	result := e.strays.runTool(ctx, e.log, t, out.env(e.workspace, e.userID, e.RunID), c)
	changed()
	return result, out.finish()
}

// retool gives the subagent its type's tools as they are now before each
// model call, when the MCP tools changed since the last (tools/
// list_changed, a server restarted), as the lead's are (Runtime.refresh).
func (e *execution) retool() {
	if e.rebox == nil {
		return
	}
	nb := e.rebox(e.box)
	if nb == e.box {
		return
	}
	e.box = nb
	if s, ok := nb.agents.byName[e.Type]; ok {
		e.tools = s.tools
	}
}
