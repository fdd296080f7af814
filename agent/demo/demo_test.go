package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"herd/agent"
	"herd/agent/tools"
)

// taskSpec is the task tool's schema as the lead sees it, reduced to
// what the demo reads, and encoded as the runtime encodes it.
func taskSpec(types ...string) tools.Spec {
	return tools.Schema{
		Properties: map[string]tools.Prop{
			"description":         {Type: "string"},
			"prompt":              {Type: "string"},
			"subagent_type":       {Type: "string", Enum: types},
			"acceptance_criteria": {Type: "string"},
		},
		Required: []string{"description", "prompt", "subagent_type"},
	}.Spec(agent.ToolTask, "Delegate.")
}

func leadRequest(t *testing.T, types []string, msgs ...agent.Message) agent.Request {
	t.Helper()
	specs := []tools.Spec{taskSpec(types...), {Name: tools.Ls, Parameters: json.RawMessage(`{"type":"object"}`)}}
	return agent.Request{Model: "demo-fast", Messages: msgs, Tools: specs}
}

func human(s string) agent.Message { return agent.Message{Type: agent.TypeHuman, Content: s} }

var allTypes = []string{agent.SubagentGeneral, agent.SubagentBash, "researcher"}

type taskArgs struct {
	Description  string `json:"description"`
	Prompt       string `json:"prompt"`
	SubagentType string `json:"subagent_type"`
}

func decodeTask(t *testing.T, c agent.ToolCall) taskArgs {
	t.Helper()
	if c.Name != agent.ToolTask {
		t.Fatalf("tool call name = %q, want %q", c.Name, agent.ToolTask)
	}
	var a taskArgs
	if err := json.Unmarshal(c.Args, &a); err != nil {
		t.Fatalf("task args %s: %v", c.Args, err)
	}
	return a
}

func complete(t *testing.T, d *Provider, req agent.Request) (agent.Response, string) {
	t.Helper()
	var streamed strings.Builder
	resp, err := d.Complete(t.Context(), req, func(s string) { streamed.WriteString(s) })
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	return resp, streamed.String()
}

func TestUsage(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	on, off := true, false
	msgs := []agent.Message{
		{Type: agent.TypeSystem, Content: "a b"}, // 2
		human("hello, world!"),                   // 4
		{Type: agent.TypeAI, Content: "ok", ToolCalls: []agent.ToolCall{{ID: "call_1", Name: tools.Ls, Args: json.RawMessage(`{"a":"b"}`)}}}, // 1 + 9
		{Type: agent.TypeTool, ToolCallID: "call_1", Name: tools.Ls, Content: "x1 y2"},                                                       // 2
	}
	const wantInput = 2 + 4 + 1 + 9 + 2
	tests := []struct {
		name      string
		usage     *bool
		wantUsage bool
	}{
		{"unset reports usage", nil, true},
		{"true reports usage", &on, true},
		{"false reports none", &off, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New(agent.ModelConfig{Name: "demo-fast", Usage: tt.usage})
			resp, _ := complete(t, d, agent.Request{Messages: msgs, Tools: []tools.Spec{{Name: tools.Ls}, {Name: tools.WriteFile}}})
			if !tt.wantUsage {
				if resp.Usage != nil {
					t.Errorf("usage = %+v, want nil", *resp.Usage)
				}
				return
			}
			u := resp.Usage
			if u == nil {
				t.Fatal("usage = nil, want a report")
			}
			if u.InputTokens != wantInput {
				t.Errorf("input tokens = %d, want %d", u.InputTokens, wantInput)
			}
			wantOutput := tokens(resp.Text)
			for _, c := range resp.ToolCalls {
				wantOutput += tokens(string(c.Args))
			}
			if u.OutputTokens != wantOutput || u.OutputTokens == 0 {
				t.Errorf("output tokens = %d, want %d (> 0)", u.OutputTokens, wantOutput)
			}
			if u.TotalTokens != u.InputTokens+u.OutputTokens {
				t.Errorf("total tokens = %d, want %d + %d", u.TotalTokens, u.InputTokens, u.OutputTokens)
			}
		})
	}
}

func TestFailAfter(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	tests := []struct {
		name      string
		failAfter int
		wantFail  []bool
	}{
		{"third call fails, the others succeed", 3, []bool{false, false, true, false, false}},
		{"first call fails", 1, []bool{true, false}},
		{"zero never fails", 0, []bool{false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New(agent.ModelConfig{Name: "demo-fast", FailAfter: tt.failAfter})
			req := leadRequest(t, allTypes, human("hi"))
			for i, wantFail := range tt.wantFail {
				_, err := d.Complete(t.Context(), req, nil)
				if !wantFail {
					if err != nil {
						t.Errorf("call %d: %v, want success", i+1, err)
					}
					continue
				}
				if !errors.Is(err, agent.ErrProvider) || !strings.Contains(fmt.Sprint(err), "fail_after") {
					t.Errorf("call %d: error %v, want the configured demo failure wrapping ErrProvider", i+1, err)
				}
			}
		})
	}
}

