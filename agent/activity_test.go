package agent

import (
	"encoding/json"
	"os"
	"testing"
)

// TestActivityContract: a step reads in the words
// contracts/card_format_contract.json gives it; static/format.js is held
// to the same examples (TestBrowserCardContract).
func TestActivityContract(t *testing.T) {
	raw, err := os.ReadFile("../contracts/card_format_contract.json")
	if err != nil {
		t.Fatal(err)
	}
	var contract struct {
		Activities []struct {
			Step StepBody `json:"step"`
			Text string   `json:"text"`
		} `json:"activities"`
	}
	if err := json.Unmarshal(raw, &contract); err != nil {
		t.Fatal(err)
	}
	if len(contract.Activities) == 0 {
		t.Fatal("the contract has no activities")
	}
	for _, c := range contract.Activities {
		if got := ActivityText(c.Step); got != c.Text {
			t.Errorf("ActivityText(%+v) = %q, want %q", c.Step, got, c.Text)
		}
	}
}
