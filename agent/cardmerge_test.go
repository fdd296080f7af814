package agent_test

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"

	"herd/agent"
	"herd/models"
)

// The card merge contract (contracts/card_merge_contract.json): the frames
// of each case become the rows the server would have persisted, and
// agent.ProjectCards must rebuild the cards the case expects. The browser
// runs the same cases through static/merge.js (server/browser_cards_test.go).

type mergeContract struct {
	Cases []mergeCase `json:"cases"`
}

type mergeCase struct {
	Name   string       `json:"name"`
	SkipGo string       `json:"skip_go"`
	Frames []mergeFrame `json:"frames"`
	Want   []cardState  `json:"want"`
}

type mergeFrame struct {
	Seq   int64           `json:"seq"`
	Type  string          `json:"type"`
	RunID string          `json:"run_id"`
	Data  json.RawMessage `json:"data"`
	// CreatedAt is the frame's commit time; a message's is in its data.
	CreatedAt time.Time `json:"created_at"`
}

// cardState is what both sides hold of a card; the fixture's result_html
// is the browser's only and is not decoded here.
type cardState struct {
	RunID        string `json:"run_id"`
	TaskID       string `json:"task_id"`
	ExecutionID  string `json:"execution_id"`
	Description  string `json:"description"`
	Prompt       string `json:"prompt"`
	SubagentType string `json:"subagent_type"`
	Status       string `json:"status"`
	Activity     string `json:"activity"`
	Waiting      bool   `json:"waiting"`
	ModelName    string `json:"model_name"`
	Usage        *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
	StopReason string     `json:"stop_reason"`
	Result     string     `json:"result"`
	Error      string     `json:"error"`
	Version    int64      `json:"version"`
	LastSeq    int64      `json:"last_seq"`
	Steps      int64      `json:"steps"`
	QueuedAt   *time.Time `json:"queued_at"`
	StartedAt  *time.Time `json:"started_at"`
	EndedAt    *time.Time `json:"ended_at"`
	Continues  string     `json:"continues"`
	Refusal    *struct {
		Reason string `json:"reason"`
		Limit  int64  `json:"limit"`
	} `json:"refusal"`
	Files []struct {
		Path string `json:"path"`
		Size int64  `json:"size"`
	} `json:"files"`
}

// eventTypes maps a task frame to the event type of its persisted row
// (docs/DESIGN.md §7): every terminal frame is a subagent.end.
var eventTypes = map[string]string{
	"task_queued":    "subagent.queued",
	"task_started":   "subagent.start",
	"task_waiting":   "subagent.wait",
	"task_running":   "subagent.step",
	"task_completed": "subagent.end",
	"task_failed":    "subagent.end",
	"task_cancelled": "subagent.end",
	"task_timed_out": "subagent.end",
}

// endStatuses is the status a terminal frame's row holds; task_timed_out
// carries its own (timed_out or polling_timed_out).
var endStatuses = map[string]string{
	"task_completed": "completed",
	"task_failed":    "failed",
	"task_cancelled": "cancelled",
	"task_timed_out": "timed_out",
}

func TestCardMergeContract(t *testing.T) {
	raw, err := os.ReadFile("../contracts/card_merge_contract.json")
	if err != nil {
		t.Fatal(err)
	}
	var contract mergeContract
	if err := json.Unmarshal(raw, &contract); err != nil {
		t.Fatalf("card merge contract: %v", err)
	}
	if len(contract.Cases) == 0 {
		t.Fatal("card merge contract: no cases")
	}
	for _, tc := range contract.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			if tc.SkipGo != "" {
				t.Skip(tc.SkipGo)
			}
			got := agent.ProjectCards(persisted(t, tc.Frames))
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var gotStates []cardState
			if err := json.Unmarshal(b, &gotStates); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gotStates, tc.Want) {
				g, _ := json.MarshalIndent(gotStates, "", "  ")
				w, _ := json.MarshalIndent(tc.Want, "", "  ")
				t.Errorf("cards differ\ngot  %s\nwant %s", g, w)
			}
		})
	}
}

