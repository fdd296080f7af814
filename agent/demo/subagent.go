package demo

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"herd/agent"
	"herd/agent/tools"
)

func subagent(msgs []agent.Message, offered map[string]bool, turns int) reply {
	prompt := firstOf(msgs, agent.TypeHuman)
	turn := count(msgs, agent.TypeAI) + 1
	if m := readRequest.FindStringSubmatch(prompt); m != nil {
		return readReply(m, msgs, offered, turn)
	}
	if cmd, ok := command(prompt); ok && offered[tools.Bash] {
		if turn == 1 {
			return reply{
				text:  fmt.Sprintf("Running `%s`.", cmd),
				calls: []call{newCall(tools.Bash, map[string]string{"command": cmd})},
			}
		}
		out := lastOf(msgs, agent.TypeTool)
		if strings.TrimSpace(out) == "" {
			return reply{text: fmt.Sprintf("I ran `%s` in the workspace. It printed nothing.", cmd)}
		}
		return reply{text: fmt.Sprintf("I ran `%s` in the workspace. It printed:\n\n%s", cmd, codeBlock(out))}
	}

	if u, ok := parseUse(prompt); ok {
		return useReply(u, msgs, offered, turn)
	}

	topic := firstLine(prompt)
	if plan := subagentPlan(topic, offered, turns-1); turn <= len(plan) {
		return plan[turn-1]
	}
	return subagentAnswer(topic, msgs)
}

// subagentPlan lists the tool-calling turns of the general path, using
// only offered tools. Every call's arguments differ, so a long plan never
// looks like a loop (docs/DESIGN.md §5 loop_capped); it runs short only when
// write_file is missing, because without it nothing new can be looked at.
func subagentPlan(topic string, offered map[string]bool, n int) []reply {
	var plan []reply
	add := func(text, tool string, args map[string]string) {
		if len(plan) < n && offered[tool] {
			plan = append(plan, reply{text: text, calls: []call{newCall(tool, args)}})
		}
	}
	// Each subagent keeps to its own folder: parallel subagents share the
	// thread's workspace, and listing one shared folder would cost each of
	// them a pass over every other's files.
	dir := "notes/" + slug(topic)
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

// subagentAnswer reports what the earlier turns actually did, read back
// from the messages rather than from the plan.
func subagentAnswer(topic string, msgs []agent.Message) reply {
	var used, written []string
	calls := 0
	for _, m := range msgs {
		if m.Type != agent.TypeAI {
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
	fmt.Fprintf(&b, "Finished: %s\n\n", clip(topic, 160))
	b.WriteString("This is a scripted answer from herd's offline demo model: it follows fixed rules and did no real research.\n\n")
	if calls == 0 {
		b.WriteString("- I had no workspace tools to use, so I made no tool calls.")
		return reply{text: b.String()}
	}
	fmt.Fprintf(&b, "- Tool calls: %d (%s).\n", calls, strings.Join(used, ", "))
	if len(written) > 0 {
		fmt.Fprintf(&b, "- Files I wrote: %s.", strings.Join(written, ", "))
	} else {
		b.WriteString("- I wrote no files.")
	}
	return reply{text: b.String()}
}