func TestContext(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	tests := []struct {
		name    string
		cfg     agent.ModelConfig
		ctx     func(t *testing.T) (context.Context, context.CancelFunc)
		cancel  string // "timer": after 20 ms; "delta": on the first streamed chunk
		wantErr error
	}{
		{
			name:    "cancel during latency",
			cfg:     agent.ModelConfig{Name: "demo-fast", LatencyMS: 10_000},
			ctx:     func(t *testing.T) (context.Context, context.CancelFunc) { return context.WithCancel(t.Context()) },
			cancel:  "timer",
			wantErr: context.Canceled,
		},
		{
			name: "deadline during latency",
			cfg:  agent.ModelConfig{Name: "demo-fast", LatencyMS: 10_000},
			ctx: func(t *testing.T) (context.Context, context.CancelFunc) {
				return context.WithTimeout(t.Context(), 20*time.Millisecond)
			},
			wantErr: context.DeadlineExceeded,
		},
		{
			name:    "cancel while streaming",
			cfg:     agent.ModelConfig{Name: "demo-fast", ChunkMS: 10_000},
			ctx:     func(t *testing.T) (context.Context, context.CancelFunc) { return context.WithCancel(t.Context()) },
			cancel:  "delta",
			wantErr: context.Canceled,
		},
		{
			name: "already cancelled with no latency",
			cfg:  agent.ModelConfig{Name: "demo-fast"},
			ctx: func(t *testing.T) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				return ctx, cancel
			},
			wantErr: context.Canceled,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx(t)
			defer cancel()
			if tt.cancel == "timer" {
				stop := time.AfterFunc(20*time.Millisecond, cancel)
				defer stop.Stop()
			}
			deltas := 0
			onDelta := func(string) {
				deltas++
				if tt.cancel == "delta" {
					cancel()
				}
			}
			start := time.Now()
			_, err := New(tt.cfg).Complete(ctx, leadRequest(t, allTypes, human("hello there")), onDelta)
			if elapsed := time.Since(start); elapsed > 2*time.Second {
				t.Errorf("returned after %v, want promptly", elapsed)
			}
			if !errors.Is(err, tt.wantErr) || !errors.Is(err, agent.ErrProvider) {
				t.Errorf("error %v, want one wrapping %v and ErrProvider", err, tt.wantErr)
			}
			if tt.cancel == "delta" && deltas != 1 {
				t.Errorf("got %d deltas, want 1 before the cancel took effect", deltas)
			}
		})
	}
}

func TestTiming(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	t.Run("waits are latency first, then one per chunk gap", func(t *testing.T) {
		var waits []time.Duration
		fake := func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
		d := New(agent.ModelConfig{Name: "demo-fast", LatencyMS: 7, ChunkMS: 3}, WithSleep(fake))
		var deltas []string
		resp, err := d.Complete(t.Context(), leadRequest(t, allTypes, human("hello there")), func(s string) { deltas = append(deltas, s) })
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(deltas, "") != resp.Text || len(deltas) < 10 {
			t.Fatalf("got %d deltas joining to %q, want many joining to the text", len(deltas), strings.Join(deltas, ""))
		}
		want := []time.Duration{7 * time.Millisecond}
		for range len(deltas) - 1 {
			want = append(want, 3*time.Millisecond)
		}
		if !slices.Equal(waits, want) {
			t.Errorf("waits = %v, want %v", waits, want)
		}
		for i, s := range deltas[:len(deltas)-1] {
			if strings.TrimSpace(s) == "" || strings.Contains(strings.TrimSpace(s), " ") {
				t.Errorf("delta %d = %q, want one word", i, s)
			}
		}
	})

	t.Run("zero delays never wait", func(t *testing.T) {
		fake := func(context.Context, time.Duration) error { t.Error("waited with zero delays"); return nil }
		d := New(agent.ModelConfig{Name: "demo-fast"}, WithSleep(fake))
		complete(t, d, leadRequest(t, allTypes, human("hello there")))
	})

	t.Run("real timers roughly honour latency and chunks", func(t *testing.T) {
		d := New(agent.ModelConfig{Name: "demo-fast", LatencyMS: 30, ChunkMS: 2})
		var first time.Duration
		chunks := 0
		start := time.Now()
		_, err := d.Complete(t.Context(), leadRequest(t, allTypes, human("hello there")), func(string) {
			if chunks == 0 {
				first = time.Since(start)
			}
			chunks++
		})
		total := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if first < 30*time.Millisecond {
			t.Errorf("first chunk after %v, want ≥ 30ms", first)
		}
		if floor := 30*time.Millisecond + time.Duration(chunks-1)*2*time.Millisecond; total < floor {
			t.Errorf("took %v for %d chunks, want ≥ %v", total, chunks, floor)
		}
	})
}

