package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Persisted event types (SPEC §5.4) and their category.
const (
	EventRunStart       = "run.start"
	EventRunEnd         = "run.end"
	EventSubagentQueued = "subagent.queued"
	EventSubagentStart  = "subagent.start"
	EventSubagentStep   = "subagent.step"
	EventSubagentEnd    = "subagent.end"

	CategoryRun      = "run"
	CategorySubagent = "subagent"
)

// Live task frame types (SPEC §5.2).
const (
	FrameTaskQueued    = "task_queued"
	FrameTaskStarted   = "task_started"
	FrameTaskRunning   = "task_running"
	FrameTaskCompleted = "task_completed"
	FrameTaskFailed    = "task_failed"
	FrameTaskCancelled = "task_cancelled"
	FrameTaskTimedOut  = "task_timed_out"
)

// Step kinds.
const (
	StepAI   = "ai"
	StepTool = "tool"
)

// fieldKind is the type a field of an event's content must have.
type fieldKind string

const (
	kString   fieldKind = "string"   // any string
	kID       fieldKind = "id"       // a non-blank string
	kIndex    fieldKind = "index"    // an integer ≥ 1
	kBool     fieldKind = "bool"     // true or false
	kUsage    fieldKind = "usage"    // a usage snapshot (or null)
	kTotals   fieldKind = "totals"   // a usage report object
	kCalls    fieldKind = "calls"    // a list of {name, args, args_truncated?}
	kStatus   fieldKind = "status"   // a terminal subagent status
	kStop     fieldKind = "stop"     // a stop reason
	kStepKind fieldKind = "stepkind" // ai or tool
	kRunState fieldKind = "runstate" // a run status
)

// EventSpec is the shape of one persisted event type's content.
type EventSpec struct {
	Category string
	Required map[string]fieldKind
	Optional map[string]fieldKind
}

func taskFields(extra map[string]fieldKind) map[string]fieldKind {
	m := map[string]fieldKind{"task_id": kID, "execution_id": kID, "run_id": kID, "version": kIndex}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// eventSpecs is the Go side of contracts/run_event_stream_contract.json;
// TestEventContract asserts they agree.
var eventSpecs = map[string]EventSpec{
	EventRunStart: {
		Category: CategoryRun,
		Required: map[string]fieldKind{"run_id": kID, "model_name": kID},
	},
	EventRunEnd: {
		Category: CategoryRun,
		Required: map[string]fieldKind{"run_id": kID, "status": kRunState},
		Optional: map[string]fieldKind{"error": kString, "usage": kTotals},
	},
	EventSubagentQueued: {
		Category: CategorySubagent,
		Required: taskFields(map[string]fieldKind{"description": kString, "prompt": kString, "subagent_type": kID}),
		Optional: map[string]fieldKind{"model_name": kString},
	},
	EventSubagentStart: {
		Category: CategorySubagent,
		Required: taskFields(map[string]fieldKind{"description": kString, "prompt": kString, "subagent_type": kID}),
		Optional: map[string]fieldKind{"model_name": kString},
	},
	EventSubagentStep: {
		Category: CategorySubagent,
		Required: taskFields(map[string]fieldKind{"message_index": kIndex, "kind": kStepKind, "text": kString, "truncated": kBool}),
		Optional: map[string]fieldKind{"tool_calls": kCalls, "tool_name": kString, "usage": kUsage, "model_name": kString},
	},
	EventSubagentEnd: {
		Category: CategorySubagent,
		Required: taskFields(map[string]fieldKind{"status": kStatus}),
		Optional: map[string]fieldKind{
			"model_name": kString, "usage": kUsage, "result": kString, "result_truncated": kBool,
			"error": kString, "error_truncated": kBool, "stop_reason": kStop,
		},
	},
}

// EventSpecs returns the content shape of every persisted event type.
func EventSpecs() map[string]EventSpec { return eventSpecs }

// ValidateEvent checks an event's content against its type's shape: every
// required field present with the right type, optional fields typed, no
// unknown fields. Content must be decoded with UseNumber (or built in Go).
func ValidateEvent(eventType string, content map[string]any) error {
	spec, ok := eventSpecs[eventType]
	if !ok {
		return fmt.Errorf("event: unknown type %q", eventType)
	}
	for name, kind := range spec.Required {
		v, present := content[name]
		if !present {
			return fmt.Errorf("event %s: missing %s", eventType, name)
		}
		if err := checkField(kind, v); err != nil {
			return fmt.Errorf("event %s: %s: %w", eventType, name, err)
		}
	}
	for name, v := range content {
		if _, req := spec.Required[name]; req {
			continue
		}
		kind, opt := spec.Optional[name]
		if !opt {
			return fmt.Errorf("event %s: unknown field %s", eventType, name)
		}
		if v == nil && (kind == kUsage || kind == kTotals) {
			continue
		}
		if err := checkField(kind, v); err != nil {
			return fmt.Errorf("event %s: %s: %w", eventType, name, err)
		}
	}
	if eventType == EventSubagentStep {
		_, hasCalls := content["tool_calls"]
		_, hasTool := content["tool_name"]
		switch content["kind"] {
		case StepAI:
			if hasTool {
				return fmt.Errorf("event %s: tool_name on an ai step", eventType)
			}
		case StepTool:
			if hasCalls {
				return fmt.Errorf("event %s: tool_calls on a tool step", eventType)
			}
		}
	}
	return nil
}

func checkField(kind fieldKind, v any) error {
	switch kind {
	case kString:
		if _, ok := v.(string); !ok {
			return fmt.Errorf("want a string, got %T", v)
		}
	case kID:
		s, ok := v.(string)
		if !ok || strings.TrimSpace(s) == "" {
			return fmt.Errorf("want a non-blank string")
		}
	case kIndex:
		n, ok := wholeNumber(v)
		if !ok || n < 1 {
			return fmt.Errorf("want an integer ≥ 1, got %v", v)
		}
	case kBool:
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("want a boolean, got %T", v)
		}
	case kUsage:
		if NormalizeUsage(v) == nil {
			return fmt.Errorf("want a usage snapshot")
		}
	case kTotals:
		if _, ok := v.(map[string]any); !ok {
			return fmt.Errorf("want an object, got %T", v)
		}
	case kCalls:
		calls, ok := v.([]any)
		if !ok {
			return fmt.Errorf("want a list, got %T", v)
		}
		for i, c := range calls {
			m, ok := c.(map[string]any)
			if !ok {
				return fmt.Errorf("call %d: want an object", i)
			}
			if name, ok := m["name"].(string); !ok || name == "" {
				return fmt.Errorf("call %d: want a name", i)
			}
			if _, ok := m["args"].(string); !ok {
				return fmt.Errorf("call %d: want args as a string", i)
			}
			if t, present := m["args_truncated"]; present {
				if _, ok := t.(bool); !ok {
					return fmt.Errorf("call %d: args_truncated must be a boolean", i)
				}
			}
		}
	case kStatus:
		s, _ := v.(string)
		if !IsTerminal(s) {
			return fmt.Errorf("want a terminal status, got %v", v)
		}
	case kStop:
		s, _ := v.(string)
		if !validStopReason(s) {
			return fmt.Errorf("want a stop reason, got %v", v)
		}
	case kStepKind:
		if v != StepAI && v != StepTool {
			return fmt.Errorf("want ai or tool, got %v", v)
		}
	case kRunState:
		switch v {
		case "completed", "failed", "cancelled":
		default:
			return fmt.Errorf("want completed, failed or cancelled, got %v", v)
		}
	}
	return nil
}

