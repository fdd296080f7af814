package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"herd/models"
)

// Persisted event types (docs/DESIGN.md §7) and their category.
const (
	eventRunStart       = "run.start"
	eventRunEnd         = "run.end"
	eventRunWait        = "run.wait"
	eventRunResumed     = "run.resumed"
	eventSubagentQueued = "subagent.queued"
	eventSubagentStart  = "subagent.start"
	eventSubagentStep   = "subagent.step"
	eventSubagentWait   = "subagent.wait"
	eventSubagentEnd    = "subagent.end"
	// eventWorkspaceChanged is what a tool call or an upload changed in
	// the thread's workspace (agent/changes.go).
	eventWorkspaceChanged = "workspace.changed"

	categoryRun       = "run"
	categorySubagent  = "subagent"
	categoryWorkspace = "workspace"
)

// Live task frame types.
const (
	frameTaskQueued    = "task_queued"
	frameTaskStarted   = "task_started"
	frameTaskRunning   = "task_running"
	frameTaskWaiting   = "task_waiting"
	frameTaskCompleted = "task_completed"
	frameTaskFailed    = "task_failed"
	frameTaskCancelled = "task_cancelled"
	frameTaskTimedOut  = "task_timed_out"
	// frameWorkspace is a workspace.changed event's frame.
	frameWorkspace = "workspace"
)

// Step kinds.
const (
	stepAI   = "ai"
	stepTool = "tool"
	// stepResumed marks where a task continued after a restart or a
	// failover (its text says so, LostMS how long it was gone).
	stepResumed = "resumed"
)

// Event is one persisted event's payload: one Go type per event type. The
// producer validates and encodes it once; the live path builds its frame
// from the value itself, never from the stored bytes.
//
// A field's `kind` tag is the rule Validate applies to it and the kind
// contracts/run_event_stream_contract.json gives it; a field without
// omitempty is required. TestEventContract ties the two.
type Event interface {
	EventType() string
	Validate() error
	// Frame returns the live frame's type and data.
	Frame(FrameOptions) (frameType string, data any)
}

// FrameOptions choose the variant of a frame.
type FrameOptions struct {
	// Redact leaves every token figure out (the token gate).
	Redact bool
	// HTML renders a completed task's result and an AI step's text as
	// sanitized HTML, so a card reads the same live as after a reload; nil
	// leaves result_html and text_html out.
	HTML func(markdown string) string
}

// TaskRef names the task an event belongs to and orders its events.
type TaskRef struct {
	TaskID      string `json:"task_id" kind:"id"`
	ExecutionID string `json:"execution_id" kind:"id"`
	RunID       string `json:"run_id" kind:"id"`
	Version     int64  `json:"version" kind:"index"`
}

// TaskIntro is what a card shows before any step: the task as dispatched.
type TaskIntro struct {
	TaskRef
	Description  string `json:"description" kind:"string"`
	Prompt       string `json:"prompt" kind:"string"`
	SubagentType string `json:"subagent_type" kind:"id"`
	ModelName    string `json:"model_name,omitempty" kind:"string"`
}

// TaskQueued is subagent.queued: admission made the task wait.
type TaskQueued struct{ TaskIntro }

// TaskStarted is subagent.start: the task is running.
type TaskStarted struct{ TaskIntro }

// StepCall is one tool call of an AI step, its arguments bounded.
type StepCall struct {
	Name string `json:"name"`
	// Title is how people read the tool's name when its MCP server named
	// it (tools.Titled, ToolLabel); left out otherwise.
	Title         string `json:"title,omitempty"`
	Args          string `json:"args"`
	ArgsTruncated bool   `json:"args_truncated,omitempty"`
}

// TaskStep is subagent.step: one bounded step with the cumulative usage.
// The step's own fields (StepBody) are flat in the row and nested under
// "step" in the frame.
type TaskStep struct {
	TaskRef
	MessageIndex int64 `json:"message_index" kind:"index"`
	StepBody
	Usage     *TokenUsage `json:"usage,omitempty" kind:"usage"`
	ModelName string      `json:"model_name,omitempty" kind:"string"`
}

