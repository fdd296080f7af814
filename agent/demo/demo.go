package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"herd/agent"
	"herd/agent/tools"
)

// defaultSubagentTurns is how many LLM calls a demo subagent makes on
// the general path: enough for a plan, a look around and a re-read to
// show as steps on its card before the answer.
const defaultSubagentTurns = 4

// Provider is the offline demo provider (docs/DESIGN.md §12): a deterministic,
// rule-based stand-in for an LLM, so herd runs with no key and still
// exercises delegation, tools, streaming, usage and failures for real.
//
// It plays the lead when the request offers the task tool and a subagent
// otherwise. Apart from a call counter (for fail_after) it keeps no
// state: every reply is derived from the request's messages, so the same
// request always yields the same text and tool-call arguments.
//
// The lead delegates one task per list item of the user's message ("- ",
// "* ", "1. ", "1) "; an item starting "<type>: " picks that subagent
// type), else one bash task for the first `command` in backticks, else
// answers directly; after task results it summarises them. Offered no bash
// subagent, it answers a command or a "bash: " item with why it cannot run
// it (the agent.CommandsOff line of its system prompt) instead. A lead
// offered an MCP tool of its own (lead.tools) calls it for a message that
// says "use <server>/<tool> with {...}", as a subagent does for such a
// prompt. A subagent runs a backticked command of its prompt with bash and
// quotes the output; otherwise it writes, lists and re-reads notes under notes/ for
// its configured number of turns, then answers.
//
// Attached files: a message about them ("summarise the attached file")
// has a subagent read each with read_file and summarise it (size, line
// count, first lines). Given image parts (a model with vision: true), the
// lead says what each is ("uploads/cat.png: a 1200×800 PNG image"), read
// from the bytes it got.
//
// Usage is counted with a simple tokenizer: every run of letters and
// digits is one token, and so is every other non-space character (each
// CJK ideograph, each punctuation mark). Input is all message contents and
// tool-call arguments of the request, and an image a token per 750 pixels;
// output is the reply's text and tool-call arguments.
type Provider struct {
	cfg           agent.ModelConfig
	subagentTurns int
	sleep         func(ctx context.Context, d time.Duration) error
	calls         atomic.Int64
}

// Option adjusts a Provider for tests and benchmarks; none of them is a
// config key.
type Option func(*Provider)

// WithSubagentTurns sets how many LLM calls a subagent makes on the
// general path: n-1 with tool calls, then the answer (default 4; n below 1
// counts as 1). It can make fewer only when the offered tools leave
// nothing useful to do. The bash path always takes two calls.
func WithSubagentTurns(n int) Option {
	return func(d *Provider) { d.subagentTurns = max(n, 1) }
}

// WithSleep replaces how the provider waits for latency and between
// chunks. sleep must return promptly with a non-nil error once ctx is done.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(d *Provider) { d.sleep = sleep }
}

// New returns the demo provider configured by cfg: LatencyMS before
// each response, ChunkMS between streamed chunks, Usage (nil = on) and
// FailAfter.
func New(cfg agent.ModelConfig, opts ...Option) *Provider {
	d := &Provider{cfg: cfg, subagentTurns: defaultSubagentTurns, sleep: sleep}
	for _, opt := range opts {
		opt(d)
	}
	return d
}

// Complete answers req as the lead or as a subagent (see Provider), streaming
// the text word by word through onDelta; the lead's first turn reasons in
// one sentence first (req.OnReasoning).
func (d *Provider) Complete(ctx context.Context, req agent.Request, onDelta func(text string)) (agent.Response, error) {
	n := d.calls.Add(1)
	if err := d.wait(ctx, d.latency(req)); err != nil {
		return agent.Response{}, err
	}
	if d.cfg.FailAfter > 0 && n == int64(d.cfg.FailAfter) {
		return agent.Response{}, fmt.Errorf("%w: demo model %s: call %d failed as configured (fail_after: %d)",
			agent.ErrProvider, d.model(), n, d.cfg.FailAfter)
	}

	var r reply
	if task, ok := findTool(req.Tools, agent.ToolTask); ok {
		r = lead(req.Messages, subagentTypes(task), toolNames(req.Tools), d.cfg.Label())
	} else {
		r = subagent(req.Messages, toolNames(req.Tools), d.subagentTurns)
	}

	if req.OnReasoning != nil && r.reasoning != "" {
		if err := d.stream(ctx, r.reasoning, req.OnReasoning); err != nil {
			return agent.Response{}, err
		}
	}
	if onDelta != nil {
		if err := d.stream(ctx, r.text, onDelta); err != nil {
			return agent.Response{}, err
		}
	}

	resp := agent.Response{CallID: uuid.NewString(), Text: r.text, Reasoning: r.reasoning, Model: d.model()}
	for _, c := range r.calls {
		resp.ToolCalls = append(resp.ToolCalls, agent.ToolCall{ID: toolCallID(), Name: c.name, Args: c.args})
	}
	if d.cfg.Usage == nil || *d.cfg.Usage {
		resp.Usage = usage(req, resp)
	}
	return resp, nil
}

