package agent

import (
	"encoding/json"
	"os"
	"testing"
)

// TestResumedTextsContract: a lost time, a resumed step and a resumed
// run's notice read as contracts/card_format_contract.json says;
// static/format.js is held to the same examples (TestBrowserCardContract).
func TestResumedTextsContract(t *testing.T) {
	raw, err := os.ReadFile("../contracts/card_format_contract.json")
	if err != nil {
		t.Fatal(err)
	}
	var contract struct {
		LostTimes []struct {
			MS   int64  `json:"ms"`
			Text string `json:"text"`
		} `json:"lost_times"`
		Resumed []struct {
			Cause  string `json:"cause"`
			LostMS int64  `json:"lost_ms"`
			Step   string `json:"step"`
			Notice string `json:"notice"`
		} `json:"resumed"`
	}
	if err := json.Unmarshal(raw, &contract); err != nil {
		t.Fatal(err)
	}
	if len(contract.LostTimes) == 0 || len(contract.Resumed) == 0 {
		t.Fatal("the contract has no lost times or resumed texts")
	}
	for _, c := range contract.LostTimes {
		if got := LostTime(c.MS); got != c.Text {
			t.Errorf("LostTime(%d) = %q, want %q", c.MS, got, c.Text)
		}
	}
	for _, c := range contract.Resumed {
		if got := ResumedStepText(c.Cause, c.LostMS); got != c.Step {
			t.Errorf("ResumedStepText(%q, %d) = %q, want %q", c.Cause, c.LostMS, got, c.Step)
		}
		ev := RunResumed{RunID: "r", Resumes: 1, LostMS: c.LostMS, Cause: c.Cause}
		if got := ResumedNotice(ev); got != c.Notice {
			t.Errorf("ResumedNotice(%+v) = %q, want %q", ev, got, c.Notice)
		}
		// The step the engine writes with that text is a valid event.
		step := TaskStep{TaskRef: TaskRef{TaskID: "t", ExecutionID: "e", RunID: "r", Version: 2}, MessageIndex: 1,
			StepBody: StepBody{Kind: stepResumed, Text: ResumedStepText(c.Cause, c.LostMS), LostMS: c.LostMS}}
		if err := step.Validate(); err != nil {
			t.Errorf("the resumed step %+v: %v", step, err)
		}
	}
}

// TestRunEventsKeepTheirRun: every run event's record carries its run's
// id, so the events API's run_id filter and the frame's envelope find it.
func TestRunEventsKeepTheirRun(t *testing.T) {
	for _, ev := range []Event{
		RunStart{RunID: "r", ModelName: "m"},
		RunWait{RunID: "r", Waiting: true},
		RunResumed{RunID: "r", Resumes: 1, LostMS: 4200, Cause: "restart"},
		RunEnd{RunID: "r", Status: "completed"},
	} {
		rec, err := eventRecord("th", "", ev)
		if err != nil {
			t.Fatalf("%s: %v", ev.EventType(), err)
		}
		if rec.Event.RunID != "r" || rec.Event.Category != categoryRun {
			t.Errorf("%s: record of run %q, category %q; want run r, category run", ev.EventType(), rec.Event.RunID, rec.Event.Category)
		}
	}
}