// StepBody is what one step did: the AI's text and tool calls, or a tool's
// result.
type StepBody struct {
	Kind      string     `json:"kind" kind:"stepkind"`
	Text      string     `json:"text" kind:"string"`
	Truncated bool       `json:"truncated" kind:"bool"`
	ToolCalls []StepCall `json:"tool_calls,omitempty" kind:"calls"`
	ToolName  string     `json:"tool_name,omitempty" kind:"string"`
	// ToolTitle is the tool step's tool as people read it, when its MCP
	// server named it (StepCall.Title).
	ToolTitle string `json:"tool_title,omitempty" kind:"string"`
	// Reasoning is what the model thought before this AI step, shown
	// collapsed and never part of Text or the task's result.
	Reasoning          string `json:"reasoning,omitempty" kind:"string"`
	ReasoningTruncated bool   `json:"reasoning_truncated,omitempty" kind:"bool"`
	// Output is what a tool step's call showed beside its text: images
	// and its last log lines, for the expanded card (ToolOutput).
	Output *ToolOutput `json:"output,omitempty" kind:"output"`
	// LostMS is, on a resumed step, how long the task was gone.
	LostMS int64 `json:"lost_ms,omitempty" kind:"count"`
}

// TaskWait is subagent.wait: the task's next model call waits for a slot
// of its model (max_concurrent_requests), or, with Waiting false, has got
// one and started. Only a call that has to wait writes the pair: two rows
// per waiting call, none per call that finds a slot free.
type TaskWait struct {
	TaskRef
	Waiting bool `json:"waiting" kind:"bool"`
}

// TaskEnd is subagent.end: the one terminal event of a task.
type TaskEnd struct {
	TaskRef
	Status          string      `json:"status" kind:"status"`
	ModelName       string      `json:"model_name,omitempty" kind:"string"`
	Usage           *TokenUsage `json:"usage,omitempty" kind:"usage"`
	Result          string      `json:"result,omitempty" kind:"string"`
	ResultTruncated bool        `json:"result_truncated,omitempty" kind:"bool"`
	Error           string      `json:"error,omitempty" kind:"string"`
	ErrorTruncated  bool        `json:"error_truncated,omitempty" kind:"bool"`
	StopReason      string      `json:"stop_reason,omitempty" kind:"stop"`
}

// RunStart is run.start.
type RunStart struct {
	RunID     string `json:"run_id" kind:"id"`
	ModelName string `json:"model_name" kind:"id"`
	// RetryOf is the run whose answer this one replaces (Retry,
	// Regenerate): it answers that run's message and has none of its own.
	RetryOf string `json:"retry_of,omitempty" kind:"string"`
	// EditOf is the run whose message this one's edits: that run and
	// every later one are replaced (docs/DESIGN.md §3).
	EditOf string `json:"edit_of,omitempty" kind:"string"`
	// Continue: the run continues the stopped answer of RetryOf.
	Continue bool `json:"continue,omitempty" kind:"bool"`
	// Versions lists the versions of the answer this run adds one to
	// (a Regenerate, an Edit), oldest first, this run last.
	Versions []string `json:"versions,omitempty" kind:"ids"`
	// Commands and Admin are what the run was granted (StartRequest):
	// a resumed run gets the same tools, never more.
	Commands bool `json:"commands,omitempty" kind:"bool"`
	Admin    bool `json:"admin,omitempty" kind:"bool"`
}

