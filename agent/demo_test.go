package agent

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

	"herd/agent/tools"
)

// demoTaskSpec is the task tool's schema as the lead sees it, reduced to
// what the demo reads.
func demoTaskSpec(t *testing.T, types ...string) tools.Spec {
	t.Helper()
	params, err := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"description":         map[string]any{"type": "string"},
			"prompt":              map[string]any{"type": "string"},
			"subagent_type":       map[string]any{"type": "string", "enum": types},
			"acceptance_criteria": map[string]any{"type": "string"},
		},
		"required": []string{"description", "prompt", "subagent_type"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tools.Spec{Name: ToolTask, Description: "Delegate.", Parameters: params}
}

func demoLeadRequest(t *testing.T, types []string, msgs ...Message) Request {
	t.Helper()
	specs := []tools.Spec{demoTaskSpec(t, types...), {Name: tools.Ls, Parameters: json.RawMessage(`{"type":"object"}`)}}
	return Request{Model: "demo-fast", Messages: msgs, Tools: specs}
}

func demoHuman(s string) Message { return Message{Type: TypeHuman, Content: s} }

var demoAllTypes = []string{SubagentGeneral, SubagentBash, "researcher"}

type demoTaskArgs struct {
	Description  string `json:"description"`
	Prompt       string `json:"prompt"`
	SubagentType string `json:"subagent_type"`
}

func demoDecodeTask(t *testing.T, c ToolCall) demoTaskArgs {
	t.Helper()
	if c.Name != ToolTask {
		t.Fatalf("tool call name = %q, want %q", c.Name, ToolTask)
	}
	var a demoTaskArgs
	if err := json.Unmarshal(c.Args, &a); err != nil {
		t.Fatalf("task args %s: %v", c.Args, err)
	}
	return a
}

func demoComplete(t *testing.T, d *Demo, req Request) (Response, string) {
	t.Helper()
	var streamed strings.Builder
	resp, err := d.Complete(t.Context(), req, func(s string) { streamed.WriteString(s) })
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	return resp, streamed.String()
}

