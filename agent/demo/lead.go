package demo

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"herd/agent"
	"herd/agent/mcp"
)

func lead(msgs []agent.Message, types []string, offered map[string]bool, label string) reply {
	if n := len(msgs); n >= 2 && msgs[n-1].Type == agent.TypeHuman && msgs[n-1].Content == agent.ContinueNote && msgs[n-2].Type == agent.TypeAI {
		// An answer a restart cut off: the demo writes what it would have
		// written after the text so far, as a model that continues would.
		r := lead(msgs[:n-2], types, offered, label)
		if rest, ok := strings.CutPrefix(r.text, msgs[n-2].Content); ok {
			r.text, r.reasoning = rest, ""
		}
		return r
	}
	if len(msgs) > 0 && msgs[len(msgs)-1].Type == agent.TypeTool {
		return leadAfterTools(msgs)
	}
	r := leadFirstTurn(msgs, types, offered, label)
	r.reasoning = plan(len(r.calls))
	return r
}

// plan is the demo lead's reasoning on its first turn, so that the page's
// Thinking block shows with the demo model too.
func plan(tasks int) string {
	switch tasks {
	case 0:
		return "No list of items and no command in backticks: nothing to delegate, so I answer directly."
	case 1:
		return "One piece of work to hand off: a subagent does it, and I report its result."
	}
	return fmt.Sprintf("%d items: one subagent each, all in parallel; I sum up their results when they are back.", tasks)
}

func leadFirstTurn(msgs []agent.Message, types []string, offered map[string]bool, label string) reply {
	last := lastHuman(msgs)
	human, files := splitNote(last.Content)
	images := last.Images
	if len(files) > 0 && asksAboutAttached(human) {
		return readAttached(files, images, types)
	}
	r := leadRules(msgs, human, types, offered, label)
	if lines := seen(images); len(lines) > 0 {
		// A model that sees says what it was shown, whatever else it does.
		r.text = "I see the attached images:\n\n- " + strings.Join(lines, "\n- ") + "\n\n" + r.text
	}
	return r
}

// leadRules answers the user's text by the demo's rules: a list is
// delegated item by item, a lead's own MCP tool is used, a command is run
// by a bash subagent, anything else is answered directly.
func leadRules(msgs []agent.Message, human string, types []string, offered map[string]bool, label string) reply {
	noShell := ""
	if !slices.Contains(types, agent.SubagentBash) {
		noShell = whyNoCommands(msgs)
	}
	intro, items := parseList(human)
	if len(items) > 0 {
		return delegateList(intro, items, types, noShell)
	}
	// An MCP tool of the lead's own (lead.tools) it calls itself.
	if u, ok := parseUse(human); ok && offered[mcp.ModelName(u.server, u.tool)] {
		return useReply(u, msgs, offered, 1)
	}
	cmd, hasCmd := command(human)
	if hasCmd && noShell == "" {
		return delegateCommand(cmd)
	}
	return directAnswer(human, cmd, types, label, noShell)
}

// whyNoCommands is why the lead, which is offered no bash subagent, cannot
// have commands run: the reason its system prompt gives (agent.CommandsOff),
// or that none is configured.
func whyNoCommands(msgs []agent.Message) string {
	for line := range strings.Lines(firstOf(msgs, agent.TypeSystem)) {
		if reason, ok := strings.CutPrefix(strings.TrimSpace(line), agent.CommandsOff); ok && reason != "" {
			return "Commands are turned off for your account: " + reason
		}
	}
	return "This server has no bash subagent, so nobody can run commands here."
}

// noCommandsReply tells the user that the commands they asked for cannot
// run, and why.
func noCommandsReply(what, why string) string {
	return fmt.Sprintf("I can't run %s. %s", what, why)
}

var numbered = regexp.MustCompile(`^[0-9]{1,3}[.)][ \t]+`)