// RunEnd is run.end, with the run's ledger totals.
type RunEnd struct {
	RunID  string `json:"run_id" kind:"id"`
	Status string `json:"status" kind:"runstate"`
	Error  string `json:"error,omitempty" kind:"string"`
	// Notice says in plain words why a run failed or was stopped; the
	// thread shows it where the run ended (docs/API.md).
	Notice string `json:"notice,omitempty" kind:"string"`
	// ErrorKind is why a failed model call failed (agent.ErrorAuth, …;
	// FailureOf): the page offers no Retry for NoRetryKinds.
	ErrorKind string `json:"error_kind,omitempty" kind:"string"`
	// Cut: the run's answer stopped at the model's output limit; it can
	// be continued (Continue).
	Cut bool `json:"cut,omitempty" kind:"bool"`
	// StopReason is budget for a run its user's token budget stopped
	// (docs/DESIGN.md §6); empty otherwise.
	StopReason string              `json:"stop_reason,omitempty" kind:"stop"`
	Usage      *models.UsageReport `json:"usage,omitempty" kind:"totals"`
}

// RunWait is run.wait: the lead's model call waits for a slot of its model
// (max_concurrent_requests), or, with Waiting false, has got one. As with
// TaskWait, only a call that has to wait writes the pair.
type RunWait struct {
	RunID   string `json:"run_id" kind:"id"`
	Waiting bool   `json:"waiting" kind:"bool"`
}

// RunResumed is run.resumed: the run continued after its process ended
// (a crash, a deploy) or its instance was lost, from its checkpoint
// (docs/DESIGN.md §11). Resumes counts the run's resumptions, this one
// included (runs.max_resumes); LostMS is the time between the run's last
// commit before and this one; Cause is restart or failover.
type RunResumed struct {
	RunID   string `json:"run_id" kind:"id"`
	Resumes int64  `json:"resumes" kind:"index"`
	LostMS  int64  `json:"lost_ms" kind:"count"`
	Cause   string `json:"cause" kind:"id"`
}

// EventType names each payload's persisted type.
func (TaskQueued) EventType() string  { return eventSubagentQueued }
func (TaskStarted) EventType() string { return eventSubagentStart }
func (TaskStep) EventType() string    { return eventSubagentStep }
func (TaskWait) EventType() string    { return eventSubagentWait }
func (TaskEnd) EventType() string     { return eventSubagentEnd }
func (RunStart) EventType() string    { return eventRunStart }
func (RunEnd) EventType() string      { return eventRunEnd }
func (RunWait) EventType() string     { return eventRunWait }
func (RunResumed) EventType() string  { return eventRunResumed }

// Validate checks each payload against its fields' kinds (validate).
func (e TaskQueued) Validate() error  { return validate(e) }
func (e TaskStarted) Validate() error { return validate(e) }
func (e TaskStep) Validate() error    { return validate(e) }
func (e TaskWait) Validate() error    { return validate(e) }
func (e TaskEnd) Validate() error     { return validate(e) }
func (e RunStart) Validate() error    { return validate(e) }
func (e RunEnd) Validate() error      { return validate(e) }
func (e RunWait) Validate() error     { return validate(e) }
func (e RunResumed) Validate() error  { return validate(e) }

// validate is every payload's Validate. The producer calls it on the
// payload it already holds as an Event, where a Validate method would
// copy it to the heap once more (docs/PERFORMANCE.md, the task hand-off).
func validate(ev Event) error {
	if err := checkKinds(ev); err != nil {
		return err
	}
	if st, ok := ev.(TaskStep); ok {
		return st.checkTools()
	}
	return nil
}

// checkTools checks that a step names tools only where its kind has
// them: calls on an AI step, a tool name on a tool step.
func (e TaskStep) checkTools() error {
	for i, c := range e.ToolCalls {
		if c.Name == "" {
			return fmt.Errorf("event %s: tool_calls: call %d: want a name", eventSubagentStep, i)
		}
	}
	switch {
	case e.Kind == stepAI && e.ToolName != "":
		return fmt.Errorf("event %s: tool_name on an ai step", eventSubagentStep)
	case e.Kind == stepTool && e.ToolCalls != nil:
		return fmt.Errorf("event %s: tool_calls on a tool step", eventSubagentStep)
	case e.Kind == stepTool && e.Reasoning != "":
		return fmt.Errorf("event %s: reasoning on a tool step", eventSubagentStep)
	case e.Kind == stepAI && e.Output != nil:
		return fmt.Errorf("event %s: output on an ai step", eventSubagentStep)
	case e.Kind == stepResumed && (e.ToolCalls != nil || e.ToolName != "" || e.ToolTitle != "" || e.Reasoning != "" || e.Output != nil):
		return fmt.Errorf("event %s: a resumed step has only its text", eventSubagentStep)
	case e.Kind != stepResumed && e.LostMS != 0:
		return fmt.Errorf("event %s: lost_ms on a step that is not resumed", eventSubagentStep)
	}
	return nil
}

