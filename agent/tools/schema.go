package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Schema is the JSON schema of a tool's arguments: an object of typed
// properties that admits no others. Decode enforces it, so the schema the
// model reads and the check its arguments meet cannot drift apart.
type Schema struct {
	Properties map[string]Prop
	Required   []string
}

// Prop is one argument: Type is "string" or "integer"; Enum, when set,
// lists a string's allowed values; Minimum, when non-zero, is an
// integer's least value.
type Prop struct {
	Type        string   `json:"type"`
	Enum        []string `json:"enum,omitempty"`
	Description string   `json:"description"`
	Minimum     int      `json:"minimum,omitempty"`
}

// Spec is the tool named name with description as a model sees it, its
// parameters being s.
func (s Schema) Spec(name, description string) Spec {
	params, err := json.Marshal(struct {
		Type                 string          `json:"type"`
		Properties           map[string]Prop `json:"properties"`
		Required             []string        `json:"required"`
		AdditionalProperties bool            `json:"additionalProperties"`
	}{"object", s.Properties, append([]string{}, s.Required...), false})
	if err != nil {
		// Only strings and ints are marshalled; failing here is a bug.
		panic(fmt.Sprintf("tools: marshal %s schema: %v", name, err))
	}
	return Spec{Name: name, Description: description, Parameters: params}
}

// Decode checks args against s and decodes them into dst. Every failure
// wraps ErrBadArgs and says which field is wrong and how. Empty args and
// null read as {}, as some providers send them for no arguments.
func (s Schema) Decode(args json.RawMessage, dst any) error {
	raw := bytes.TrimSpace(args)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return fmt.Errorf("%w: arguments must be a JSON object, got %s", ErrBadArgs, argExcerpt(raw))
	}
	allowed := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		allowed = append(allowed, name)
	}
	slices.Sort(allowed)
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		prop, ok := s.Properties[name]
		if !ok {
			return fmt.Errorf("%w: unknown field %q (allowed: %s)", ErrBadArgs, name, strings.Join(allowed, ", "))
		}
		if err := prop.check(name, fields[name]); err != nil {
			return err
		}
	}
	for _, name := range s.Required {
		if v, ok := fields[name]; !ok || string(v) == "null" {
			return fmt.Errorf("%w: missing required field %q", ErrBadArgs, name)
		}
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("%w: %v", ErrBadArgs, err)
	}
	return nil
}

func (p Prop) check(name string, v json.RawMessage) error {
	if string(v) == "null" {
		return nil
	}
	switch p.Type {
	case "string":
		if v[0] != '"' {
			return fmt.Errorf("%w: field %q must be a string, got %s", ErrBadArgs, name, jsonKind(v))
		}
		if len(p.Enum) > 0 {
			var s string
			if err := json.Unmarshal(v, &s); err != nil || !slices.Contains(p.Enum, s) {
				return fmt.Errorf("%w: field %q must be one of %s, got %s", ErrBadArgs, name, strings.Join(p.Enum, ", "), argExcerpt(v))
			}
		}
	case "integer":
		var n int
		if err := json.Unmarshal(v, &n); err != nil {
			return fmt.Errorf("%w: field %q must be an integer, got %s", ErrBadArgs, name, argExcerpt(v))
		}
		if p.Minimum != 0 && n < p.Minimum {
			return fmt.Errorf("%w: field %q must be at least %d, got %d", ErrBadArgs, name, p.Minimum, n)
		}
	}
	return nil
}

func jsonKind(v json.RawMessage) string {
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

// argExcerpt quotes the start of a malformed value so the error shows
// what was sent without echoing a huge payload back.
func argExcerpt(v []byte) string {
	const keep = 60
	if len(v) > keep {
		return string(v[:keep]) + "…"
	}
	return string(v)
}
