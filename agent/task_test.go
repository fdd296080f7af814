package agent

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"herd/agent/tools"
)

// TestTaskToolSchema pins the task tool's parameters as the lead LLM reads
// them: the four fields, the enum of subagent types, the required ones and
// no others.
func TestTaskToolSchema(t *testing.T) {
	spec := taskToolSpec([]catalogEntry{{name: "general-purpose", description: "g"}, {name: "researcher", description: "r"}})
	if spec.Name != ToolTask {
		t.Errorf("name = %q, want %q", spec.Name, ToolTask)
	}
	want := `{"type":"object","properties":{` +
		`"description":{"type":"string","description":"A short title of 3-5 words, shown to the user."},` +
		`"prompt":{"type":"string","description":"The full, self-contained task for the subagent."},` +
		`"subagent_type":{"type":"string","enum":["general-purpose","researcher"],"description":"Which subagent runs the task."},` +
		`"acceptance_criteria":{"type":"string","description":"Optional: what the result must satisfy."}` +
		`},"required":["description","prompt","subagent_type"],"additionalProperties":false}`
	var got, wantV any
	if err := json.Unmarshal(spec.Parameters, &got); err != nil {
		t.Fatalf("parameters are not JSON: %v", err)
	}
	if err := json.Unmarshal([]byte(want), &wantV); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, wantV) {
		t.Errorf("parameters =\n%s\nwant\n%s", spec.Parameters, want)
	}
}

// TestTaskSchemaChecksArgs runs the task schema's own check on arguments,
// so the enum and the required fields the lead reads are the ones enforced.
func TestTaskSchemaChecksArgs(t *testing.T) {
	s := taskSchema([]string{"general-purpose"})
	tests := []struct {
		name string
		args string
		ok   bool
	}{
		{name: "listed type", args: `{"description":"d","prompt":"p","subagent_type":"general-purpose"}`, ok: true},
		{name: "unlisted type", args: `{"description":"d","prompt":"p","subagent_type":"bash"}`},
		{name: "missing prompt", args: `{"description":"d","subagent_type":"general-purpose"}`},
		{name: "unknown field", args: `{"description":"d","prompt":"p","subagent_type":"general-purpose","x":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a taskArgs
			err := s.Decode(json.RawMessage(tt.args), &a)
			if tt.ok && err != nil {
				t.Errorf("Decode: %v, want nil", err)
			}
			if !tt.ok && !errors.Is(err, tools.ErrBadArgs) {
				t.Errorf("Decode error = %v, want ErrBadArgs", err)
			}
		})
	}
}
