package agent

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"herd/agent/tools"
)

// Activity words (docs/DESIGN.md §9): a running card says what its
// subagent is doing in words, from its latest step. static/format.js
// (activityText) writes the same words live; the examples both are tested
// against are in contracts/card_format_contract.json ("activities").

// activityWidth bounds a path or command in the status line, in runes.
const activityWidth = 60

// ActivityText is a step in words: the tool calls of an AI step
// ("Reading notes/plan.md", "Running `sleep 2` and 1 more"), "Thinking"
// once a step's tool results are in (the next model call is under way),
// "Finishing" after an answer without calls, a resumed step's own words
// ("Resumed after a restart (lost 4.2 s)") until the next step.
func ActivityText(s StepBody) string {
	switch s.Kind {
	case stepTool:
		return "Thinking"
	case stepResumed:
		return resumedActivity(s)
	}
	if len(s.ToolCalls) == 0 {
		return "Finishing"
	}
	words := callText(s.ToolCalls[0])
	if n := len(s.ToolCalls) - 1; n > 0 {
		words += " and " + strconv.Itoa(n) + " more"
	}
	return words
}

// callText is one tool call in words, its path or command bounded; a call
// whose arguments cannot be read (cut at the step bound) names the tool's
// kind of work without them.
func callText(c StepCall) string {
	var a struct {
		Path    string `json:"path"`
		Command string `json:"command"`
	}
	_ = json.Unmarshal([]byte(c.Args), &a)
	path := strings.TrimSpace(a.Path)
	switch c.Name {
	case tools.ReadFile:
		return "Reading " + orWords(tail(path), "a file")
	case tools.WriteFile:
		return "Writing " + orWords(tail(path), "a file")
	case tools.StrReplace:
		return "Editing " + orWords(tail(path), "a file")
	case tools.Ls:
		if path == "" || path == "." || path == "./" {
			return "Listing files"
		}
		return "Listing " + tail(path)
	case tools.Bash:
		cmd, _, _ := strings.Cut(strings.TrimSpace(a.Command), "\n")
		if cmd == "" {
			return "Running a command"
		}
		return "Running `" + head(cmd) + "`"
	}
	return "Using " + ToolLabel(c.Name, c.Title)
}

func orWords(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

// head keeps a command's start, tail a path's end: the part that says
// which.
func head(s string) string {
	if utf8.RuneCountInString(s) <= activityWidth {
		return s
	}
	r := []rune(s)
	return string(r[:activityWidth-1]) + "…"
}

func tail(s string) string {
	if utf8.RuneCountInString(s) <= activityWidth {
		return s
	}
	r := []rune(s)
	return "…" + string(r[len(r)-activityWidth+1:])
}
