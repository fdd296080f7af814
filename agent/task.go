package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"herd/agent/tools"
)

// taskArgs are the task tool's arguments (docs/DESIGN.md §5).
type taskArgs struct {
	Description        string `json:"description"`
	Prompt             string `json:"prompt"`
	SubagentType       string `json:"subagent_type"`
	AcceptanceCriteria string `json:"acceptance_criteria"`
}

func parseTaskArgs(raw json.RawMessage) (taskArgs, error) {
	var a taskArgs
	if len(raw) == 0 {
		return a, fmt.Errorf("%w: task needs description, prompt and subagent_type", tools.ErrBadArgs)
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return a, fmt.Errorf("%w: task arguments are not a JSON object: %v", tools.ErrBadArgs, err)
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"description", a.Description}, {"prompt", a.Prompt}, {"subagent_type", a.SubagentType}} {
		if strings.TrimSpace(f.v) == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return a, fmt.Errorf("%w: task is missing %s", tools.ErrBadArgs, strings.Join(missing, ", "))
	}
	a.Description = strings.TrimSpace(a.Description)
	a.SubagentType = strings.TrimSpace(a.SubagentType)
	return a, nil
}

// fullPrompt is what the subagent is asked: the prompt and, when given,
// the criteria its answer must meet.
func (a taskArgs) fullPrompt() string {
	if c := strings.TrimSpace(a.AcceptanceCriteria); c != "" {
		return a.Prompt + "\n\nAcceptance criteria:\n" + c
	}
	return a.Prompt
}

// taskToolSpec is the task tool as the lead LLM sees it. The description is
// the delegation guidance: when delegating pays and when it does not.
func taskToolSpec(agents []catalogEntry) tools.Spec {
	var b strings.Builder
	b.WriteString(`Delegate one bounded piece of work to a subagent and wait for its result.

The call blocks until the subagent has finished and returns its final result (or its error) as the tool result. Do not poll: there is no status tool, and you never need one. Several task calls in the same response run in parallel.

Delegate when:
- the work splits into truly independent parts that can run in parallel and save real time;
- a subagent has tools or a model better suited to the part (see the types below);
- a large investigation would flood your own context, and only its conclusion matters.

Do not delegate:
- just because the work is complex or has many steps — doing it yourself is usually cheaper;
- steps that depend on each other's results (run them in order yourself);
- parts that write to the same files or share mutable state;
- anything that needs the user's input or a clarification;
- small things your own tools do directly.

Each subagent starts with no memory of this conversation: the prompt must be complete and self-contained (context, inputs, what to produce). You will need to check and combine the results.

Subagent types:
`)
	names := make([]string, 0, len(agents))
	for _, a := range agents {
		fmt.Fprintf(&b, "- %s: %s\n", a.name, a.description)
		names = append(names, a.name)
	}
	return taskSchema(names).Spec(ToolTask, b.String())
}

// taskSchema is the task tool's arguments, subagent_type limited to the
// names of the catalog.
func taskSchema(subagentTypes []string) tools.Schema {
	return tools.Schema{
		Properties: map[string]tools.Prop{
			"description":         {Type: "string", Description: "A short title of 3-5 words, shown to the user."},
			"prompt":              {Type: "string", Description: "The full, self-contained task for the subagent."},
			"subagent_type":       {Type: "string", Enum: subagentTypes, Description: "Which subagent runs the task."},
			"acceptance_criteria": {Type: "string", Description: "Optional: what the result must satisfy."},
		},
		Required: []string{"description", "prompt", "subagent_type"},
	}
}

// canonicalJSON re-encodes a JSON value with sorted keys, so that the same
// arguments written differently compare equal for loop detection.
func canonicalJSON(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	b, err := json.Marshal(v) // encoding/json sorts map keys
	if err != nil {
		return string(raw)
	}
	return string(b)
}