// categoryOf is the category of an event type.
func categoryOf(eventType string) string {
	switch eventType {
	case eventRunStart, eventRunEnd, eventRunWait, eventRunResumed:
		return categoryRun
	case eventWorkspaceChanged:
		return categoryWorkspace
	}
	return categorySubagent
}

// payloadTypes maps each persisted type to a new zero payload of it.
var payloadTypes = map[string]func() Event{
	eventRunStart:       func() Event { return new(RunStart) },
	eventRunEnd:         func() Event { return new(RunEnd) },
	eventRunWait:        func() Event { return new(RunWait) },
	eventRunResumed:     func() Event { return new(RunResumed) },
	eventSubagentQueued: func() Event { return new(TaskQueued) },
	eventSubagentStart:  func() Event { return new(TaskStarted) },
	eventSubagentStep:   func() Event { return new(TaskStep) },
	eventSubagentWait:   func() Event { return new(TaskWait) },
	eventSubagentEnd:    func() Event { return new(TaskEnd) },

	eventWorkspaceChanged: func() Event { return new(WorkspaceChanged) },
}

// EventTypes lists every persisted event type.
func EventTypes() []string {
	out := make([]string, 0, len(payloadTypes))
	for t := range payloadTypes {
		out = append(out, t)
	}
	return out
}

// decodeEvent reads a stored event strictly: every required field present,
// no unknown field, every value of its field's kind. A row that fails
// was not written by herd's producer (or was damaged) and reads as an
// error, never half.
//
// Every instance of a cluster decodes every record the others commit
// (docs/DESIGN.md §14), so this is on the live path: one pass of
// go-json-experiment/json (the encoding/json/v2 to be) into the payload,
// and a syntactic pass over the top-level names for the required ones.
// encoding/json took four passes (a map of the names, then a Decoder that
// scans before it decodes) and 94 allocations for a step
// (BenchmarkDecodeEvent).
func decodeEvent(eventType string, content []byte) (Event, error) {
	mk, ok := payloadTypes[eventType]
	if !ok {
		return nil, fmt.Errorf("event: unknown type %q", eventType)
	}
	ev := mk()
	fields := fieldsOf(reflect.TypeOf(ev).Elem())
	seen, ok := presentFields(content, fields)
	if !ok {
		return nil, fmt.Errorf("event %s: content is not an object", eventType)
	}
	for i, f := range fields {
		if f.required && seen&(1<<i) == 0 {
			return nil, fmt.Errorf("event %s: missing %s", eventType, f.name)
		}
	}
	if err := jsonv2.Unmarshal(content, ev, strictPayload); err != nil {
		return nil, fmt.Errorf("event %s: %w", eventType, err)
	}
	// A payload is a value once decoded, as the producer builds it;
	// validate, not v.Validate, whose value receiver copies it to the heap.
	v := reflect.ValueOf(ev).Elem().Interface().(Event)
	if err := validate(v); err != nil {
		return nil, err
	}
	return v, nil
}

// strictPayload decodes as encoding/json did, unknown names refused: a
// field given twice keeps its last value, invalid UTF-8 reads as U+FFFD.
// Two differences no row herd writes can show: names match exactly
// (encoding/json also took them in any case), and a map key given twice
// merges its two objects rather than keeping the last.
var strictPayload = jsonv2.JoinOptions(jsonv2.RejectUnknownMembers(true), lenient)