func TestDemoLeadFirstResponse(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	type wantTask struct {
		description, subagentType string
		promptHas                 []string
		promptLacks               string
	}
	tests := []struct {
		name     string
		msg      string
		types    []string
		want     []wantTask
		textHas  []string
		textNots []string
	}{
		{
			name:  "three item list with a researcher prefix",
			msg:   "Compare these for me:\n- SQLite WAL mode and readers\n- researcher: Go error wrapping\n* the echo router",
			types: demoAllTypes,
			want: []wantTask{
				{"SQLite WAL Mode And Readers", SubagentGeneral, []string{"SQLite WAL mode and readers", "Compare these for me:"}, ""},
				{"Go Error Wrapping", "researcher", []string{"Go error wrapping", "Compare these for me:"}, "researcher:"},
				{"The Echo Router", SubagentGeneral, []string{"the echo router"}, ""},
			},
			textHas: []string{"3 items"},
		},
		{
			name:  "numbered list with a short item and an indented continuation",
			msg:   "1. alpha beta gamma delta epsilon zeta\n   more about alpha\n2) delta",
			types: demoAllTypes,
			want: []wantTask{
				{"Alpha Beta Gamma Delta Epsilon", SubagentGeneral, []string{"alpha beta gamma delta epsilon zeta\nmore about alpha"}, "Context from"},
				{"Work On Delta", SubagentGeneral, []string{"delta"}, "more about alpha"},
			},
			textHas: []string{"2 items"},
		},
		{
			name:  "prefix that is not a subagent type stays in the prompt",
			msg:   "- note: keep the cache warm",
			types: demoAllTypes,
			want:  []wantTask{{"Note Keep The Cache Warm", SubagentGeneral, []string{"note: keep the cache warm"}, ""}},
		},
		{
			name:  "type prefix is case-insensitive and bash is a type too",
			msg:   "- Researcher: compare caches\n- BASH: count files",
			types: demoAllTypes,
			want: []wantTask{
				{"Work On Compare Caches", "researcher", []string{"compare caches"}, "Researcher:"},
				{"Work On Count Files", SubagentBash, []string{"count files"}, "BASH:"},
			},
		},
		{
			name:    "backticked command goes to a bash subagent",
			msg:     "Run `sleep 2 && echo Done` please",
			types:   demoAllTypes,
			want:    []wantTask{{"Run Shell Command", SubagentBash, []string{"`sleep 2 && echo Done`"}, ""}},
			textHas: []string{"`sleep 2 && echo Done`"},
		},
		{
			name:     "backticked command without a bash type is answered directly",
			msg:      "Run `ls`",
			types:    []string{SubagentGeneral, "researcher"},
			textHas:  []string{"`ls`", "not available", "offline demo model"},
			textNots: []string{"sleep 2"},
		},
		{
			name:    "plain text is answered directly with the delegation hints",
			msg:     "What is herd?",
			types:   demoAllTypes,
			textHas: []string{"What is herd?", "offline demo model", "`- `", "``Run `sleep 2 && echo Done` ``", "`researcher: …`", "general-purpose, bash, researcher"},
		},
		{
			name:    "a list inside a code fence is an example, not a request",
			msg:     "Explain this:\n```\n- a item\n- b item\n```",
			types:   demoAllTypes,
			textHas: []string{"Explain this:"},
		},
		{
			name:    "empty message",
			msg:     "",
			types:   demoAllTypes,
			textHas: []string{"empty"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDemo(ModelConfig{Name: "demo-fast", DisplayName: "Demo Fast"})
			resp, streamed := demoComplete(t, d, demoLeadRequest(t, tt.types, Message{Type: TypeSystem, Content: "You lead."}, demoHuman(tt.msg)))
			if streamed != resp.Text || resp.Text == "" {
				t.Errorf("streamed %q, text %q: want the same non-empty text", streamed, resp.Text)
			}
			for _, s := range tt.textHas {
				if !strings.Contains(resp.Text, s) {
					t.Errorf("text %q: want it to contain %q", resp.Text, s)
				}
			}
			for _, s := range tt.textNots {
				if strings.Contains(resp.Text, s) {
					t.Errorf("text %q: want it not to contain %q", resp.Text, s)
				}
			}
			if got, want := len(resp.ToolCalls), len(tt.want); got != want {
				t.Fatalf("got %d tool calls, want %d: %+v", got, want, resp.ToolCalls)
			}
			ids := map[string]bool{}
			for i, c := range resp.ToolCalls {
				if !strings.HasPrefix(c.ID, "call_") || len(c.ID) <= len("call_") || ids[c.ID] {
					t.Errorf("tool call id %q: want a unique call_ id", c.ID)
				}
				ids[c.ID] = true
				if strings.Contains(string(c.Args), `\u00`) {
					t.Errorf("call %d args %s: want characters such as & unescaped", i, c.Args)
				}
				a := demoDecodeTask(t, c)
				w := tt.want[i]
				if a.Description != w.description {
					t.Errorf("call %d description = %q, want %q", i, a.Description, w.description)
				}
				if n := len(strings.Fields(a.Description)); n < 3 || n > 5 {
					t.Errorf("call %d description %q has %d words, want 3–5", i, a.Description, n)
				}
				if a.SubagentType != w.subagentType {
					t.Errorf("call %d subagent_type = %q, want %q", i, a.SubagentType, w.subagentType)
				}
				for _, s := range w.promptHas {
					if !strings.Contains(a.Prompt, s) {
						t.Errorf("call %d prompt %q: want it to contain %q", i, a.Prompt, s)
					}
				}
				if w.promptLacks != "" && strings.Contains(a.Prompt, w.promptLacks) {
					t.Errorf("call %d prompt %q: want it not to contain %q", i, a.Prompt, w.promptLacks)
				}
			}
		})
	}
}

