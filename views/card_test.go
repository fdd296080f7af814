package views

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

type formatContract struct {
	TokenLabels []struct {
		Total    *int64 `json:"total"`
		Terminal bool   `json:"terminal"`
		Label    string `json:"label"`
	} `json:"token_labels"`
	StatusTexts []struct {
		Status, Activity, Text string
		Waiting                bool
	} `json:"status_texts"`
	NotStarted []struct {
		Refusal *struct {
			Reason string `json:"reason"`
			Limit  int64  `json:"limit"`
		} `json:"refusal"`
		Text string `json:"text"`
	} `json:"not_started"`
	Held []struct {
		Refusal *struct {
			Reason string `json:"reason"`
			Limit  int64  `json:"limit"`
		} `json:"refusal"`
		Text string `json:"text"`
	} `json:"held"`
	StopBadges []struct {
		StopReason string `json:"stop_reason"`
		Badge      string `json:"badge"`
	} `json:"stop_badges"`
	Durations []struct {
		MS   int64  `json:"ms"`
		Text string `json:"text"`
	} `json:"durations"`
	UsageNotes []struct {
		Totals struct {
			Calls      int64 `json:"calls"`
			Unreported int64 `json:"unreported_calls"`
			Lost       int64 `json:"lost_calls"`
			Total      int64 `json:"total_tokens"`
		} `json:"totals"`
		Figure string `json:"figure"`
		Note   string `json:"note"`
	} `json:"usage_notes"`
}