func TestDeterminism(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	requests := []struct {
		name string
		req  agent.Request
	}{
		{"lead list", leadRequest(t, allTypes, human("Do these:\n- one thing\n- researcher: another thing"))},
		{"lead answer", leadRequest(t, allTypes, human("Tell me a story"))},
		{"subagent", agent.Request{Messages: []agent.Message{human("Write notes")}, Tools: tools.NewSet(tools.Workspace()...).Specs()}},
	}
	for _, tt := range requests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := complete(t, New(agent.ModelConfig{Name: "demo-fast"}), tt.req)
			d := New(agent.ModelConfig{Name: "demo-fast"})
			complete(t, d, tt.req) // a used instance answers the same
			b, _ := complete(t, d, tt.req)
			if a.Text != b.Text {
				t.Errorf("texts differ:\n%q\n%q", a.Text, b.Text)
			}
			if len(a.ToolCalls) != len(b.ToolCalls) {
				t.Fatalf("got %d and %d tool calls", len(a.ToolCalls), len(b.ToolCalls))
			}
			for i := range a.ToolCalls {
				if a.ToolCalls[i].Name != b.ToolCalls[i].Name || string(a.ToolCalls[i].Args) != string(b.ToolCalls[i].Args) {
					t.Errorf("call %d differs: %s %s vs %s %s", i, a.ToolCalls[i].Name, a.ToolCalls[i].Args, b.ToolCalls[i].Name, b.ToolCalls[i].Args)
				}
				if a.ToolCalls[i].ID == b.ToolCalls[i].ID {
					t.Errorf("call %d id %q repeated, want fresh ids", i, a.ToolCalls[i].ID)
				}
			}
			if *a.Usage != *b.Usage {
				t.Errorf("usage differs: %+v vs %+v", *a.Usage, *b.Usage)
			}
			if a.CallID == b.CallID {
				t.Errorf("call id %q repeated, want a fresh one per call", a.CallID)
			}
		})
	}
}

func TestResponseIdentity(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	tests := []struct {
		name string
		cfg  agent.ModelConfig
		want string
	}{
		{"model id when set", agent.ModelConfig{Name: "demo-fast", Model: "demo-fast-v1"}, "demo-fast-v1"},
		{"name otherwise", agent.ModelConfig{Name: "demo-deep"}, "demo-deep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, _ := complete(t, New(tt.cfg), leadRequest(t, allTypes, human("hi")))
			if resp.Model != tt.want {
				t.Errorf("model = %q, want %q", resp.Model, tt.want)
			}
			if _, err := uuid.Parse(resp.CallID); err != nil {
				t.Errorf("call id %q: %v, want a UUID", resp.CallID, err)
			}
		})
	}
}

func TestLatencyJitter(t *testing.T) {
	d := New(agent.ModelConfig{Name: "m", LatencyMS: 1000, LatencyJitter: 0.5})
	seen := map[int]bool{}
	for i := range 200 {
		req := agent.Request{Messages: []agent.Message{{Type: agent.TypeHuman, Content: fmt.Sprint("topic ", i)}}}
		ms := d.latency(req)
		if ms < 500 || ms >= 1500 {
			t.Fatalf("latency %d ms outside 1000 ± 50%%", ms)
		}
		if d.latency(req) != ms {
			t.Fatal("the same request waited differently")
		}
		seen[ms/100] = true
	}
	if len(seen) < 8 {
		t.Errorf("latencies cover %d of 10 buckets: not spread", len(seen))
	}
	if got := New(agent.ModelConfig{LatencyMS: 300}).latency(agent.Request{}); got != 300 {
		t.Errorf("no jitter: %d ms, want 300", got)
	}
}

// Output nobody watches is not streamed, and a long reply streams within
// the budget: a 5,000-line output must not keep a subagent busy for minutes.
func TestLongRepliesDoNotCrawl(t *testing.T) {
	var waits []time.Duration
	fake := func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	d := New(agent.ModelConfig{Name: "demo-fast", LatencyMS: 7, ChunkMS: 30}, WithSleep(fake))
	long := strings.Repeat("line of command output here\n", 5000)

	waits = nil
	if err := d.stream(t.Context(), long, func(string) {}); err != nil {
		t.Fatal(err)
	}
	var total time.Duration
	for _, w := range waits {
		total += w
	}
	if total > streamBudget {
		t.Errorf("a 5,000-line reply streamed for %v, want at most %v", total, streamBudget)
	}
	var got strings.Builder
	if err := d.stream(t.Context(), long, func(s string) { got.WriteString(s) }); err != nil || got.String() != long {
		t.Errorf("grouped deltas do not join to the text (%v)", err)
	}

	waits = nil
	complete(t, d, leadRequest(t, allTypes, human("hello there")))
	waits = nil
	if _, err := d.Complete(t.Context(), leadRequest(t, allTypes, human("hello there")), nil); err != nil {
		t.Fatal(err)
	}
	if len(waits) != 1 {
		t.Errorf("a call nobody watches waited %v, want only its latency", waits)
	}
}