func TestDemoLeadAfterToolResults(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	call := func(id, desc, typ string) ToolCall {
		args, _ := json.Marshal(map[string]string{"description": desc, "prompt": "p", "subagent_type": typ})
		return ToolCall{ID: id, Name: ToolTask, Args: args}
	}
	toolMsg := func(id, name, content string) Message {
		return Message{Type: TypeTool, ToolCallID: id, Name: name, Content: content}
	}
	tests := []struct {
		name    string
		calls   []ToolCall
		results []Message
		textHas []string
	}{
		{
			name: "every outcome is cited with its description",
			calls: []ToolCall{
				call("call_a", "Alpha Task Here", SubagentGeneral), call("call_b", "Beta Task Here", "researcher"),
				call("call_c", "Gamma Task Here", SubagentBash), call("call_d", "Delta Task Here", SubagentGeneral),
				call("call_e", "Epsilon Task Here", SubagentGeneral), call("call_f", "Zeta Task Here", SubagentGeneral),
			},
			results: []Message{
				toolMsg("call_a", ToolTask, "Task Succeeded. Result: Finished: alpha.\n\n```\nDone\n```"),
				toolMsg("call_b", ToolTask, "Task failed. Error: the notes were missing"),
				toolMsg("call_c", ToolTask, "Task timed out. Error: Execution timed out after 5 seconds"),
				toolMsg("call_d", ToolTask, "Task cancelled by user."),
				toolMsg("call_e", ToolTask, "Task Succeeded (capped: turn budget). Result: partial notes"),
				toolMsg("call_f", ToolTask, "the backend wait gave up after 65 seconds"),
			},
			textHas: []string{
				"6 subagents",
				"**Alpha Task Here** (general-purpose) succeeded: Finished: alpha. Done",
				"**Beta Task Here** (researcher) failed: the notes were missing",
				"**Gamma Task Here** (bash) timed out: Execution timed out after 5 seconds",
				"**Delta Task Here** (general-purpose) was cancelled, with nothing to report.",
				"**Epsilon Task Here** (general-purpose) succeeded (capped: turn budget): partial notes",
				"**Zeta Task Here** (general-purpose) did not finish: the backend wait gave up after 65 seconds",
				"2 of 6 tasks succeeded.",
			},
		},
		{
			name:    "one success closes with everything done",
			calls:   []ToolCall{call("call_a", "Run Shell Command", SubagentBash)},
			results: []Message{toolMsg("call_a", ToolTask, "Task Succeeded. Result: I ran it.")},
			textHas: []string{"the subagent reported", "**Run Shell Command** (bash) succeeded: I ran it.", "Everything I delegated is done."},
		},
		{
			name:    "other tools' results are quoted",
			calls:   []ToolCall{{ID: "call_x", Name: tools.Ls, Args: json.RawMessage(`{"path":"."}`)}},
			results: []Message{toolMsg("call_x", tools.Ls, "notes/\nREADME.md 12")},
			textHas: []string{"**ls**", "```\nnotes/\nREADME.md 12\n```"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := append([]Message{demoHuman("- a\n- b"), {Type: TypeAI, Content: "Delegating.", ToolCalls: tt.calls}}, tt.results...)
			resp, _ := demoComplete(t, NewDemo(ModelConfig{Name: "demo-fast"}), demoLeadRequest(t, demoAllTypes, msgs...))
			if len(resp.ToolCalls) != 0 {
				t.Errorf("got %d tool calls, want none after tool results", len(resp.ToolCalls))
			}
			for _, s := range tt.textHas {
				if !strings.Contains(resp.Text, s) {
					t.Errorf("text %q: want it to contain %q", resp.Text, s)
				}
			}
		})
	}
}

// demoRunSubagent plays the executor: it calls d until a response has no tool
// calls, running each call with the real tools in a fresh workspace, and
// returns every response.
func demoRunSubagent(t *testing.T, d *Demo, prompt string, set *tools.Set) []Response {
	t.Helper()
	env := tools.Env{Workspace: t.TempDir()}
	msgs := []Message{{Type: TypeSystem, Content: "You are a subagent."}, demoHuman(prompt)}
	var resps []Response
	for range 50 {
		resp, _ := demoComplete(t, d, Request{Model: "demo-fast", Messages: msgs, Tools: set.Specs()})
		resps = append(resps, resp)
		msgs = append(msgs, Message{Type: TypeAI, Content: resp.Text, ToolCalls: resp.ToolCalls})
		if len(resp.ToolCalls) == 0 {
			return resps
		}
		for _, c := range resp.ToolCalls {
			tool, ok := set.Get(c.Name)
			if !ok {
				t.Fatalf("turn %d called %q, which was not offered", len(resps), c.Name)
			}
			out, err := tool.Run(t.Context(), env, c.Args)
			if err != nil {
				t.Errorf("turn %d: %s %s: %v", len(resps), c.Name, c.Args, err)
				out = "Error: " + err.Error()
			}
			msgs = append(msgs, Message{Type: TypeTool, ToolCallID: c.ID, Name: c.Name, Content: out})
		}
	}
	t.Fatal("the subagent never gave a final answer")
	return nil
}

