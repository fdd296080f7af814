package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"herd/agent/tools"
)

// defaultDemoSubagentTurns is how many LLM calls a demo subagent makes on
// the general path: enough for a plan, a look around and a re-read to
// show as steps on its card before the answer.
const defaultDemoSubagentTurns = 4

// Demo is the offline demo provider (SPEC §3.3): a deterministic,
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
// answers directly; after task results it summarises them. A subagent
// runs a backticked command of its prompt with bash and quotes the
// output; otherwise it writes, lists and re-reads notes under notes/ for
// its configured number of turns, then answers.
//
// Usage is counted with a simple tokenizer: every run of letters and
// digits is one token, and so is every other non-space character (each
// CJK ideograph, each punctuation mark). Input is all message contents and
// tool-call arguments of the request; output is the reply's text and
// tool-call arguments.
type Demo struct {
	cfg           ModelConfig
	subagentTurns int
	sleep         func(ctx context.Context, d time.Duration) error
	calls         atomic.Int64
}

// DemoOption adjusts a Demo for tests and benchmarks; none of them is a
// config key.
type DemoOption func(*Demo)

// WithDemoSubagentTurns sets how many LLM calls a subagent makes on the
// general path: n-1 with tool calls, then the answer (default 4; n below 1
// counts as 1). It can make fewer only when the offered tools leave
// nothing useful to do. The bash path always takes two calls.
func WithDemoSubagentTurns(n int) DemoOption {
	return func(d *Demo) { d.subagentTurns = max(n, 1) }
}

// WithDemoSleep replaces how the provider waits for latency and between
// chunks. sleep must return promptly with a non-nil error once ctx is done.
func WithDemoSleep(sleep func(ctx context.Context, d time.Duration) error) DemoOption {
	return func(d *Demo) { d.sleep = sleep }
}

// NewDemo returns the demo provider configured by cfg: LatencyMS before
// each response, ChunkMS between streamed chunks, Usage (nil = on) and
// FailAfter.
func NewDemo(cfg ModelConfig, opts ...DemoOption) *Demo {
	d := &Demo{cfg: cfg, subagentTurns: defaultDemoSubagentTurns, sleep: demoSleep}
	for _, opt := range opts {
		opt(d)
	}
	return d
}

// Complete answers req as the lead or as a subagent (see Demo), streaming
// the text word by word through onDelta.
func (d *Demo) Complete(ctx context.Context, req Request, onDelta func(text string)) (Response, error) {
	n := d.calls.Add(1)
	if err := d.wait(ctx, d.latency(req)); err != nil {
		return Response{}, err
	}
	if d.cfg.FailAfter > 0 && n == int64(d.cfg.FailAfter) {
		return Response{}, fmt.Errorf("%w: demo model %s: call %d failed as configured (fail_after: %d)",
			ErrProvider, d.model(), n, d.cfg.FailAfter)
	}

	var r demoReply
	if task, ok := demoFindTool(req.Tools, ToolTask); ok {
		r = demoLead(req.Messages, demoSubagentTypes(task), d.cfg.Label())
	} else {
		r = demoSubagent(req.Messages, demoToolNames(req.Tools), d.subagentTurns)
	}

	for i, chunk := range demoChunks(r.text) {
		if i > 0 {
			if err := d.wait(ctx, d.cfg.ChunkMS); err != nil {
				return Response{}, err
			}
		}
		if onDelta != nil {
			onDelta(chunk)
		}
	}

	resp := Response{CallID: uuid.NewString(), Text: r.text, Model: d.model()}
	for _, c := range r.calls {
		resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: demoToolCallID(), Name: c.name, Args: c.args})
	}
	if d.cfg.Usage == nil || *d.cfg.Usage {
		resp.Usage = demoUsage(req, resp)
	}
	return resp, nil
}

func (d *Demo) model() string {
	if d.cfg.Model != "" {
		return d.cfg.Model
	}
	return d.cfg.Name
}

