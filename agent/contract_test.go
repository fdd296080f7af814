package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"herd/models"
)

func loadContract(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile("../contracts/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

type statusContract struct {
	Statuses    []string          `json:"valid_status_values"`
	StopReasons []string          `json:"valid_stop_reason_values"`
	Labels      map[string]string `json:"stop_reason_labels"`
	Keys        []string          `json:"metadata_keys"`
	MetaCap     int               `json:"metadata_text_cap"`
	EventCap    int               `json:"event_text_cap"`
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

func TestStatusContract(t *testing.T) {
	var c statusContract
	loadContract(t, "subagent_status_contract.json", &c)
	if got, want := sorted(TerminalStatuses()), sorted(c.Statuses); !slices.Equal(got, want) {
		t.Errorf("terminal statuses = %v, contract %v", got, want)
	}
	if got, want := sorted(stopReasons()), sorted(c.StopReasons); !slices.Equal(got, want) {
		t.Errorf("stop reasons = %v, contract %v", got, want)
	}
	for _, r := range c.StopReasons {
		if capLabel(r) != c.Labels[r] {
			t.Errorf("label of %s = %q, contract %q", r, capLabel(r), c.Labels[r])
		}
	}
	if c.MetaCap != metadataTextCap || c.EventCap != eventTextCap {
		t.Errorf("caps = %d/%d, contract %d/%d", metadataTextCap, eventTextCap, c.MetaCap, c.EventCap)
	}
	// Every status the contract lists is accepted by the producer and the
	// reader; anything else is refused by both.
	for _, s := range c.Statuses {
		o := Outcome{Status: s, Result: "r", Error: "e"}
		if _, kw, err := o.ToolMessage(); err != nil {
			t.Errorf("producer refuses %s: %v", s, err)
		} else if md, ok := readMetadata(kw); !ok || md.Status != s {
			t.Errorf("reader reads %s as %+v, %v", s, md, ok)
		}
	}
	for _, s := range []string{"running", "queued", "done", "", "COMPLETED"} {
		if _, _, err := (Outcome{Status: s}).ToolMessage(); err == nil {
			t.Errorf("producer accepts status %q", s)
		}
	}
	if _, _, err := (Outcome{Status: StatusCompleted, StopReason: "quota"}).ToolMessage(); err == nil {
		t.Error("producer accepts an unknown stop reason")
	}
	// The keys the producer may write are the contract's keys.
	seen := map[string]bool{}
	for _, o := range []Outcome{
		{Status: StatusCompleted, Result: "r", StopReason: stopTokenCapped, ModelName: "m", Usage: &TokenUsage{1, 2, 3}},
		{Status: StatusFailed, Error: "e"},
		refused(&Refusal{Reason: RefusedPerRun, Limit: 1}),
	} {
		_, kw, _ := o.ToolMessage()
		for k := range kw {
			seen[k] = true
		}
	}
	if got, want := sorted(slices.Collect(maps.Keys(seen))), sorted(c.Keys); !slices.Equal(got, want) {
		t.Errorf("metadata keys = %v, contract %v", got, want)
	}
}

// TestToolMessageTable covers how the metadata is built beyond the texts
// of contracts/tool_message_contract.json (TestToolMessageContract):
// trimming, bounds, usage, blank fields.
func TestToolMessageTable(t *testing.T) {
	long := strings.Repeat("a", 1500) + strings.Repeat("b", 1500)
	sum := sha256.Sum256([]byte("  the result\n"))
	cases := []struct {
		name    string
		o       Outcome
		content string
		kwargs  map[string]any
	}{
		{"completed", Outcome{Status: StatusCompleted, Result: "  the result\n", ModelName: " demo-fast ", Usage: &TokenUsage{10, 5, 15}},
			"Task Succeeded. Result: the result",
			map[string]any{"subagent_status": "completed", "subagent_result_brief": "the result", "subagent_result_sha256": hex.EncodeToString(sum[:]), "subagent_model_name": "demo-fast",
				"subagent_token_usage": map[string]any{"input_tokens": int64(10), "output_tokens": int64(5), "total_tokens": int64(15)}}},
		{"completed blank result", Outcome{Status: StatusCompleted, Result: "  "},
			"Task Succeeded. Result: ", map[string]any{"subagent_status": "completed"}},
		{"error with markup", Outcome{Status: StatusFailed, Error: `<b>"x" & é</b>`, ModelName: "m<"}, `Task failed. Error: <b>"x" & é</b>`,
			map[string]any{"subagent_status": "failed", "subagent_error": `<b>"x" & é</b>`, "subagent_model_name": "m<"}},
		{"failed blank error", Outcome{Status: StatusFailed, Error: " \n"}, "Task failed.", map[string]any{"subagent_status": "failed"}},
		{"error bounded, full in content", Outcome{Status: StatusFailed, Error: long}, "Task failed. Error: " + long,
			map[string]any{"subagent_status": "failed", "subagent_error": bound(long, 2000)}},
		{"no usage reported", Outcome{Status: StatusFailed, Usage: nil, ModelName: "  "}, "Task failed.", map[string]any{"subagent_status": "failed"}},
		{"zero usage is still usage", Outcome{Status: StatusFailed, Usage: &TokenUsage{}}, "Task failed.",
			map[string]any{"subagent_status": "failed", "subagent_token_usage": map[string]any{"input_tokens": int64(0), "output_tokens": int64(0), "total_tokens": int64(0)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			content, kw, err := c.o.ToolMessage()
			if err != nil {
				t.Fatal(err)
			}
			if content != c.content {
				t.Errorf("content = %.80q, want %.80q", content, c.content)
			}
			got, _ := json.Marshal(kw)
			want, _ := json.Marshal(c.kwargs)
			if string(got) != string(want) {
				t.Errorf("kwargs = %s\nwant     %s", got, want)
			}
			// What a task's end persists: the typed metadata, which must
			// encode to the bytes the map does.
			_, typed, _ := c.o.toolMessage()
			if stored := string(models.MustJSON(typed)); stored != string(want) {
				t.Errorf("stored kwargs = %s\nwant            %s", stored, want)
			}
		})
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestBound(t *testing.T) {
	s := strings.Repeat("x", 30) + strings.Repeat("y", 30)
	cases := []struct {
		name  string
		in    string
		limit int
		want  string
	}{
		{"cap 0", "abc", 0, ""},
		{"cap 1", "abc", 1, "a"},
		{"cap 15 keeps head and marker", s, 15, strings.Repeat("x", 10) + "\n...\n"},
		{"fits", "abc", 3, "abc"},
		{"trimmed first", "  abc  ", 3, "abc"},
		{"no room for the marker", "abcdefghij", 6, "abcdef"},
		{"cap 2000", strings.Repeat("h", 1500) + strings.Repeat("t", 1500), 2000, strings.Repeat("h", 1333) + "\n...\n" + strings.Repeat("t", 662)},
		{"runes, not bytes", strings.Repeat("é", 30), 20, strings.Repeat("é", 13) + "\n...\n" + strings.Repeat("é", 2)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := bound(c.in, c.limit)
			if got != c.want {
				t.Errorf("bound(%q, %d) = %q, want %q", c.in, c.limit, got, c.want)
			}
			if n := len([]rune(got)); n > c.limit {
				t.Errorf("length %d > cap %d", n, c.limit)
			}
		})
	}
}

func TestNormalizeUsage(t *testing.T) {
	num := func(s string) json.Number { return json.Number(s) }
	cases := []struct {
		name string
		in   any
		want *TokenUsage
	}{
		{"ints", map[string]any{"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}, &TokenUsage{1, 2, 3}},
		{"json numbers", map[string]any{"input_tokens": num("1"), "output_tokens": num("2"), "total_tokens": num("3")}, &TokenUsage{1, 2, 3}},
		{"extra keys dropped", map[string]any{"input_tokens": 1, "output_tokens": 2, "total_tokens": 3, "cache_read_tokens": 9}, &TokenUsage{1, 2, 3}},
		{"zeros", map[string]any{"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}, &TokenUsage{}},
		{"bool", map[string]any{"input_tokens": true, "output_tokens": 2, "total_tokens": 3}, nil},
		{"float", map[string]any{"input_tokens": 1.0, "output_tokens": 2, "total_tokens": 3}, nil},
		{"float literal", map[string]any{"input_tokens": num("1.0"), "output_tokens": num("2"), "total_tokens": num("3")}, nil},
		{"exponent literal", map[string]any{"input_tokens": num("1e2"), "output_tokens": num("2"), "total_tokens": num("3")}, nil},
		{"negative", map[string]any{"input_tokens": -1, "output_tokens": 2, "total_tokens": 3}, nil},
		{"missing key", map[string]any{"input_tokens": 1, "output_tokens": 2}, nil},
		{"null value", map[string]any{"input_tokens": nil, "output_tokens": 2, "total_tokens": 3}, nil},
		{"string value", map[string]any{"input_tokens": "1", "output_tokens": 2, "total_tokens": 3}, nil},
		{"not an object", []any{1, 2, 3}, nil},
		{"string", "1,2,3", nil},
		{"nil", nil, nil},
		{"huge", map[string]any{"input_tokens": num("99999999999999999999"), "output_tokens": 2, "total_tokens": 3}, nil},
		{"negative zero", map[string]any{"input_tokens": num("-0"), "output_tokens": num("2"), "total_tokens": num("3")}, &TokenUsage{0, 2, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := normalizeUsage(c.in)
			if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
				t.Errorf("normalizeUsage(%v) = %+v, want %+v", c.in, got, c.want)
			}
			// A stored snapshot reads back under the same rules (a Go
			// 1.0 is written as the JSON 1, so that case is Go's alone).
			if c.name == "float" {
				return
			}
			b, err := json.Marshal(c.in)
			if err != nil {
				t.Fatal(err)
			}
			var u TokenUsage
			err = json.Unmarshal(b, &u)
			if (err == nil) != (c.want != nil) || (err == nil && u != *c.want) {
				t.Errorf("TokenUsage.UnmarshalJSON(%s) = %+v, %v; want %+v", b, u, err, c.want)
			}
		})
	}
}

func TestReadMetadata(t *testing.T) {
	good := sha("x")
	cases := []struct {
		name string
		kw   string
		ok   bool
		want taskMetadata
	}{
		{"completed", `{"subagent_status":"completed","subagent_result_brief":"r","subagent_result_sha256":"` + good + `","subagent_model_name":"m","subagent_token_usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3}}`,
			true, taskMetadata{Status: "completed", ResultBrief: "r", ResultSHA256: good, ModelName: "m", Usage: &TokenUsage{1, 2, 3}}},
		{"legacy max_turns_reached with brief", `{"subagent_status":"max_turns_reached","subagent_result_brief":"partial"}`,
			true, taskMetadata{Status: "completed", StopReason: "turn_capped", ResultBrief: "partial"}},
		{"legacy max_turns_reached without brief", `{"subagent_status":"max_turns_reached","subagent_error":"out of turns"}`,
			true, taskMetadata{Status: "failed", StopReason: "turn_capped", Error: "out of turns"}},
		{"unknown status", `{"subagent_status":"exploded","subagent_error":"x"}`, false, taskMetadata{}},
		{"missing status", `{"subagent_error":"x"}`, false, taskMetadata{}},
		{"status not a string", `{"subagent_status":1}`, false, taskMetadata{}},
		{"malformed usage", `{"subagent_status":"failed","subagent_token_usage":{"input_tokens":1.5,"output_tokens":2,"total_tokens":3}}`, true, taskMetadata{Status: "failed"}},
		{"usage as string", `{"subagent_status":"failed","subagent_token_usage":"lots"}`, true, taskMetadata{Status: "failed"}},
		{"bad sha (upper case)", `{"subagent_status":"completed","subagent_result_brief":"r","subagent_result_sha256":"` + strings.ToUpper(good) + `"}`, true, taskMetadata{Status: "completed", ResultBrief: "r"}},
		{"bad sha (short)", `{"subagent_status":"completed","subagent_result_sha256":"abc"}`, true, taskMetadata{Status: "completed"}},
		{"unknown stop reason dropped", `{"subagent_status":"failed","subagent_stop_reason":"bored"}`, true, taskMetadata{Status: "failed"}},
		{"fields of the wrong type dropped", `{"subagent_status":"failed","subagent_error":{"x":1},"subagent_model_name":7}`, true, taskMetadata{Status: "failed"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kw, err := DecodeContent([]byte(c.kw))
			if err != nil {
				t.Fatal(err)
			}
			got, ok := readMetadata(kw)
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v", ok, c.ok)
			}
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(c.want)
			if string(gj) != string(wj) {
				t.Errorf("got %s\nwant %s", gj, wj)
			}
		})
	}
	for content, want := range map[string]string{
		"Task Succeeded. Result: x": "completed", "Task Succeeded (capped: turn budget). Result: x": "completed",
		"Task failed.": "failed", "Task cancelled by user.": "cancelled", "Task timed out. Error: e": "timed_out",
	} {
		if got, ok := legacyStatus(content); !ok || got != want {
			t.Errorf("legacyStatus(%q) = %q, %v; want %q", content, got, ok, want)
		}
	}
	if _, ok := legacyStatus("[Subagent: bash] something"); ok {
		t.Error("legacyStatus reads a status from unrelated text")
	}
}

type eventContract struct {
	Envelope   []string `json:"envelope_fields"`
	EventTypes map[string]struct {
		Category    string            `json:"category"`
		FrameType   string            `json:"frame_type"`
		FrameByStat map[string]string `json:"frame_type_by_status"`
		Required    map[string]string `json:"required"`
		Optional    map[string]string `json:"optional"`
	} `json:"event_types"`
	TaskFrames map[string]struct {
		Required []string `json:"required"`
		Optional []string `json:"optional"`
	} `json:"task_frames"`
	StepFields struct {
		Required []string `json:"required"`
		Optional []string `json:"optional"`
	} `json:"step_fields"`
	WorkspaceFrame struct {
		Required     []string `json:"required"`
		Optional     []string `json:"optional"`
		ChangeFields struct {
			Required []string `json:"required"`
			Optional []string `json:"optional"`
		} `json:"change_fields"`
	} `json:"workspace_frame"`
}

// validateMap validates content as a stored row: encoded, then decoded
// strictly into its payload type.
func validateMap(typ string, content map[string]any) (Event, error) {
	b, err := json.Marshal(content)
	if err != nil {
		return nil, err
	}
	return decodeEvent(typ, b)
}

// frameFields encodes a payload's frame and reads back its top-level and
// step fields.
func frameFields(t *testing.T, ev Event, o FrameOptions) (string, map[string]any) {
	t.Helper()
	typ, data := ev.Frame(o)
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return typ, m
}

// TestEventContract asserts the payload types' struct tags (field names,
// required = no omitempty, kinds) and the frames they build equal
// contracts/run_event_stream_contract.json.
func TestEventContract(t *testing.T) {
	var c eventContract
	loadContract(t, "run_event_stream_contract.json", &c)
	if got, want := sorted(EventTypes()), sorted(slices.Collect(maps.Keys(c.EventTypes))); !slices.Equal(got, want) {
		t.Fatalf("event types = %v, contract %v", got, want)
	}
	for _, typ := range EventTypes() {
		ce := c.EventTypes[typ]
		if got := categoryOf(typ); got != ce.Category {
			t.Errorf("%s category = %s, contract %s", typ, got, ce.Category)
		}
		req, opt := eventFields(typ)
		if !maps.Equal(req, ce.Required) {
			t.Errorf("%s required = %v, contract %v", typ, req, ce.Required)
		}
		if !maps.Equal(opt, ce.Optional) {
			t.Errorf("%s optional = %v, contract %v", typ, opt, ce.Optional)
		}
	}
	for typ, ce := range c.EventTypes {
		if ce.FrameType != "" {
			if got := frameTypeOf(typ, ""); got != ce.FrameType {
				t.Errorf("frame of %s = %s, contract %s", typ, got, ce.FrameType)
			}
		}
		for status, want := range ce.FrameByStat {
			if got := frameTypeOf(typ, status); got != want {
				t.Errorf("frame of %s/%s = %s, contract %s", typ, status, got, want)
			}
		}
	}
	// Every frame a valid event becomes has exactly the contract's fields,
	// and its redacted variant no token figure.
	samples := sampleEvents()
	html := func(s string) string { return "<p>" + s + "</p>" }
	for typ, ce := range c.EventTypes {
		for _, content := range samples[typ] {
			ev, err := validateMap(typ, content)
			if err != nil {
				t.Fatalf("sample %s invalid: %v", typ, err)
			}
			ft, data := frameFields(t, ev, FrameOptions{HTML: html})
			if want := frameTypeOf(typ, stringOr(content["status"])); ft != want {
				t.Errorf("%s frame type = %s, want %s", typ, ft, want)
			}
			if _, red := frameFields(t, ev, FrameOptions{Redact: true}); red["usage"] != nil || strings.Contains(fmt.Sprint(red), "total_tokens") {
				t.Errorf("%s redacted frame carries usage: %v", ft, red)
			}
			tf, ok := c.TaskFrames[ft]
			if ft == frameWorkspace {
				tf.Required, tf.Optional, ok = c.WorkspaceFrame.Required, c.WorkspaceFrame.Optional, true
				cf := c.WorkspaceFrame.ChangeFields
				for _, ch := range data["changes"].([]any) {
					checkFields(t, "workspace change", ch.(map[string]any), cf.Required, cf.Optional)
				}
			}
			if !ok {
				if ce.Category != categoryRun {
					t.Errorf("frame %s of %s not in the contract", ft, typ)
				}
				continue
			}
			for _, k := range tf.Required {
				if _, ok := data[k]; !ok {
					t.Errorf("%s frame lacks required %s: %v", ft, k, data)
				}
			}
			allowed := append(slices.Clone(tf.Required), tf.Optional...)
			for k := range data {
				if !slices.Contains(allowed, k) {
					t.Errorf("%s frame has %s, not in the contract", ft, k)
				}
			}
			if step, ok := data["step"].(map[string]any); ok {
				for k := range step {
					if !slices.Contains(append(slices.Clone(c.StepFields.Required), c.StepFields.Optional...), k) {
						t.Errorf("step has %s, not in the contract", k)
					}
				}
			}
		}
	}
}

func stringOr(v any) string {
	s, _ := v.(string)
	return s
}

// checkFields fails unless m has every field of required and no other
// than those and optional.
func checkFields(t *testing.T, what string, m map[string]any, required, optional []string) {
	t.Helper()
	for _, k := range required {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks required %s: %v", what, k, m)
		}
	}
	for k := range m {
		if !slices.Contains(required, k) && !slices.Contains(optional, k) {
			t.Errorf("%s has %s, not in the contract", what, k)
		}
	}
}

// sampleEvents holds the fullest and the barest valid content of each type.
func sampleEvents() map[string][]map[string]any {
	base := func(extra map[string]any) map[string]any {
		m := map[string]any{"task_id": "call_1", "execution_id": "e1", "run_id": "r1", "version": 1}
		maps.Copy(m, extra)
		return m
	}
	usage := map[string]any{"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}
	start := map[string]any{"description": "d", "prompt": "p", "subagent_type": "general-purpose"}
	out := map[string][]map[string]any{
		eventRunStart:       {{"run_id": "r1", "model_name": "m"}},
		eventRunWait:        {{"run_id": "r1", "waiting": true}, {"run_id": "r1", "waiting": false}},
		eventSubagentWait:   {base(map[string]any{"waiting": true}), base(map[string]any{"waiting": false})},
		eventRunEnd:         {{"run_id": "r1", "status": "completed"}, {"run_id": "r1", "status": "failed", "error": "e", "usage": map[string]any{}}},
		eventSubagentQueued: {base(start), base(map[string]any{"description": "d", "prompt": "p", "subagent_type": "x", "model_name": "m"})},
		eventSubagentStart:  {base(start), base(map[string]any{"description": "d", "prompt": "p", "subagent_type": "x", "model_name": "m"})},
		eventSubagentStep: {
			base(map[string]any{"message_index": 1, "kind": "ai", "text": "t", "truncated": false}),
			base(map[string]any{"message_index": 2, "kind": "ai", "text": "t", "truncated": true, "tool_calls": []any{map[string]any{"name": "ls", "args": "{}", "args_truncated": true}}, "usage": usage, "model_name": "m"}),
			base(map[string]any{"message_index": 3, "kind": "tool", "text": "t", "truncated": false, "tool_name": "ls", "usage": usage}),
			base(map[string]any{"message_index": 4, "kind": "tool", "text": "t", "truncated": false, "tool_name": "mcp__a__b", "output": map[string]any{
				"images": []any{map[string]any{"id": strings.Repeat("a", 64) + ".png", "mime_type": "image/png", "bytes": 10}, map[string]any{"mime_type": "image/svg+xml", "bytes": 10, "omitted": "not a type herd shows"}},
				"logs":   []any{map[string]any{"level": "info", "text": "x"}}, "logs_dropped": 2,
			}}),
		},
	}
	out[eventWorkspaceChanged] = []map[string]any{
		{"changes": []any{map[string]any{"path": "a.txt", "size": 0}}},
		{"run_id": "r1", "changes": []any{
			map[string]any{"path": "notes/a/plan.md", "size": 12, "task_id": "call_1"},
			map[string]any{"path": "old.txt", "size": 0, "task_id": "call_1", "deleted": true},
		}},
		{"changes": []any{map[string]any{"path": "uploads/x.pdf", "size": 3, "uploaded": true}}},
	}
	for _, st := range TerminalStatuses() {
		out[eventSubagentEnd] = append(out[eventSubagentEnd],
			base(map[string]any{"status": st}),
			base(map[string]any{"status": st, "model_name": "m", "usage": usage, "result": "r", "result_truncated": false, "error": "e", "error_truncated": true, "stop_reason": "turn_capped"}))
	}
	return out
}

func TestValidateEventRejects(t *testing.T) {
	base := func(extra map[string]any) map[string]any {
		m := map[string]any{"task_id": "call_1", "execution_id": "e1", "run_id": "r1", "version": 1, "message_index": 1, "kind": "ai", "text": "t", "truncated": false}
		for k, v := range extra {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	cases := []struct {
		name    string
		typ     string
		content map[string]any
	}{
		{"missing task_id", eventSubagentStep, base(map[string]any{"task_id": nil})},
		{"blank task_id", eventSubagentStep, base(map[string]any{"task_id": "  "})},
		{"negative message_index", eventSubagentStep, base(map[string]any{"message_index": -1})},
		{"zero message_index", eventSubagentStep, base(map[string]any{"message_index": 0})},
		{"boolean message_index", eventSubagentStep, base(map[string]any{"message_index": true})},
		{"float message_index", eventSubagentStep, base(map[string]any{"message_index": 1.5})},
		{"unknown kind", eventSubagentStep, base(map[string]any{"kind": "human"})},
		{"truncated not bool", eventSubagentStep, base(map[string]any{"truncated": "no"})},
		{"bad usage", eventSubagentStep, base(map[string]any{"usage": map[string]any{"input_tokens": 1}})},
		{"tool_name on ai step", eventSubagentStep, base(map[string]any{"tool_name": "ls"})},
		{"tool_calls on tool step", eventSubagentStep, base(map[string]any{"kind": "tool", "tool_calls": []any{}})},
		{"unknown field", eventSubagentStep, base(map[string]any{"secret": "x"})},
		{"bad call", eventSubagentStep, base(map[string]any{"tool_calls": []any{map[string]any{"args": "{}"}}})},
		{"end with running status", eventSubagentEnd, map[string]any{"task_id": "t", "execution_id": "e", "run_id": "r", "version": 2, "status": "running"}},
		{"end with bad stop reason", eventSubagentEnd, map[string]any{"task_id": "t", "execution_id": "e", "run_id": "r", "version": 2, "status": "failed", "stop_reason": "x"}},
		{"run end bad status", eventRunEnd, map[string]any{"run_id": "r", "status": "running"}},
		{"unknown type", "subagent.exploded", map[string]any{}},
		{"no changes", eventWorkspaceChanged, map[string]any{"changes": []any{}}},
		{"changes missing", eventWorkspaceChanged, map[string]any{"run_id": "r"}},
		{"absolute path", eventWorkspaceChanged, map[string]any{"changes": []any{map[string]any{"path": "/etc/passwd", "size": 1}}}},
		{"path out", eventWorkspaceChanged, map[string]any{"changes": []any{map[string]any{"path": "../x", "size": 1}}}},
		{"negative size", eventWorkspaceChanged, map[string]any{"changes": []any{map[string]any{"path": "x", "size": -1}}}},
		{"upload of a task", eventWorkspaceChanged, map[string]any{"changes": []any{map[string]any{"path": "x", "size": 1, "task_id": "t", "uploaded": true}}}},
		{"unknown change field", eventWorkspaceChanged, map[string]any{"changes": []any{map[string]any{"path": "x", "size": 1, "mode": 1}}}},
	}
	for _, c := range cases {
		if _, err := validateMap(c.typ, c.content); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

// frameTypeOf returns the live frame type of a persisted event type, to
// check it against the contract; a subagent.end's frame type depends on
// its status. Production code never needs it: a frame's type comes with
// its data from the payload's Frame method.
func frameTypeOf(eventType, status string) string {
	switch eventType {
	case eventSubagentQueued:
		return frameTaskQueued
	case eventSubagentStart:
		return frameTaskStarted
	case eventSubagentStep:
		return frameTaskRunning
	case eventSubagentWait:
		return frameTaskWaiting
	case eventWorkspaceChanged:
		return frameWorkspace
	case eventSubagentEnd:
		typ, _ := TaskEnd{Status: status}.Frame(FrameOptions{})
		return typ
	}
	return eventType
}