func TestDemoSubagentTurns(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	bash, err := tools.NewBash(tools.SandboxConfig{Mode: tools.SandboxHost})
	if err != nil {
		t.Fatalf("NewBash: %v", err)
	}
	all := tools.NewSet(append(tools.Workspace(), bash)...)
	researcher := all.Filter(&[]string{tools.Ls, tools.ReadFile, tools.WriteFile}, nil)
	onlyLs := all.Filter(&[]string{tools.Ls}, nil)
	none := all.Filter(&[]string{}, nil)

	tests := []struct {
		name      string
		prompt    string
		tools     *tools.Set
		turns     int // 0: the default
		wantCalls []string
		answerHas []string
	}{
		{
			name:      "bash path runs the command and quotes its output",
			prompt:    "Run `echo demo-output && echo second` in the workspace with the bash tool and report its output.",
			tools:     all,
			turns:     9, // the bash path ignores it
			wantCalls: []string{tools.Bash},
			answerHas: []string{"`echo demo-output && echo second`", "```\n", "demo-output\nsecond"},
		},
		{
			name:      "general path takes the default four turns",
			prompt:    "Compare SQLite WAL mode and readers\n\nKeep your notes under notes/.",
			tools:     all,
			wantCalls: []string{tools.WriteFile, tools.Ls, tools.ReadFile},
			answerHas: []string{"Finished: Compare SQLite WAL mode and readers", "`notes/compare-sqlite-wal-mode-and-readers/plan.md`", "offline demo model"},
		},
		{
			name:   "general path honours a long turn count with distinct calls",
			prompt: "Summarise the logs",
			tools:  all,
			turns:  9,
			wantCalls: []string{tools.WriteFile, tools.Ls, tools.ReadFile, tools.WriteFile, tools.StrReplace, tools.ReadFile,
				tools.WriteFile, tools.StrReplace},
			answerHas: []string{"Tool calls: 8", "`notes/summarise-the-logs/part-2.md`"},
		},
		{
			name:      "researcher uses only its tools, even with a command in the prompt",
			prompt:    "Check `go.mod` for the module name",
			tools:     researcher,
			turns:     7,
			wantCalls: []string{tools.WriteFile, tools.Ls, tools.ReadFile, tools.WriteFile, tools.ReadFile, tools.WriteFile},
			answerHas: []string{"`notes/check-go-mod-for-the-module/part-1.md`"},
		},
		{
			name:      "one turn answers at once",
			prompt:    "Anything",
			tools:     all,
			turns:     1,
			answerHas: []string{"no tool calls"},
		},
		{
			name:      "without write_file the plan runs short",
			prompt:    "Look around",
			tools:     onlyLs,
			turns:     6,
			wantCalls: []string{tools.Ls},
			answerHas: []string{"I wrote no files."},
		},
		{
			name:      "without tools it answers at once",
			prompt:    "Look around",
			tools:     none,
			answerHas: []string{"no tool calls"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []DemoOption
			if tt.turns > 0 {
				opts = append(opts, WithDemoSubagentTurns(tt.turns))
			}
			resps := demoRunSubagent(t, NewDemo(ModelConfig{Name: "demo-fast"}, opts...), tt.prompt, tt.tools)

			if got, want := len(resps), len(tt.wantCalls)+1; got != want {
				t.Errorf("got %d LLM calls, want %d", got, want)
			}
			var got []string
			seen := map[string]bool{}
			for i, r := range resps[:len(resps)-1] {
				if len(r.ToolCalls) != 1 {
					t.Fatalf("turn %d has %d tool calls, want 1", i+1, len(r.ToolCalls))
				}
				c := r.ToolCalls[0]
				got = append(got, c.Name)
				if key := c.Name + string(c.Args); seen[key] {
					t.Errorf("turn %d repeats %s %s", i+1, c.Name, c.Args)
				} else {
					seen[key] = true
				}
				if strings.TrimSpace(r.Text) == "" {
					t.Errorf("turn %d has no step text", i+1)
				}
			}
			if !slices.Equal(got, tt.wantCalls) {
				t.Errorf("tool calls = %v, want %v", got, tt.wantCalls)
			}
			answer := resps[len(resps)-1].Text
			if strings.TrimSpace(answer) == "" {
				t.Fatal("final answer is empty")
			}
			for _, s := range tt.answerHas {
				if !strings.Contains(answer, s) {
					t.Errorf("answer %q: want it to contain %q", answer, s)
				}
			}
		})
	}
}