func TestCardFormatContract(t *testing.T) {
	b, err := os.ReadFile("../contracts/card_format_contract.json")
	if err != nil {
		t.Fatal(err)
	}
	var c formatContract
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	for _, tl := range c.TokenLabels {
		if got := TokenLabel(tl.Total, tl.Terminal); got != tl.Label {
			t.Errorf("TokenLabel(%v, %v) = %q, want %q", deref(tl.Total), tl.Terminal, got, tl.Label)
		}
	}
	for _, st := range c.StatusTexts {
		if got := StatusText(st.Status, st.Activity, st.Waiting); got != st.Text {
			t.Errorf("StatusText(%q, %q, %v) = %q, want %q", st.Status, st.Activity, st.Waiting, got, st.Text)
		}
	}
	for _, ns := range c.NotStarted {
		var reason string
		var limit int64
		if ns.Refusal != nil {
			reason, limit = ns.Refusal.Reason, ns.Refusal.Limit
		}
		if got := NotStartedText(reason, limit); got != ns.Text {
			t.Errorf("NotStartedText(%q, %d) = %q, want %q", reason, limit, got, ns.Text)
		}
	}
	if len(c.NotStarted) == 0 {
		t.Error("the contract has no not_started cases")
	}
	for _, h := range c.Held {
		var reason string
		var limit int64
		if h.Refusal != nil {
			reason, limit = h.Refusal.Reason, h.Refusal.Limit
		}
		if got := HeldText(reason, limit); got != h.Text {
			t.Errorf("HeldText(%q, %d) = %q, want %q", reason, limit, got, h.Text)
		}
	}
	if len(c.Held) == 0 {
		t.Error("the contract has no held cases")
	}
	for _, sb := range c.StopBadges {
		if got := StopLabel(sb.StopReason); got != sb.Badge {
			t.Errorf("StopLabel(%q) = %q, want %q", sb.StopReason, got, sb.Badge)
		}
	}
	for _, d := range c.Durations {
		if got := Duration(time.Duration(d.MS) * time.Millisecond); got != d.Text {
			t.Errorf("Duration(%dms) = %q, want %q", d.MS, got, d.Text)
		}
	}
	if len(c.Durations) == 0 {
		t.Error("the contract has no durations")
	}
	for _, n := range c.UsageNotes {
		tt := UsageTotals{Calls: n.Totals.Calls, Unreported: n.Totals.Unreported, Lost: n.Totals.Lost, Total: n.Totals.Total}
		if got := usageFigure(UsageView{}, tt); got != n.Figure {
			t.Errorf("usageFigure(%+v) = %q, want %q", tt, got, n.Figure)
		}
		if got := usageNote(tt); got != n.Note {
			t.Errorf("usageNote(%+v) = %q, want %q", tt, got, n.Note)
		}
	}
	if len(c.UsageNotes) == 0 {
		t.Error("the contract has no usage notes")
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestCardMarkup(t *testing.T) {
	total := int64(12345)
	at := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	queued, started, ended := at("2026-12-01T10:00:01.25Z"), at("2026-12-01T10:00:03.5Z"), at("2026-12-01T10:01:08Z")
	cases := []struct {
		name     string
		card     CardView
		contains []string
		absent   []string
	}{
		{"running with usage", CardView{TaskID: "call_1", RunID: "r1", Description: "Check docs", Status: "running", Activity: "ls", ModelName: "demo-deep", ModelLabel: "Demo Deep", ShowTokens: true, TotalTokens: &total},
			[]string{`id="card-r1-call_1"`, `data-status="running"`, `<span class="card-status">ls</span>`, `title="demo-deep">Demo Deep</span>`, `<span class="card-tokens">12.3K tokens</span>`, `aria-expanded="false"`, `data-total-tokens="12345"`},
			[]string{`class="card-cancel" hidden`}},
		{"gated", CardView{TaskID: "t", RunID: "r", Status: "completed", ModelName: "m", ModelLabel: "M", ShowTokens: false, TotalTokens: nil},
			[]string{`class="card-cancel" hidden`, `<span class="card-tokens" hidden></span>`},
			[]string{"tokens<", "usage unavailable", "collecting"}},
		{"no usage, terminal", CardView{TaskID: "t", RunID: "r", Status: "failed", ShowTokens: true, Error: "boom"},
			[]string{"usage unavailable", `<pre class="card-error" tabindex="0">boom</pre>`, `class="card-model" title="" hidden`},
			[]string{">0 tokens"}},
		{"ended: its total, its times for the script", CardView{TaskID: "t", RunID: "r", Status: "completed", QueuedAt: queued, StartedAt: started, EndedAt: ended, Now: ended.Add(time.Hour)},
			[]string{`<span class="card-time" aria-live="off">1m 04s</span>`, `data-queued-at="2026-12-01T10:00:01.250Z"`, `data-started-at="2026-12-01T10:00:03.500Z"`, `data-ended-at="2026-12-01T10:01:08.000Z"`},
			nil},
		{"running: its time so far", CardView{TaskID: "t", RunID: "r", Status: "running", Activity: "Reading notes/plan.md", StartedAt: started, Now: started.Add(42 * time.Second)},
			[]string{`<span class="card-time" aria-live="off">42s</span>`, `<span class="card-status">Reading notes/plan.md</span>`, `data-ended-at=""`},
			nil},
		{"queued: its wait so far", CardView{TaskID: "t", RunID: "r", Status: "queued", QueuedAt: queued, Now: queued.Add(3 * time.Second)},
			[]string{`<span class="card-time" aria-live="off">3s</span>`}, nil},
		{"not started: no time", CardView{TaskID: "t", RunID: "r", Status: "failed", Error: "over the limit", RefusalReason: "max_concurrent_per_response", RefusalLimit: 4, EndedAt: ended, Now: ended.Add(time.Second)},
			[]string{`<span class="card-time" aria-live="off"></span>`, `<span class="card-status">Not started · limit of 4 per response</span>`,
				`data-not-started="1"`, `data-refusal-reason="max_concurrent_per_response"`, `data-refusal-limit="4"`}, nil},
		{"held: waiting for a later call, nothing to cancel", CardView{TaskID: "t", RunID: "r", Status: "queued", Error: "over the limit", RefusalReason: "max_concurrent_per_response", RefusalLimit: 4, QueuedAt: queued, Now: queued.Add(3 * time.Second)},
			[]string{`<span class="card-status">Waiting: at most 4 start per response</span>`, `<span class="card-time" aria-live="off">3s</span>`,
				`data-not-started=""`, `data-refusal-reason="max_concurrent_per_response"`, `data-refusal-limit="4"`, `class="card-cancel" hidden`}, nil},
		{"its wording is not read", CardView{TaskID: "t", RunID: "r", Status: "failed", Error: "Not started: one response may start at most 4 subagents (x)."},
			[]string{`<span class="card-status">Failed</span>`, `data-not-started=""`, `data-refusal-reason=""`, `data-refusal-limit=""`}, nil},
		{"capped", CardView{TaskID: "t", RunID: "r", Status: "completed", StopReason: "turn_capped", ShowTokens: true},
			[]string{`<span class="card-badge">capped: turn budget</span>`}, nil},
		{"hostile text is escaped", CardView{TaskID: "t", RunID: "r", Status: "failed", Description: "<img src=x onerror=alert(1)>", Error: "<script>x</script>", Prompt: "<b>p</b>"},
			[]string{"&lt;img src=x onerror=alert(1)&gt;", "&lt;script&gt;x&lt;/script&gt;", "&lt;b&gt;p&lt;/b&gt;"},
			[]string{"<img", "<script", "<b>"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Card(c.card).Render(context.Background(), &buf); err != nil {
				t.Fatal(err)
			}
			html := buf.String()
			for _, s := range c.contains {
				if !strings.Contains(html, s) {
					t.Errorf("missing %q in\n%s", s, html)
				}
			}
			for _, s := range c.absent {
				if strings.Contains(html, s) {
					t.Errorf("must not contain %q:\n%s", s, html)
				}
			}
		})
	}
}

// TestUsagePanelNotReported: a line whose calls all went unreported says
// "not reported", never 0; one partly reported names the calls beside
// its figure, those a restart cut apart from the others, and a line of
// calls cut by a restart alone says so beside its "not reported".
// static/usage-panel.js writes the same (TestBrowserTotalsAddUp compares
// the page before and after a reload).
func TestUsagePanelNotReported(t *testing.T) {
	silent := UsageTotals{Calls: 2, Unreported: 2}
	mixed := UsageTotals{Input: 900, Output: 334, Total: 1234, Calls: 3, Unreported: 1}
	cut := UsageTotals{Calls: 1, Unreported: 1, Lost: 1}
	u := UsageView{
		Total: UsageTotals{Input: 900, Output: 334, Total: 1234, Calls: 6, Unreported: 4, Lost: 1},
		Lead:  silent, Subagents: mixed,
		ByModel: []ModelUsage{{Model: "quiet", Label: "Quiet", UsageTotals: silent}, {Model: "fast", Label: "Fast", UsageTotals: mixed}, {Model: "deep", Label: "Deep", UsageTotals: cut}},
	}
	var buf bytes.Buffer
	if err := UsagePanel(u).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{
		`<span data-usage="total">1,234</span>`,
		`data-usage="unreported">not reported for 3 calls; 1 call cut by a restart: usage not reported</span>`,
		`<dd data-usage="lead">not reported</dd>`,
		`<dd data-usage="subagents">1,234</dd>`,
		`<td title="quiet">Quiet</td><td>2</td><td>not reported</td><td>not reported</td><td>not reported</td>`,
		`<td>1,234 <span class="usage-unreported">not reported for 1 call</span></td>`,
		`<td title="deep">Deep</td><td>1</td><td>not reported</td><td>not reported</td><td>not reported <span class="usage-unreported">1 call cut by a restart: usage not reported</span></td>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("missing %q in\n%s", want, html)
		}
	}
	if strings.Contains(html, `data-usage="lead">0<`) {
		t.Error("the silent lead reads 0")
	}
}

// TestToolMessageStatusLines: the card of every ToolMessage in
// contracts/tool_message_contract.json has the status line the contract
// gives it (agent's texts_test.go checks the card it reads).
func TestToolMessageStatusLines(t *testing.T) {
	b, err := os.ReadFile("../contracts/tool_message_contract.json")
	if err != nil {
		t.Fatal(err)
	}
	type card struct {
		Status  string `json:"status"`
		Refusal *struct {
			Reason string `json:"reason"`
			Limit  int64  `json:"limit"`
		} `json:"refusal"`
		StatusText string `json:"status_text"`
	}
	type message struct {
		Name string `json:"name"`
		Card card   `json:"card"`
	}
	var c struct {
		ToolMessages    []message `json:"tool_messages"`
		LegacyMessages  []message `json:"legacy_messages"`
		BoundedMessages []message `json:"bounded_messages"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	cases := append(append(c.ToolMessages, c.LegacyMessages...), c.BoundedMessages...)
	if len(c.ToolMessages) == 0 || len(c.LegacyMessages) == 0 {
		t.Fatal("the contract has no tool messages")
	}
	for _, tc := range cases {
		v := CardView{Status: tc.Card.Status}
		if r := tc.Card.Refusal; r != nil {
			v.RefusalReason, v.RefusalLimit = r.Reason, r.Limit
		}
		if got := cardStatus(v); got != tc.Card.StatusText {
			t.Errorf("%s: status line %q, want %q", tc.Name, got, tc.Card.StatusText)
		}
	}
}