// DecodeContent decodes an event's stored content keeping integers exact.
func DecodeContent(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("event content: %w", err)
	}
	if m == nil {
		return nil, fmt.Errorf("event content: not an object")
	}
	return m, nil
}

// FrameTypeOf returns the live frame type of a persisted event: the task_*
// type for subagent rows, the event type itself for run rows.
func FrameTypeOf(eventType string, content map[string]any) string {
	switch eventType {
	case EventSubagentQueued:
		return FrameTaskQueued
	case EventSubagentStart:
		return FrameTaskStarted
	case EventSubagentStep:
		return FrameTaskRunning
	case EventSubagentEnd:
		switch content["status"] {
		case StatusCompleted:
			return FrameTaskCompleted
		case StatusCancelled:
			return FrameTaskCancelled
		case StatusTimedOut, StatusPollingTimedOut:
			return FrameTaskTimedOut
		}
		return FrameTaskFailed
	}
	return eventType
}

// FrameData turns a persisted event's content into its frame's data (SPEC
// §5.2). Live frames and replays both go through it, so they are identical.
func FrameData(eventType string, content map[string]any) map[string]any {
	switch eventType {
	case EventSubagentStep:
		step := map[string]any{"kind": content["kind"], "text": content["text"], "truncated": content["truncated"]}
		for _, k := range []string{"tool_calls", "tool_name"} {
			if v, ok := content[k]; ok {
				step[k] = v
			}
		}
		data := pick(content, "task_id", "execution_id", "run_id", "version", "message_index", "model_name")
		data["step"] = step
		data["usage"] = usageOrNull(content["usage"])
		return data
	case EventSubagentEnd:
		data := pick(content, "task_id", "execution_id", "run_id", "version", "model_name", "stop_reason")
		data["usage"] = usageOrNull(content["usage"])
		switch content["status"] {
		case StatusCompleted:
			data["result"] = stringOr(content["result"])
			copyIf(data, content, "result_truncated")
		case StatusTimedOut, StatusPollingTimedOut:
			data["status"] = content["status"]
			data["error"] = stringOr(content["error"])
			copyIf(data, content, "error_truncated")
		default:
			data["error"] = stringOr(content["error"])
			copyIf(data, content, "error_truncated")
		}
		if st := content["status"]; st != StatusCompleted && st != StatusFailed {
			delete(data, "stop_reason") // only a capped run has one (SPEC §5.2)
		}
		return data
	}
	return content
}

func pick(m map[string]any, keys ...string) map[string]any {
	out := make(map[string]any, len(keys)+3)
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

func copyIf(dst, src map[string]any, k string) {
	if v, ok := src[k]; ok {
		dst[k] = v
	}
}

func stringOr(v any) string {
	s, _ := v.(string)
	return s
}

func usageOrNull(v any) any {
	if u := NormalizeUsage(v); u != nil {
		return u.asMap()
	}
	return nil
}