func TestDemoTokens(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
	}{
		{"empty", "", 0},
		{"words and punctuation", "hello, world!", 4},
		{"digits join words", "x1 y2", 2},
		{"hyphen splits", "a-b", 3},
		{"ideographs count one each", "日本語", 3},
		{"json", `{"a":"b"}`, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := demoTokens(tt.in); got != tt.want {
				t.Errorf("demoTokens(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestDemoUsage(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	on, off := true, false
	msgs := []Message{
		{Type: TypeSystem, Content: "a b"}, // 2
		demoHuman("hello, world!"),         // 4
		{Type: TypeAI, Content: "ok", ToolCalls: []ToolCall{{ID: "call_1", Name: tools.Ls, Args: json.RawMessage(`{"a":"b"}`)}}}, // 1 + 9
		{Type: TypeTool, ToolCallID: "call_1", Name: tools.Ls, Content: "x1 y2"},                                                 // 2
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
			d := NewDemo(ModelConfig{Name: "demo-fast", Usage: tt.usage})
			resp, _ := demoComplete(t, d, Request{Messages: msgs, Tools: []tools.Spec{{Name: tools.Ls}, {Name: tools.WriteFile}}})
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
			wantOutput := demoTokens(resp.Text)
			for _, c := range resp.ToolCalls {
				wantOutput += demoTokens(string(c.Args))
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

func TestDemoFailAfter(t *testing.T) {
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
			d := NewDemo(ModelConfig{Name: "demo-fast", FailAfter: tt.failAfter})
			req := demoLeadRequest(t, demoAllTypes, demoHuman("hi"))
			for i, wantFail := range tt.wantFail {
				_, err := d.Complete(t.Context(), req, nil)
				if !wantFail {
					if err != nil {
						t.Errorf("call %d: %v, want success", i+1, err)
					}
					continue
				}
				if !errors.Is(err, ErrProvider) || !strings.Contains(fmt.Sprint(err), "fail_after") {
					t.Errorf("call %d: error %v, want the configured demo failure wrapping ErrProvider", i+1, err)
				}
			}
		})
	}
}

func TestDemoContext(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	tests := []struct {
		name    string
		cfg     ModelConfig
		ctx     func(t *testing.T) (context.Context, context.CancelFunc)
		cancel  string // "timer": after 20 ms; "delta": on the first streamed chunk
		wantErr error
	}{
		{
			name:    "cancel during latency",
			cfg:     ModelConfig{Name: "demo-fast", LatencyMS: 10_000},
			ctx:     func(t *testing.T) (context.Context, context.CancelFunc) { return context.WithCancel(t.Context()) },
			cancel:  "timer",
			wantErr: context.Canceled,
		},
		{
			name: "deadline during latency",
			cfg:  ModelConfig{Name: "demo-fast", LatencyMS: 10_000},
			ctx: func(t *testing.T) (context.Context, context.CancelFunc) {
				return context.WithTimeout(t.Context(), 20*time.Millisecond)
			},
			wantErr: context.DeadlineExceeded,
		},
		{
			name:    "cancel while streaming",
			cfg:     ModelConfig{Name: "demo-fast", ChunkMS: 10_000},
			ctx:     func(t *testing.T) (context.Context, context.CancelFunc) { return context.WithCancel(t.Context()) },
			cancel:  "delta",
			wantErr: context.Canceled,
		},
		{
			name: "already cancelled with no latency",
			cfg:  ModelConfig{Name: "demo-fast"},
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
			_, err := NewDemo(tt.cfg).Complete(ctx, demoLeadRequest(t, demoAllTypes, demoHuman("hello there")), onDelta)
			if elapsed := time.Since(start); elapsed > 2*time.Second {
				t.Errorf("returned after %v, want promptly", elapsed)
			}
			if !errors.Is(err, tt.wantErr) || !errors.Is(err, ErrProvider) {
				t.Errorf("error %v, want one wrapping %v and ErrProvider", err, tt.wantErr)
			}
			if tt.cancel == "delta" && deltas != 1 {
				t.Errorf("got %d deltas, want 1 before the cancel took effect", deltas)
			}
		})
	}
}

func TestDemoTiming(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	t.Run("waits are latency first, then one per chunk gap", func(t *testing.T) {
		var waits []time.Duration
		fake := func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
		d := NewDemo(ModelConfig{Name: "demo-fast", LatencyMS: 7, ChunkMS: 3}, WithDemoSleep(fake))
		var deltas []string
		resp, err := d.Complete(t.Context(), demoLeadRequest(t, demoAllTypes, demoHuman("hello there")), func(s string) { deltas = append(deltas, s) })
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
		d := NewDemo(ModelConfig{Name: "demo-fast"}, WithDemoSleep(fake))
		demoComplete(t, d, demoLeadRequest(t, demoAllTypes, demoHuman("hello there")))
	})

	t.Run("real timers roughly honour latency and chunks", func(t *testing.T) {
		d := NewDemo(ModelConfig{Name: "demo-fast", LatencyMS: 30, ChunkMS: 2})
		var first time.Duration
		chunks := 0
		start := time.Now()
		_, err := d.Complete(t.Context(), demoLeadRequest(t, demoAllTypes, demoHuman("hello there")), func(string) {
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

func TestDemoDeterminism(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	requests := []struct {
		name string
		req  Request
	}{
		{"lead list", demoLeadRequest(t, demoAllTypes, demoHuman("Do these:\n- one thing\n- researcher: another thing"))},
		{"lead answer", demoLeadRequest(t, demoAllTypes, demoHuman("Tell me a story"))},
		{"subagent", Request{Messages: []Message{demoHuman("Write notes")}, Tools: tools.NewSet(tools.Workspace()...).Specs()}},
	}
	for _, tt := range requests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := demoComplete(t, NewDemo(ModelConfig{Name: "demo-fast"}), tt.req)
			d := NewDemo(ModelConfig{Name: "demo-fast"})
			demoComplete(t, d, tt.req) // a used instance answers the same
			b, _ := demoComplete(t, d, tt.req)
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

func TestDemoResponseIdentity(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	tests := []struct {
		name string
		cfg  ModelConfig
		want string
	}{
		{"model id when set", ModelConfig{Name: "demo-fast", Model: "demo-fast-v1"}, "demo-fast-v1"},
		{"name otherwise", ModelConfig{Name: "demo-deep"}, "demo-deep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, _ := demoComplete(t, NewDemo(tt.cfg), demoLeadRequest(t, demoAllTypes, demoHuman("hi")))
			if resp.Model != tt.want {
				t.Errorf("model = %q, want %q", resp.Model, tt.want)
			}
			if _, err := uuid.Parse(resp.CallID); err != nil {
				t.Errorf("call id %q: %v, want a UUID", resp.CallID, err)
			}
		})
	}
}

func TestDemoLatencyJitter(t *testing.T) {
	d := NewDemo(ModelConfig{Name: "m", LatencyMS: 1000, LatencyJitter: 0.5})
	seen := map[int]bool{}
	for i := range 200 {
		req := Request{Messages: []Message{{Type: TypeHuman, Content: fmt.Sprint("topic ", i)}}}
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
	if got := NewDemo(ModelConfig{LatencyMS: 300}).latency(Request{}); got != 300 {
		t.Errorf("no jitter: %d ms, want 300", got)
	}
}