// parseList splits a message into its list items (top-level lines starting
// with "- ", "* ", "1. " or "1) ", plus their indented continuation lines)
// and its first other line, which gives the items their context. Fenced
// code blocks are skipped: a list there is an example, not a request.
func parseList(msg string) (intro string, items []string) {
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
		if item, ok := listItem(line); ok {
			if hasWord(item) {
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

func listItem(line string) (string, bool) {
	for _, marker := range []string{"- ", "* ", "-\t", "*\t"} {
		if rest, ok := strings.CutPrefix(line, marker); ok {
			return strings.TrimSpace(rest), true
		}
	}
	if m := numbered.FindString(line); m != "" {
		return strings.TrimSpace(line[len(m):]), true
	}
	return "", false
}

var typePrefix = regexp.MustCompile(`^([A-Za-z0-9_-]+):[ \t]*`)

// delegateList starts one task per item. An item for the bash type when
// none is offered (noShell says why) is not delegated but answered: the
// user is told in plain words why it does not run.
func delegateList(intro string, items []string, types []string, noShell string) reply {
	fallback := agent.SubagentGeneral
	if len(types) > 0 && !slices.Contains(types, agent.SubagentGeneral) {
		fallback = types[0]
	}
	items, refused := withoutShellItems(items, noShell)
	var r reply
	switch {
	case len(items) == 0:
		return reply{text: noCommandsReply(plural(refused, "that command", "those %d commands"), noShell)}
	case len(items) == 1:
		r.text = "I'll hand this item to a subagent."
	default:
		r.text = fmt.Sprintf("I'll hand these %d items to subagents in parallel.", len(items))
	}
	if refused > 0 {
		r.text += " " + noCommandsReply(plural(refused, "the `bash:` item", "the %d `bash:` items"), noShell)
	}
	for _, item := range items {
		kind := fallback
		if m := typePrefix.FindStringSubmatch(item); m != nil && hasWord(item[len(m[0]):]) {
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
		r.calls = append(r.calls, newCall(agent.ToolTask, map[string]string{
			"description":   describe(item),
			"prompt":        prompt,
			"subagent_type": kind,
		}))
	}
	return r
}

// withoutShellItems drops the items that ask for the bash type when
// noShell says it is not offered, and counts them.
func withoutShellItems(items []string, noShell string) ([]string, int) {
	if noShell == "" {
		return items, 0
	}
	kept := items[:0:0]
	for _, item := range items {
		if m := typePrefix.FindStringSubmatch(item); m != nil && strings.EqualFold(m[1], agent.SubagentBash) {
			continue
		}
		kept = append(kept, item)
	}
	return kept, len(items) - len(kept)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return fmt.Sprintf(many, n)
}

func delegateCommand(cmd string) reply {
	return reply{
		text: fmt.Sprintf("I'll have a bash subagent run `%s` and report back.", cmd),
		calls: []call{newCall(agent.ToolTask, map[string]string{
			"description":   "Run Shell Command",
			"prompt":        fmt.Sprintf("Run `%s` in the workspace with the bash tool and report its output.", cmd),
			"subagent_type": agent.SubagentBash,
		})},
	}
}

func directAnswer(human, cmd string, types []string, label, noShell string) reply {
	var b strings.Builder
	if cmd != "" && noShell != "" {
		// The user asked for a command: why it does not run comes first.
		b.WriteString(noCommandsReply(fmt.Sprintf("`%s`", cmd), noShell) + "\n\n")
	}
	if first := firstLine(human); first != "" {
		fmt.Fprintf(&b, "You wrote: “%s” (%d words).\n\n", clip(first, 120), len(strings.Fields(human)))
	} else {
		b.WriteString("Your message was empty.\n\n")
	}
	fmt.Fprintf(&b, "I'm **%s**, herd's offline demo model. I follow fixed rules instead of "+
		"understanding your message, so I can't give you a real answer, but I can show you how herd delegates.\n\n", label)
	b.WriteString("### How to delegate\n\n")
	b.WriteString("- **Send a list**, one item per line starting with `- ` or `1. `, and I start one subagent per item, all in parallel.\n")
	bash := slices.Contains(types, agent.SubagentBash)
	if bash {
		b.WriteString("- **Put a command in backticks**, as in ``Run `sleep 2 && echo Done` ``, and a bash subagent runs it and reports its output.\n")
	}
	// A custom type makes the better example: it shows that config adds types.
	example := ""
	for _, t := range types {
		if t != agent.SubagentGeneral && (example == "" || example == agent.SubagentBash) {
			example = t
		}
	}
	if example != "" {
		fmt.Fprintf(&b, "- **Start an item with a subagent type**, such as `%s: …`, to choose who does it.\n", example)
	}
	b.WriteString("- **Write anything else**, and I answer like this: I do not understand text.\n")
	b.WriteString("\n" + exampleMessage(bash))
	if len(types) > 0 {
		fmt.Fprintf(&b, "\nAvailable subagent types: %s.", strings.Join(types, ", "))
	}
	return reply{text: strings.TrimRight(b.String(), "\n")}
}

// exampleMessage is a message to try, as a fenced Markdown block: the
// page shows it highlighted, with a Copy button, as it streams.
func exampleMessage(bash bool) string {
	last := "- List three uses of a queue"
	if bash {
		last = "- bash: run `uname -sr`"
	}
	return "For example, send this to start three subagents at once:\n\n" +
		"```markdown\nThree jobs for the demo:\n- Compare SQLite and PostgreSQL\n- Write a haiku about servers\n" + last + "\n```\n"
}

// taskOutcome parses a task ToolMessage (docs/DESIGN.md §8) into its status and
// the subagent's own words; the safety net's bare error text matches
// nothing and is quoted whole.
var taskOutcome = regexp.MustCompile(`(?s)^Task (Succeeded|failed|cancelled by user|timed out)( \(capped: [^)]*\))?\.(?: (?:Result|Error): (.*))?$`)

var outcomeWords = map[string]string{
	"Succeeded":         "succeeded",
	"failed":            "failed",
	"cancelled by user": "was cancelled",
	"timed out":         "timed out",
}

// leadAfterTools answers once the lead's tool calls have returned: the
// tasks a limit held back are called again, as their results ask; then a
// summary cites each task's result since the user's message, or the other
// tools' output.
func leadAfterTools(msgs []agent.Message) reply {
	if again := callAgain(lastToolResults(msgs)); len(again.calls) > 0 {
		return again
	}
	results, calls := toolResultsSince(msgs, agent.TypeHuman)
	var b strings.Builder
	tasks, succeeded := 0, 0
	for _, m := range results {
		call, known := calls[m.ToolCallID]
		if call.Name != agent.ToolTask && (known || m.Name != agent.ToolTask) || heldBack(m) {
			continue
		}
		tasks++
		item, ok := taskItem(call, m)
		b.WriteString(item)
		if ok {
			succeeded++
		}
	}
	if tasks == 0 {
		last, _ := lastToolResults(msgs)
		return toolsAnswer(last)
	}

	head := "Here is what the subagent reported:\n\n"
	if tasks > 1 {
		head = fmt.Sprintf("Here is what the %d subagents reported:\n\n", tasks)
	}
	closing := fmt.Sprintf("\n%d of %d tasks succeeded.", succeeded, tasks)
	if succeeded == tasks {
		closing = "\nEverything I delegated is done."
	}
	return reply{text: head + b.String() + closing +
		" (Summary by the offline demo model, in the subagents' own words.)"}
}

// heldBack reports whether a task result says a limit held the call back
// for now, to be called again (agent.TaskCallAgain).
func heldBack(m agent.Message) bool {
	return m.Name == agent.ToolTask && strings.Contains(m.Content, agent.TaskCallAgain)
}

// callAgain calls task again, with the same arguments, for every result
// that a limit held back; a call the runtime holds back again comes back
// in the next turn, and every turn starts at least one.
func callAgain(results []agent.Message, calls map[string]agent.ToolCall) reply {
	var r reply
	for _, m := range results {
		if c, ok := calls[m.ToolCallID]; ok && heldBack(m) {
			r.calls = append(r.calls, call{name: agent.ToolTask, args: c.Args})
		}
	}
	switch n := len(r.calls); {
	case n == 1:
		r.text = "One item had to wait for the others; I'm starting it now."
	case n > 1:
		r.text = fmt.Sprintf("%d items had to wait for the others; I'm starting them now.", n)
	}
	return r
}

// lastToolResults returns the tool messages that end msgs and, by id, the
// calls of the assistant message before them that they answer.
func lastToolResults(msgs []agent.Message) ([]agent.Message, map[string]agent.ToolCall) {
	start := len(msgs)
	for start > 0 && msgs[start-1].Type == agent.TypeTool {
		start--
	}
	calls := map[string]agent.ToolCall{}
	if start > 0 {
		for _, c := range msgs[start-1].ToolCalls {
			calls[c.ID] = c
		}
	}
	return msgs[start:], calls
}

// toolResultsSince returns the tool messages after the last message of
// type typ and, by id, every call they answer: the results of all the
// lead's turns since the user spoke.
func toolResultsSince(msgs []agent.Message, typ string) ([]agent.Message, map[string]agent.ToolCall) {
	start := len(msgs)
	for start > 0 && msgs[start-1].Type != typ {
		start--
	}
	var results []agent.Message
	calls := map[string]agent.ToolCall{}
	for _, m := range msgs[start:] {
		switch m.Type {
		case agent.TypeTool:
			results = append(results, m)
		case agent.TypeAI:
			for _, c := range m.ToolCalls {
				calls[c.ID] = c
			}
		}
	}
	return results, calls
}

// wroteFile is the sentence that ends a subagent's answer naming the file
// it wrote (readReply), and the words before it.
var wroteFile = regexp.MustCompile("(?s)^(.*?)\\s*Wrote `([^`\n]+)`\\.\\s*$")

// taskItem renders a task's result m as a list item in the subagent's own
// words, and reports whether the task succeeded.
func taskItem(call agent.ToolCall, m agent.Message) (string, bool) {
	var args struct {
		Description  string `json:"description"`
		SubagentType string `json:"subagent_type"`
	}
	_ = json.Unmarshal(call.Args, &args) // an unreadable call is still reported, as "Task"
	if args.Description == "" {
		args.Description = "Task"
	}
	status, detail, succeeded := "did not finish", m.Content, false
	if o := taskOutcome.FindStringSubmatch(strings.TrimSpace(m.Content)); o != nil {
		status, detail, succeeded = outcomeWords[o[1]]+o[2], o[3], o[1] == "Succeeded"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "- **%s**", args.Description)
	if args.SubagentType != "" {
		fmt.Fprintf(&b, " (%s)", args.SubagentType)
	}
	excerpt := oneLine(detail, 200)
	if w := wroteFile.FindStringSubmatch(detail); w != nil {
		// The file a subagent wrote is named whole, in backticks, however
		// long its words before: the page links the path (static/filelinks.js).
		excerpt = strings.TrimSpace(oneLine(w[1], 200) + " Wrote `" + w[2] + "`.")
	}
	if excerpt != "" {
		fmt.Fprintf(&b, " %s: %s\n", status, excerpt)
	} else {
		fmt.Fprintf(&b, " %s, with nothing to report.\n", status)
	}
	return b.String(), succeeded
}

func toolsAnswer(results []agent.Message) reply {
	var b strings.Builder
	b.WriteString("Here is what the tools returned:\n")
	for _, m := range results {
		name := m.Name
		if name == "" {
			name = "tool"
		}
		fmt.Fprintf(&b, "\n**%s**\n\n%s\n", name, codeBlock(m.Content))
	}
	b.WriteString("\nThat is all the offline demo model can tell you about it.")
	return reply{text: b.String()}
}
