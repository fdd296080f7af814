package agent

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"herd/models"
)

// toolMessageContract is contracts/tool_message_contract.json.
type toolMessageContract struct {
	ExecutionTimedOut []struct {
		Seconds int    `json:"timeout_seconds"`
		Error   string `json:"error"`
	} `json:"execution_timed_out"`
	PollingTimedOut []struct {
		Seconds int    `json:"timeout_seconds"`
		Margin  int    `json:"safety_margin_seconds"`
		Error   string `json:"error"`
	} `json:"polling_timed_out"`
	UnknownSubagentType []struct {
		Type      string   `json:"subagent_type"`
		Available []string `json:"available"`
		Error     string   `json:"error"`
	} `json:"unknown_subagent_type"`
	ToolMessages []struct {
		Name    string `json:"name"`
		Outcome struct {
			Status     string   `json:"status"`
			StopReason string   `json:"stop_reason"`
			Result     string   `json:"result"`
			Error      string   `json:"error"`
			ModelName  string   `json:"model_name"`
			Refusal    *Refusal `json:"refusal"`
		} `json:"outcome"`
		contractMessage
	} `json:"tool_messages"`
	LegacyMessages []struct {
		Name string `json:"name"`
		contractMessage
	} `json:"legacy_messages"`
	BoundedMessages []struct {
		Name string `json:"name"`
		contractMessage
	} `json:"bounded_messages"`
}

// contractMessage is a task ToolMessage of the contract and the card a
// reader must make of it.
type contractMessage struct {
	Content string          `json:"content"`
	Kwargs  json.RawMessage `json:"additional_kwargs"`
	Card    struct {
		Status     string   `json:"status"`
		StopReason string   `json:"stop_reason"`
		Result     string   `json:"result"`
		Error      string   `json:"error"`
		Refusal    *Refusal `json:"refusal"`
	} `json:"card"`
}

// checkCard reads m as a card does and compares it with the card the
// contract expects.
func (m contractMessage) checkCard(t *testing.T) {
	t.Helper()
	var c Card
	c.applyResult(&models.Message{Content: m.Content, AdditionalKwargs: models.JSON(m.Kwargs)})
	got := []any{c.Status, c.StopReason, c.Result, c.Error, c.Refusal}
	want := []any{m.Card.Status, m.Card.StopReason, m.Card.Result, m.Card.Error, m.Card.Refusal}
	if g, w := mustJSON(got), mustJSON(want); g != w {
		t.Errorf("card = %s\nwant   %s", g, w)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestToolMessageContract: agent writes exactly the contract's texts and
// metadata for every outcome, and a card reads them, and the legacy rows,
// as the contract says (static/merge.js is held to the same file).
func TestToolMessageContract(t *testing.T) {
	var c toolMessageContract
	loadContract(t, "tool_message_contract.json", &c)
	if len(c.ToolMessages) == 0 || len(c.LegacyMessages) == 0 || len(c.BoundedMessages) == 0 || len(c.ExecutionTimedOut) == 0 || len(c.PollingTimedOut) == 0 || len(c.UnknownSubagentType) == 0 {
		t.Fatal("the contract lacks a section")
	}
	for _, tc := range c.ExecutionTimedOut {
		if got := executionTimedOut(time.Duration(tc.Seconds) * time.Second); got != tc.Error {
			t.Errorf("executionTimedOut(%ds) = %q, want %q", tc.Seconds, got, tc.Error)
		}
	}
	for _, tc := range c.PollingTimedOut {
		if got := pollingTimedOut(time.Duration(tc.Seconds)*time.Second, tc.Margin); got != tc.Error {
			t.Errorf("pollingTimedOut(%ds, %ds) = %q, want %q", tc.Seconds, tc.Margin, got, tc.Error)
		}
	}
	for _, tc := range c.UnknownSubagentType {
		if got := unknownSubagentType(tc.Type, tc.Available); got != tc.Error {
			t.Errorf("unknownSubagentType(%q) = %q, want %q", tc.Type, got, tc.Error)
		}
	}
	statuses := map[string]bool{}
	for _, tc := range c.ToolMessages {
		t.Run(tc.Name, func(t *testing.T) {
			in := tc.Outcome
			o := Outcome{Status: in.Status, StopReason: in.StopReason, Result: in.Result, Error: in.Error, ModelName: in.ModelName}
			if in.Refusal != nil {
				o = refused(in.Refusal)
			}
			statuses[o.Status] = true
			content, kw, err := o.ToolMessage()
			if err != nil {
				t.Fatal(err)
			}
			if content != tc.Content {
				t.Errorf("content = %q\nwant      %q", content, tc.Content)
			}
			var want map[string]any
			if err := json.Unmarshal(tc.Kwargs, &want); err != nil {
				t.Fatal(err)
			}
			if got, w := mustJSON(kw), mustJSON(want); got != w {
				t.Errorf("additional_kwargs = %s\nwant                %s", got, w)
			}
			_, typed, _ := o.toolMessage()
			if stored, w := string(models.MustJSON(typed)), mustJSON(want); stored != w {
				t.Errorf("stored additional_kwargs = %s\nwant                       %s", stored, w)
			}
			tc.checkCard(t)
		})
	}
	for _, s := range TerminalStatuses() {
		if !statuses[s] {
			t.Errorf("the contract has no tool message of status %s", s)
		}
	}
	for _, tc := range c.LegacyMessages {
		t.Run("legacy: "+tc.Name, tc.checkCard)
	}
	for _, tc := range c.BoundedMessages {
		t.Run("bounded: "+tc.Name, tc.checkCard)
	}
}

// TestRefusalReasonsContract: the refusal reasons agent writes and reads
// are exactly the contract's.
func TestRefusalReasonsContract(t *testing.T) {
	var c struct {
		Reasons []string `json:"valid_refusal_reasons"`
	}
	loadContract(t, "subagent_status_contract.json", &c)
	if got, want := sorted(RefusalReasons()), sorted(c.Reasons); !slices.Equal(got, want) {
		t.Errorf("refusal reasons = %v, contract %v", got, want)
	}
	for _, r := range append(slices.Clone(c.Reasons), "max_running", "", "MAX_TOTAL_PER_RUN") {
		kw := map[string]any{"subagent_status": "failed", "subagent_refusal": map[string]any{"reason": r, "limit": json.Number("3")}}
		md, _ := readMetadata(kw)
		if got, want := md.Refusal != nil, slices.Contains(c.Reasons, r); got != want {
			t.Errorf("reads refusal %q: %v, want %v", r, got, want)
		}
		_, _, err := (Outcome{Status: StatusFailed, Refusal: &Refusal{Reason: r, Limit: 3}}).ToolMessage()
		if got, want := err == nil, slices.Contains(c.Reasons, r); got != want {
			t.Errorf("writes refusal %q: %v, want %v", r, got, want)
		}
	}
	for _, limit := range []any{json.Number("-1"), json.Number("2.5"), "4", true, nil} {
		kw := map[string]any{"subagent_status": "failed", "subagent_refusal": map[string]any{"reason": RefusedPerRun, "limit": limit}}
		if md, _ := readMetadata(kw); md.Refusal != nil {
			t.Errorf("reads a refusal with limit %v", limit)
		}
	}
	if _, _, err := (Outcome{Status: StatusCompleted, Refusal: &Refusal{Reason: RefusedPerRun, Limit: 3}}).ToolMessage(); err == nil {
		t.Error("writes a refusal of a completed task")
	}
}