// lenient is what encoding/json allowed that go-json-experiment refuses by
// default: a name given twice, invalid UTF-8.
var lenient = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// nameScanners are the decoders presentFields reuses.
var nameScanners = sync.Pool{New: func() any { return new(nameScanner) }}

type nameScanner struct {
	r bytes.Reader
	d jsontext.Decoder
}

// presentFields reports which of fields (bit i for fields[i]) content's
// top-level object names, reading the names and skipping the values;
// ok is false when content does not start as an object.
func presentFields(content []byte, fields []fieldRule) (seen uint64, ok bool) {
	s := nameScanners.Get().(*nameScanner)
	defer func() { s.r.Reset(nil); nameScanners.Put(s) }() // let content go
	s.r.Reset(content)
	s.d.Reset(&s.r, lenient)
	if tok, err := s.d.ReadToken(); err != nil || tok.Kind() != '{' {
		return 0, false
	}
	for s.d.PeekKind() == '"' {
		raw, err := s.d.ReadValue()
		if err != nil {
			return 0, false
		}
		name := []byte(raw[1 : len(raw)-1])
		if bytes.IndexByte(name, '\\') >= 0 {
			name, _ = jsontext.AppendUnquote(nil, raw)
		}
		for i, f := range fields {
			if string(name) == f.name {
				seen |= 1 << i
			}
		}
		if s.d.SkipValue() != nil {
			return 0, false
		}
	}
	if s.d.PeekKind() != '}' { // bad syntax, not the end of the object
		return 0, false
	}
	return seen, true
}

// DecodeContent decodes an event's stored content as a generic object,
// keeping integers exact, for the events API that returns it as stored.
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

// eventRecord validates an event at the producer and wraps it for the
// journal, encoded once; a malformed event is an error and never written.
// The record keeps the value (Payload), so the live path builds the frame
// from it.
func eventRecord(threadID, taskID string, ev Event) (models.Record, error) {
	if err := validate(ev); err != nil {
		return models.Record{}, fmt.Errorf("agent: %w", err)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return models.Record{}, fmt.Errorf("agent: encode %s: %w", ev.EventType(), err)
	}
	return models.Record{Event: &models.RunEvent{
		ThreadID: threadID, RunID: runIDOf(ev), TaskID: taskID, EventType: ev.EventType(),
		Category: categoryOf(ev.EventType()), Content: models.JSON(b),
	}, Payload: ev}, nil
}

func runIDOf(ev Event) string {
	switch e := ev.(type) {
	case taskEvent:
		return e.task().RunID
	case RunStart:
		return e.RunID
	case RunEnd:
		return e.RunID
	case RunWait:
		return e.RunID
	case RunResumed:
		return e.RunID
	case WorkspaceChanged:
		return e.RunID
	}
	return ""
}

// EventOf returns the event of a record: the value the producer built,
// on a record just committed, else its row decoded (PayloadOf).
func EventOf(r models.Record) (Event, error) {
	if ev, ok := r.Payload.(Event); ok {
		return ev, nil
	}
	return PayloadOf(r.Event)
}

// PayloadOf returns a persisted event's payload, its row decoded. As
// everywhere a row is read, a malformed usage reads as absent rather than
// losing the rest of the event.
func PayloadOf(e *models.RunEvent) (Event, error) {
	ev, err := decodeEvent(e.EventType, e.Content)
	if err == nil {
		return ev, nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(e.Content, &fields) != nil {
		return nil, err
	}
	if _, ok := fields["usage"]; !ok {
		return nil, err
	}
	delete(fields, "usage")
	b, _ := json.Marshal(fields)
	if ev, err2 := decodeEvent(e.EventType, b); err2 == nil {
		return ev, nil
	}
	return nil, err
}

// ---- kinds: the rules behind Validate and the contract ----

// fieldRule is one JSON field of a payload with its kind.
type fieldRule struct {
	name     string
	kind     string
	required bool
	index    []int
}

var fieldCache sync.Map // reflect.Type → []fieldRule

// fieldsOf lists a payload type's JSON fields, embedded structs flattened.
func fieldsOf(t reflect.Type) []fieldRule {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]fieldRule)
	}
	var out []fieldRule
	for _, sf := range reflect.VisibleFields(t) {
		tag, ok := sf.Tag.Lookup("json")
		if !ok || sf.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		out = append(out, fieldRule{name: name, kind: sf.Tag.Get("kind"), required: !strings.Contains(opts, "omitempty"), index: sf.Index})
	}
	if len(out) > 64 {
		panic(fmt.Sprintf("event payload %s has %d fields; presentFields counts 64", t, len(out)))
	}
	fieldCache.Store(t, out)
	return out
}