// wait pauses for ms milliseconds, or only checks ctx when ms is zero, so
// a cancelled request stops at the next wait whatever the configuration.
// latency is LatencyMS spread by LatencyJitter: a pseudo-random factor in
// [1-j, 1+j) drawn from the request itself, so the same request always
// waits the same and parallel subagents do not answer in lockstep.
func (d *Demo) latency(req Request) int {
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

func (d *Demo) wait(ctx context.Context, ms int) error {
	err := ctx.Err()
	if err == nil && ms > 0 {
		err = d.sleep(ctx, time.Duration(ms)*time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("%w: demo model %s: %w", ErrProvider, d.model(), err)
	}
	return nil
}

func demoSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func demoToolCallID() string {
	return "call_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:24]
}

// demoReply is one response before ids are assigned.
type demoReply struct {
	text  string
	calls []demoCall
}

type demoCall struct {
	name string
	args json.RawMessage
}

// newDemoCall encodes args without HTML escaping, so a command such as
// "sleep 2 && echo Done" reads the same in the step timeline as typed.
func newDemoCall(name string, args map[string]string) demoCall {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(args); err != nil {
		// A map of strings always encodes; failing here is a bug.
		panic(fmt.Sprintf("agent: encode demo %s args: %v", name, err))
	}
	return demoCall{name: name, args: bytes.TrimRight(buf.Bytes(), "\n")}
}

func demoFindTool(specs []tools.Spec, name string) (tools.Spec, bool) {
	for _, t := range specs {
		if t.Name == name {
			return t, true
		}
	}
	return tools.Spec{}, false
}

func demoToolNames(specs []tools.Spec) map[string]bool {
	names := make(map[string]bool, len(specs))
	for _, t := range specs {
		names[t.Name] = true
	}
	return names
}

// demoSubagentTypes reads the subagent_type enum of the task tool's schema:
// the lead may only delegate to the types it lists.
func demoSubagentTypes(task tools.Spec) []string {
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

// --- The lead ---

func demoLead(msgs []Message, types []string, label string) demoReply {
	if len(msgs) > 0 && msgs[len(msgs)-1].Type == TypeTool {
		return demoLeadAfterTools(msgs)
	}
	human := demoLastOf(msgs, TypeHuman)
	intro, items := demoParseList(human)
	if len(items) > 0 {
		return demoDelegateList(intro, items, types)
	}
	cmd, hasCmd := demoCommand(human)
	if hasCmd && slices.Contains(types, SubagentBash) {
		return demoDelegateCommand(cmd)
	}
	return demoDirectAnswer(human, cmd, types, label)
}

var demoNumbered = regexp.MustCompile(`^[0-9]{1,3}[.)][ \t]+`)

// demoParseList splits a message into its list items (top-level lines starting
// with "- ", "* ", "1. " or "1) ", plus their indented continuation lines)
// and its first other line, which gives the items their context. Fenced
// code blocks are skipped: a list there is an example, not a request.
func demoParseList(msg string) (intro string, items []string) {
	inFence, inItem := false, false
	for line := range strings.Lines(msg) {
		line = strings.TrimRight(line, " \t\r\n")
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			inFence = !inFence
			continue
		}
		if inFence || trimmed == "" {
			continue
		}
		if item, ok := demoListItem(line); ok {
			if demoHasWord(item) {
				items = append(items, item)
				inItem = true
			}
			continue
		}
		if inItem && line != trimmed {
			items[len(items)-1] += "\n" + trimmed
			continue
		}
		inItem = false
		if intro == "" {
			intro = trimmed
		}
	}
	return intro, items
}

func demoListItem(line string) (string, bool) {
	for _, marker := range []string{"- ", "* ", "-\t", "*\t"} {
		if rest, ok := strings.CutPrefix(line, marker); ok {
			return strings.TrimSpace(rest), true
		}
	}
	if m := demoNumbered.FindString(line); m != "" {
		return strings.TrimSpace(line[len(m):]), true
	}
	return "", false
}

var demoTypePrefix = regexp.MustCompile(`^([A-Za-z0-9_-]+):[ \t]*`)

func demoDelegateList(intro string, items []string, types []string) demoReply {
	fallback := SubagentGeneral
	if len(types) > 0 && !slices.Contains(types, SubagentGeneral) {
		fallback = types[0]
	}
	r := demoReply{text: fmt.Sprintf("I'll hand these %d items to subagents in parallel.", len(items))}
	if len(items) == 1 {
		r.text = "I'll hand this item to a subagent."
	}
	for _, item := range items {
		kind := fallback
		if m := demoTypePrefix.FindStringSubmatch(item); m != nil && demoHasWord(item[len(m[0]):]) {
			if i := slices.IndexFunc(types, func(t string) bool { return strings.EqualFold(t, m[1]) }); i >= 0 {
				kind, item = types[i], item[len(m[0]):]
			}
		}
		prompt := item + "\n\n"
		if intro != "" {
			prompt += "Context from the user's request: " + intro + "\n\n"
		}
		if len(items) > 1 {
			prompt += fmt.Sprintf("You are one of %d subagents working in parallel on the user's list; work only on this item. ", len(items))
		}
		prompt += "Keep your notes under notes/ in the workspace and finish with a short Markdown answer."
		r.calls = append(r.calls, newDemoCall(ToolTask, map[string]string{
			"description":   demoDescribe(item),
			"prompt":        prompt,
			"subagent_type": kind,
		}))
	}
	return r
}

func demoDelegateCommand(cmd string) demoReply {
	return demoReply{
		text: fmt.Sprintf("I'll have a bash subagent run `%s` and report back.", cmd),
		calls: []demoCall{newDemoCall(ToolTask, map[string]string{
			"description":   "Run Shell Command",
			"prompt":        fmt.Sprintf("Run `%s` in the workspace with the bash tool and report its output.", cmd),
			"subagent_type": SubagentBash,
		})},
	}
}

func demoDirectAnswer(human, cmd string, types []string, label string) demoReply {
	var b strings.Builder
	if first := demoFirstLine(human); first != "" {
		fmt.Fprintf(&b, "You wrote: “%s” (%d words).\n\n", demoClip(first, 120), len(strings.Fields(human)))
	} else {
		b.WriteString("Your message was empty.\n\n")
	}
	fmt.Fprintf(&b, "I'm **%s**, herd's offline demo model. I follow fixed rules instead of "+
		"understanding your message, so I can't give you a real answer, but I can show you how herd delegates:\n\n", label)
	b.WriteString("- **Send a list**, one item per line starting with `- ` or `1. `, and I start one subagent per item, all in parallel.\n")
	if slices.Contains(types, SubagentBash) {
		b.WriteString("- **Put a command in backticks**, as in ``Run `sleep 2 && echo Done` ``, and a bash subagent runs it and reports its output.\n")
	}
	// A custom type makes the better example: it shows that config adds types.
	example := ""
	for _, t := range types {
		if t != SubagentGeneral && (example == "" || example == SubagentBash) {
			example = t
		}
	}
	if example != "" {
		fmt.Fprintf(&b, "- **Start an item with a subagent type**, such as `%s: …`, to choose who does it.\n", example)
	}
	if cmd != "" && !slices.Contains(types, SubagentBash) {
		fmt.Fprintf(&b, "\nI saw the command `%s`, but the bash subagent is not available here, so I can't run it.\n", cmd)
	}
	if len(types) > 0 {
		fmt.Fprintf(&b, "\nAvailable subagent types: %s.", strings.Join(types, ", "))
	}
	return demoReply{text: strings.TrimRight(b.String(), "\n")}
}

// demoTaskOutcome parses a task ToolMessage (SPEC §5.3) into its status and
// the subagent's own words; the safety net's bare error text matches
// nothing and is quoted whole.
var demoTaskOutcome = regexp.MustCompile(`(?s)^Task (Succeeded|failed|cancelled by user|timed out)( \(capped: [^)]*\))?\.(?: (?:Result|Error): (.*))?$`)

var demoOutcomeWords = map[string]string{
	"Succeeded":         "succeeded",
	"failed":            "failed",
	"cancelled by user": "was cancelled",
	"timed out":         "timed out",
}

// demoLeadAfterTools answers once the lead's tool calls have returned: a
// summary citing each task's result, or the other tools' output.
func demoLeadAfterTools(msgs []Message) demoReply {
	start := len(msgs)
	for start > 0 && msgs[start-1].Type == TypeTool {
		start--
	}
	results := msgs[start:]
	calls := map[string]ToolCall{}
	if start > 0 {
		for _, c := range msgs[start-1].ToolCalls {
			calls[c.ID] = c
		}
	}

	var b strings.Builder
	tasks, succeeded := 0, 0
	for _, m := range results {
		call, known := calls[m.ToolCallID]
		if call.Name != ToolTask && (known || m.Name != ToolTask) {
			continue
		}
		tasks++
		var args struct {
			Description  string `json:"description"`
			SubagentType string `json:"subagent_type"`
		}
		_ = json.Unmarshal(call.Args, &args) // an unreadable call is still reported, as "Task"
		if args.Description == "" {
			args.Description = "Task"
		}
		status, detail := "did not finish", m.Content
		if o := demoTaskOutcome.FindStringSubmatch(strings.TrimSpace(m.Content)); o != nil {
			status, detail = demoOutcomeWords[o[1]]+o[2], o[3]
			if o[1] == "Succeeded" {
				succeeded++
			}
		}
		fmt.Fprintf(&b, "- **%s**", args.Description)
		if args.SubagentType != "" {
			fmt.Fprintf(&b, " (%s)", args.SubagentType)
		}
		if excerpt := demoOneLine(detail, 200); excerpt != "" {
			fmt.Fprintf(&b, " %s: %s\n", status, excerpt)
		} else {
			fmt.Fprintf(&b, " %s, with nothing to report.\n", status)
		}
	}
	if tasks == 0 {
		return demoToolsAnswer(results)
	}

	head := "Here is what the subagent reported:\n\n"
	if tasks > 1 {
		head = fmt.Sprintf("Here is what the %d subagents reported:\n\n", tasks)
	}
	closing := fmt.Sprintf("\n%d of %d tasks succeeded.", succeeded, tasks)
	if succeeded == tasks {
		closing = "\nEverything I delegated is done."
	}
	return demoReply{text: head + b.String() + closing +
		" (Summary by the offline demo model, in the subagents' own words.)"}
}

func demoToolsAnswer(results []Message) demoReply {
	var b strings.Builder
	b.WriteString("Here is what the tools returned:\n")
	for _, m := range results {
		name := m.Name
		if name == "" {
			name = "tool"
		}
		fmt.Fprintf(&b, "\n**%s**\n\n%s\n", name, demoCodeBlock(m.Content))
	}
	b.WriteString("\nThat is all the offline demo model can tell you about it.")
	return demoReply{text: b.String()}
}

// --- The subagent ---

func demoSubagent(msgs []Message, offered map[string]bool, turns int) demoReply {
	prompt := demoFirstOf(msgs, TypeHuman)
	turn := demoCount(msgs, TypeAI) + 1
	if cmd, ok := demoCommand(prompt); ok && offered[tools.Bash] {
		if turn == 1 {
			return demoReply{
				text:  fmt.Sprintf("Running `%s`.", cmd),
				calls: []demoCall{newDemoCall(tools.Bash, map[string]string{"command": cmd})},
			}
		}
		out := demoLastOf(msgs, TypeTool)
		if strings.TrimSpace(out) == "" {
			return demoReply{text: fmt.Sprintf("I ran `%s` in the workspace. It printed nothing.", cmd)}
		}
		return demoReply{text: fmt.Sprintf("I ran `%s` in the workspace. It printed:\n\n%s", cmd, demoCodeBlock(out))}
	}

	topic := demoFirstLine(prompt)
	if plan := demoSubagentPlan(topic, offered, turns-1); turn <= len(plan) {
		return plan[turn-1]
	}
	return demoSubagentAnswer(topic, msgs)
}

// demoSubagentPlan lists the tool-calling turns of the general path, using
// only offered tools. Every call's arguments differ, so a long plan never
// looks like a loop (SPEC §4.5 loop_capped); it runs short only when
// write_file is missing, because without it nothing new can be looked at.
func demoSubagentPlan(topic string, offered map[string]bool, n int) []demoReply {
	var plan []demoReply
	add := func(text, tool string, args map[string]string) {
		if len(plan) < n && offered[tool] {
			plan = append(plan, demoReply{text: text, calls: []demoCall{newDemoCall(tool, args)}})
		}
	}
	// Each subagent keeps to its own folder: parallel subagents share the
	// thread's workspace, and listing one shared folder would cost each of
	// them a pass over every other's files.
	dir := "notes/" + demoSlug(topic)
	notes := dir + "/plan.md"
	canWrite := offered[tools.WriteFile]
	add(fmt.Sprintf("Writing my plan to `%s` first.", notes), tools.WriteFile, map[string]string{
		"path": notes,
		"content": "# Plan\n\nTask: " + topic + "\n\n" +
			"1. Write down what is being asked.\n" +
			"2. Look at what the workspace already holds.\n" +
			"3. Re-read these notes against the task.\n" +
			"4. Answer in a few sentences.\n\nStatus: draft\n",
	})
	if canWrite {
		add(fmt.Sprintf("Checking what is in `%s/`.", dir), tools.Ls, map[string]string{"path": dir})
		add("Re-reading my notes.", tools.ReadFile, map[string]string{"path": notes})
	} else {
		add("Checking what the workspace holds.", tools.Ls, map[string]string{"path": "."})
	}
	for k := 1; canWrite && len(plan) < n; k++ {
		part := fmt.Sprintf("%s/part-%d.md", dir, k)
		add(fmt.Sprintf("Drafting part %d in `%s`.", k, part), tools.WriteFile, map[string]string{
			"path":    part,
			"content": fmt.Sprintf("# Part %d\n\nFindings on: %s\n\nStatus: draft\n", k, topic),
		})
		add(fmt.Sprintf("Marking part %d as reviewed.", k), tools.StrReplace, map[string]string{
			"path": part, "old_str": "Status: draft", "new_str": "Status: reviewed",
		})
		add(fmt.Sprintf("Reading part %d back.", k), tools.ReadFile, map[string]string{"path": part})
	}
	return plan
}

// demoSubagentAnswer reports what the earlier turns actually did, read back
// from the messages rather than from the plan.
func demoSubagentAnswer(topic string, msgs []Message) demoReply {
	var used, written []string
	calls := 0
	for _, m := range msgs {
		if m.Type != TypeAI {
			continue
		}
		for _, c := range m.ToolCalls {
			calls++
			if !slices.Contains(used, c.Name) {
				used = append(used, c.Name)
			}
			var args struct {
				Path string `json:"path"`
			}
			if c.Name == tools.WriteFile && json.Unmarshal(c.Args, &args) == nil && args.Path != "" {
				written = append(written, "`"+args.Path+"`")
			}
		}
	}
	var b strings.Builder
	if topic == "" {
		topic = "the task"
	}
	fmt.Fprintf(&b, "Finished: %s\n\n", demoClip(topic, 160))
	b.WriteString("This is a scripted answer from herd's offline demo model: it follows fixed rules and did no real research.\n\n")
	if calls == 0 {
		b.WriteString("- I had no workspace tools to use, so I made no tool calls.")
		return demoReply{text: b.String()}
	}
	fmt.Fprintf(&b, "- Tool calls: %d (%s).\n", calls, strings.Join(used, ", "))
	if len(written) > 0 {
		fmt.Fprintf(&b, "- Files I wrote: %s.", strings.Join(written, ", "))
	} else {
		b.WriteString("- I wrote no files.")
	}
	return demoReply{text: b.String()}
}

// --- Text helpers ---

var demoInlineCode = regexp.MustCompile("`([^`\n]+)`")

// demoCommand returns the first inline code span of s: the demo's
// signal that s asks for a shell command.
func demoCommand(s string) (string, bool) {
	for _, m := range demoInlineCode.FindAllStringSubmatch(s, -1) {
		if cmd := strings.TrimSpace(m[1]); cmd != "" {
			return cmd, true
		}
	}
	return "", false
}

// demoDescribe makes a task's 3–5 word title from its text.
func demoDescribe(item string) string {
	var words []string
	for _, f := range strings.Fields(item) {
		w := strings.TrimFunc(f, func(r rune) bool { return !demoWordRune(r) })
		if w == "" {
			continue
		}
		r, size := utf8.DecodeRuneInString(w)
		words = append(words, string(unicode.ToUpper(r))+w[size:])
		if len(words) == 5 {
			break
		}
	}
	if len(words) < 3 {
		words = append([]string{"Work", "On"}, words...)
	}
	return strings.Join(words, " ")
}

// demoSlug names a subagent's notes file after its topic.
func demoSlug(topic string) string {
	var b strings.Builder
	words := 0
	for _, f := range strings.FieldsFunc(strings.ToLower(topic), func(r rune) bool { return !demoWordRune(r) }) {
		if words == 6 || utf8.RuneCountInString(b.String())+utf8.RuneCountInString(f) > 40 {
			break
		}
		if words > 0 {
			b.WriteByte('-')
		}
		b.WriteString(f)
		words++
	}
	if b.Len() == 0 {
		return "task"
	}
	return b.String()
}

func demoWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func demoHasWord(s string) bool { return strings.IndexFunc(s, demoWordRune) >= 0 }

func demoFirstLine(s string) string {
	for line := range strings.Lines(s) {
		if t := strings.TrimSpace(line); t != "" {
			return t
		}
	}
	return ""
}

func demoFirstOf(msgs []Message, typ string) string {
	for _, m := range msgs {
		if m.Type == typ {
			return m.Content
		}
	}
	return ""
}

func demoLastOf(msgs []Message, typ string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Type == typ {
			return msgs[i].Content
		}
	}
	return ""
}

func demoCount(msgs []Message, typ string) int {
	n := 0
	for _, m := range msgs {
		if m.Type == typ {
			n++
		}
	}
	return n
}

// demoClip cuts s to at most n runes, marking the cut.
func demoClip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// demoOneLine flattens s to one clipped line for a bullet, dropping code fence
// markers that would otherwise swallow the rest of the list.
func demoOneLine(s string, n int) string {
	var words []string
	for line := range strings.Lines(s) {
		if t := strings.TrimSpace(line); !strings.HasPrefix(t, "```") {
			words = append(words, strings.Fields(t)...)
		}
	}
	return demoClip(strings.Join(words, " "), n)
}

// demoCodeBlock fences s with more backticks than it contains in a row, so
// tool output cannot close the block early.
func demoCodeBlock(s string) string {
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	return fence + "\n" + strings.TrimRight(s, "\n") + "\n" + fence
}

// demoChunks splits s into word-sized pieces, each word with the space
// after it, so the pieces concatenate back to s exactly.
func demoChunks(s string) []string {
	var chunks []string
	start, inSpace := 0, false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if inSpace && !space {
			chunks = append(chunks, s[start:i])
			start = i
		}
		inSpace = space
	}
	if start < len(s) {
		chunks = append(chunks, s[start:])
	}
	return chunks
}

// demoTokens counts tokens the way Demo documents: runs of letters and
// digits, CJK ideographs and other non-space characters count one each.
func demoTokens(s string) int64 {
	var n int64
	inWord := false
	for _, r := range s {
		word := demoWordRune(r) && !unicode.Is(unicode.Han, r)
		if word && !inWord || !word && !unicode.IsSpace(r) {
			n++
		}
		inWord = word
	}
	return n
}

func demoUsage(req Request, resp Response) *Usage {
	var in, out int64
	for _, m := range req.Messages {
		in += demoTokens(m.Content)
		for _, c := range m.ToolCalls {
			in += demoTokens(string(c.Args))
		}
	}
	out = demoTokens(resp.Text)
	for _, c := range resp.ToolCalls {
		out += demoTokens(string(c.Args))
	}
	return &Usage{InputTokens: in, OutputTokens: out, TotalTokens: in + out}
}
