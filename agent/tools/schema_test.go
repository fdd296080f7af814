package tools

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var pickSchema = Schema{
	Properties: map[string]Prop{
		"kind":  {Type: "string", Enum: []string{"a", "b"}, Description: "Which."},
		"count": {Type: "integer", Minimum: 1, Description: "How many."},
	},
	Required: []string{"kind"},
}

func TestSchemaSpec(t *testing.T) {
	spec := pickSchema.Spec("pick", "Pick one.")
	var got, want any
	if err := json.Unmarshal(spec.Parameters, &got); err != nil {
		t.Fatalf("parameters are not JSON: %v", err)
	}
	_ = json.Unmarshal([]byte(`{"type":"object","properties":{`+
		`"kind":{"type":"string","enum":["a","b"],"description":"Which."},`+
		`"count":{"type":"integer","description":"How many.","minimum":1}},`+
		`"required":["kind"],"additionalProperties":false}`), &want)
	if spec.Name != "pick" || spec.Description != "Pick one." || !reflect.DeepEqual(got, want) {
		t.Errorf("spec = %s %q %s, want pick with %v", spec.Name, spec.Description, spec.Parameters, want)
	}
}

func TestSchemaDecode(t *testing.T) {
	tests := []struct {
		name string
		args string
		want string // part of the error; "" for success
	}{
		{name: "listed value", args: `{"kind":"b","count":2}`},
		{name: "value outside the enum", args: `{"kind":"c"}`, want: `field "kind" must be one of a, b, got "c"`},
		{name: "enum field of the wrong type", args: `{"kind":1}`, want: `field "kind" must be a string`},
		{name: "below the minimum", args: `{"kind":"a","count":0}`, want: `field "count" must be at least 1`},
		{name: "missing required", args: `{}`, want: `missing required field "kind"`},
		{name: "unknown field", args: `{"kind":"a","x":1}`, want: `unknown field "x" (allowed: count, kind)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dst struct {
				Kind  string `json:"kind"`
				Count int    `json:"count"`
			}
			err := pickSchema.Decode(json.RawMessage(tt.args), &dst)
			if tt.want == "" {
				if err != nil {
					t.Errorf("Decode(%s) = %v, want nil", tt.args, err)
				}
				return
			}
			if !errors.Is(err, ErrBadArgs) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decode(%s) = %v, want ErrBadArgs with %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestSetFilter(t *testing.T) {
	all := NewSet(Workspace()...)
	tests := []struct {
		name  string
		allow *[]string
		deny  []string
		want  []string
	}{
		{name: "everything", want: []string{Ls, ReadFile, WriteFile, StrReplace}},
		{name: "allow-list, in registration order", allow: &[]string{StrReplace, Ls}, want: []string{Ls, StrReplace}},
		{name: "deny wins over allow", allow: &[]string{Ls, ReadFile}, deny: []string{ReadFile}, want: []string{Ls}},
		{name: "empty allow-list", allow: &[]string{}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := all.Filter(tt.allow, tt.deny).Names(); !slices.Equal(got, tt.want) {
				t.Errorf("names = %v, want %v", got, tt.want)
			}
		})
	}
}