// eventFields returns the kind of every field of an event type's content,
// required and optional, for the contract test.
func eventFields(eventType string) (required, optional map[string]string) {
	required, optional = map[string]string{}, map[string]string{}
	mk, ok := payloadTypes[eventType]
	if !ok {
		return nil, nil
	}
	for _, f := range fieldsOf(reflect.TypeOf(mk()).Elem()) {
		if f.required {
			required[f.name] = f.kind
		} else {
			optional[f.name] = f.kind
		}
	}
	return required, optional
}

// checkKinds applies each field's kind to its value, read through reflect
// without boxing it: it runs on every event a subagent emits
// (docs/PERFORMANCE.md, the task hand-off).
func checkKinds(ev Event) error {
	v := reflect.ValueOf(ev)
	for _, f := range fieldsOf(v.Type()) {
		if err := checkKind(f.kind, v.FieldByIndex(f.index)); err != nil {
			return fmt.Errorf("event %s: %s: %w", ev.EventType(), f.name, err)
		}
	}
	return nil
}

func checkKind(kind string, v reflect.Value) error {
	switch kind {
	case "id":
		if strings.TrimSpace(v.String()) == "" {
			return fmt.Errorf("want a non-blank string")
		}
	case "index":
		if n := v.Int(); n < 1 {
			return fmt.Errorf("want an integer ≥ 1, got %d", n)
		}
	case "usage":
		if u := v.Interface().(*TokenUsage); u != nil && !u.valid() {
			return fmt.Errorf("want a usage snapshot")
		}
	case "status":
		if s := v.String(); !isTerminal(s) {
			return fmt.Errorf("want a terminal status, got %q", s)
		}
	case "stop":
		if s := v.String(); s != "" && !validStopReason(s) {
			return fmt.Errorf("want a stop reason, got %q", s)
		}
	case "output":
		if o := v.Interface().(*ToolOutput); o != nil {
			return o.validate()
		}
	case "stepkind":
		if s := v.String(); s != stepAI && s != stepTool && s != stepResumed {
			return fmt.Errorf("want ai, tool or resumed, got %q", s)
		}
	case "count":
		if v.Int() < 0 {
			return fmt.Errorf("want a count >= 0, got %d", v.Int())
		}
	case "changes":
		return checkChanges(v.Interface().([]FileChange))
	case "runstate":
		switch s := v.String(); s {
		case models.RunCompleted, models.RunFailed, models.RunCancelled:
		default:
			return fmt.Errorf("want completed, failed or cancelled, got %q", s)
		}
	}
	return nil
}

// taskEvent is a payload of a task: what a card reads from any of them.
type taskEvent interface {
	Event
	task() TaskRef
	model() string
	usage() *TokenUsage
}

func (r TaskRef) task() TaskRef { return r }

func (e TaskIntro) model() string     { return e.ModelName }
func (e TaskStep) model() string      { return e.ModelName }
func (e TaskEnd) model() string       { return e.ModelName }
func (TaskWait) model() string        { return "" }
func (TaskWait) usage() *TokenUsage   { return nil }
func (TaskIntro) usage() *TokenUsage  { return nil }
func (e TaskStep) usage() *TokenUsage { return e.Usage }
func (e TaskEnd) usage() *TokenUsage  { return e.Usage }