// streamBudget bounds how long one reply streams: a reply that relays a
// 5,000-line command output must not take minutes of chunk delays.
const streamBudget = 5 * time.Second

// stream sends text through onDelta word by word, ChunkMS apart, grouping
// words so that a long reply streams within streamBudget. A call that
// nobody watches (onDelta nil: subagents) is not streamed at all.
func (d *Provider) stream(ctx context.Context, text string, onDelta func(string)) error {
	words := chunks(text)
	group := 1
	if d.cfg.ChunkMS > 0 {
		if gaps := int(streamBudget / (time.Duration(d.cfg.ChunkMS) * time.Millisecond)); gaps > 0 && len(words) > gaps {
			group = (len(words) + gaps - 1) / gaps
		}
	}
	for i := 0; i < len(words); i += group {
		if i > 0 {
			if err := d.wait(ctx, d.cfg.ChunkMS); err != nil {
				return err
			}
		}
		onDelta(strings.Join(words[i:min(i+group, len(words))], ""))
	}
	return nil
}

func (d *Provider) model() string {
	if d.cfg.Model != "" {
		return d.cfg.Model
	}
	return d.cfg.Name
}

// latency is LatencyMS spread by LatencyJitter: a pseudo-random factor in
// [1-j, 1+j) drawn from the request itself, so the same request always
// waits the same and parallel subagents do not answer in lockstep.
func (d *Provider) latency(req agent.Request) int {
	j := min(max(d.cfg.LatencyJitter, 0), 1)
	if j == 0 || d.cfg.LatencyMS <= 0 {
		return d.cfg.LatencyMS
	}
	h := fnv.New64a()
	for _, m := range req.Messages {
		_, _ = h.Write([]byte(m.Type))
		_, _ = h.Write([]byte(m.Content))
	}
	// FNV's high bits barely move when only the last bytes differ
	// ("topic 1", "topic 2"): a splitmix64 finish spreads them.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	u := float64(x>>11) / (1 << 53) // uniform in [0, 1)
	return int(float64(d.cfg.LatencyMS) * (1 - j + 2*j*u))
}

// wait pauses for ms milliseconds, or only checks ctx when ms is zero, so
// a cancelled request stops at the next wait whatever the configuration.
func (d *Provider) wait(ctx context.Context, ms int) error {
	err := ctx.Err()
	if err == nil && ms > 0 {
		err = d.sleep(ctx, time.Duration(ms)*time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("%w: demo model %s: %w", agent.ErrProvider, d.model(), err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func toolCallID() string {
	return "call_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:24]
}

// reply is one response before ids are assigned.
type reply struct {
	text      string
	reasoning string // what the lead "thinks" first (agent.Response.Reasoning)
	calls     []call
}

type call struct {
	name string
	args json.RawMessage
}

// newCall encodes args without HTML escaping, so a command such as
// "sleep 2 && echo Done" reads the same in the step timeline as typed.
func newCall(name string, args map[string]string) call {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(args); err != nil {
		// A map of strings always encodes; failing here is a bug.
		panic(fmt.Sprintf("demo: encode %s args: %v", name, err))
	}
	return call{name: name, args: bytes.TrimRight(buf.Bytes(), "\n")}
}

func findTool(specs []tools.Spec, name string) (tools.Spec, bool) {
	for _, t := range specs {
		if t.Name == name {
			return t, true
		}
	}
	return tools.Spec{}, false
}

func toolNames(specs []tools.Spec) map[string]bool {
	names := make(map[string]bool, len(specs))
	for _, t := range specs {
		names[t.Name] = true
	}
	return names
}

// subagentTypes reads the subagent_type enum of the task tool's schema:
// the lead may only delegate to the types it lists.
func subagentTypes(task tools.Spec) []string {
	var schema struct {
		Properties struct {
			SubagentType struct {
				Enum []string `json:"enum"`
			} `json:"subagent_type"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(task.Parameters, &schema); err != nil {
		return nil
	}
	return schema.Properties.SubagentType.Enum
}

func usage(req agent.Request, resp agent.Response) *agent.Usage {
	var in, out int64
	for _, m := range req.Messages {
		in += tokens(m.Content)
		for _, c := range m.ToolCalls {
			in += tokens(string(c.Args))
		}
		for _, img := range m.Images {
			in += int64(img.Width*img.Height+749) / 750 // as Anthropic counts an image
		}
	}
	out = tokens(resp.Text)
	for _, c := range resp.ToolCalls {
		out += tokens(string(c.Args))
	}
	return &agent.Usage{InputTokens: in, OutputTokens: out, TotalTokens: in + out}
}