// persisted is what the server would have stored for frames, and the
// active run: the one run without a run.end frame, if any.
func persisted(t *testing.T, frames []mergeFrame) agent.CardSource {
	t.Helper()
	var src agent.CardSource
	runs, ended := map[string]bool{}, map[string]bool{}
	for _, f := range frames {
		runs[f.RunID] = true
		switch {
		case f.Type == "message":
			src.Messages = append(src.Messages, messageRow(t, f))
		case f.Type == "run.end":
			ended[f.RunID] = true
		case f.Type == "run.resumed":
			// A run's event among the task events: the cards must pass it by.
			src.Events = append(src.Events, models.RunEvent{ThreadID: "th", Seq: f.Seq, RunID: f.RunID, EventType: f.Type,
				Category: "run", Content: models.JSON(f.Data), CreatedAt: f.CreatedAt})
		case f.Type == "workspace":
			src.Events = append(src.Events, workspaceRow(t, f))
		case eventTypes[f.Type] != "":
			src.Events = append(src.Events, eventRow(t, f))
		default:
			t.Fatalf("frame %d: unexpected type %q in the card merge contract", f.Seq, f.Type)
		}
	}
	for run := range runs {
		if ended[run] {
			continue
		}
		if src.ActiveRunID != "" {
			t.Fatalf("two active runs, %s and %s: a case may leave one run without run.end", src.ActiveRunID, run)
		}
		src.ActiveRunID = run
	}
	return src
}

func messageRow(t *testing.T, f mergeFrame) models.Message {
	t.Helper()
	var m struct {
		ID               string          `json:"id"`
		Seq              int64           `json:"seq"`
		RunID            string          `json:"run_id"`
		Type             string          `json:"type"`
		Content          string          `json:"content"`
		ToolCalls        json.RawMessage `json:"tool_calls"`
		ToolCallID       string          `json:"tool_call_id"`
		Name             string          `json:"name"`
		AdditionalKwargs json.RawMessage `json:"additional_kwargs"`
		ModelName        string          `json:"model_name"`
		CreatedAt        time.Time       `json:"created_at"`
	}
	if err := json.Unmarshal(f.Data, &m); err != nil {
		t.Fatalf("frame %d: %v", f.Seq, err)
	}
	return models.Message{
		ID: m.ID, ThreadID: "th", Seq: m.Seq, RunID: m.RunID, Type: m.Type, Content: m.Content,
		ToolCalls: models.JSON(m.ToolCalls), ToolCallID: m.ToolCallID, Name: m.Name,
		AdditionalKwargs: models.JSON(m.AdditionalKwargs), ModelName: m.ModelName, CreatedAt: m.CreatedAt,
	}
}

// eventRow undoes a payload's Frame (agent/frames.go): a step's fields sit
// flat in its row, an end row holds its status, a null usage is no usage, and result_html is
// rendered for the frame only.
func eventRow(t *testing.T, f mergeFrame) models.RunEvent {
	t.Helper()
	var content map[string]json.RawMessage
	if err := json.Unmarshal(f.Data, &content); err != nil {
		t.Fatalf("frame %d: %v", f.Seq, err)
	}
	if step, ok := content["step"]; ok {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(step, &fields); err != nil {
			t.Fatalf("frame %d: step: %v", f.Seq, err)
		}
		for k, v := range fields {
			content[k] = v
		}
		delete(content, "step")
	}
	if status, ok := endStatuses[f.Type]; ok {
		if _, own := content["status"]; !own {
			content["status"] = json.RawMessage(`"` + status + `"`)
		}
	}
	if string(content["usage"]) == "null" {
		delete(content, "usage")
	}
	delete(content, "result_html")
	b, err := json.Marshal(content)
	if err != nil {
		t.Fatal(err)
	}
	var ids struct {
		TaskID string `json:"task_id"`
	}
	if err := json.Unmarshal(f.Data, &ids); err != nil {
		t.Fatalf("frame %d: %v", f.Seq, err)
	}
	return models.RunEvent{
		ThreadID: "th", Seq: f.Seq, RunID: f.RunID, EventType: eventTypes[f.Type], Category: "subagent",
		TaskID: ids.TaskID, Content: models.JSON(b), CreatedAt: f.CreatedAt,
	}
}

// workspaceRow is a workspace frame's row: its payload as the frame
// carries it, under the task of its changes (one call's, so one task).
func workspaceRow(t *testing.T, f mergeFrame) models.RunEvent {
	t.Helper()
	var d struct {
		Changes []struct {
			TaskID string `json:"task_id"`
		} `json:"changes"`
	}
	if err := json.Unmarshal(f.Data, &d); err != nil || len(d.Changes) == 0 {
		t.Fatalf("frame %d: %v, %d changes", f.Seq, err, len(d.Changes))
	}
	return models.RunEvent{
		ThreadID: "th", Seq: f.Seq, RunID: f.RunID, EventType: "workspace.changed", Category: "workspace",
		TaskID: d.Changes[0].TaskID, Content: models.JSON(f.Data), CreatedAt: f.CreatedAt,
	}
}
