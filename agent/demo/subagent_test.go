package demo

import (
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"herd/agent"
	"herd/agent/tools"
)

// runSubagent plays the executor: it calls d until a response has no tool
// calls, running each call with the real tools in a fresh workspace, and
// returns every response.
func runSubagent(t *testing.T, d *Provider, prompt string, set *tools.Set) []agent.Response {
	t.Helper()
	return runSubagentIn(t, t.TempDir(), d, prompt, set)
}

// runSubagentIn is runSubagent in the workspace ws.
func runSubagentIn(t *testing.T, ws string, d *Provider, prompt string, set *tools.Set) []agent.Response {
	t.Helper()
	env := tools.Env{Workspace: ws}
	msgs := []agent.Message{{Type: agent.TypeSystem, Content: "You are a subagent."}, human(prompt)}
	var resps []agent.Response
	for range 50 {
		resp, _ := complete(t, d, agent.Request{Model: "demo-fast", Messages: msgs, Tools: set.Specs()})
		resps = append(resps, resp)
		msgs = append(msgs, agent.Message{Type: agent.TypeAI, Content: resp.Text, ToolCalls: resp.ToolCalls})
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
			msgs = append(msgs, agent.Message{Type: agent.TypeTool, ToolCallID: c.ID, Name: c.Name, Content: out})
		}
	}
	t.Fatal("the subagent never gave a final answer")
	return nil
}

func TestSubagentTurns(t *testing.T) {
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
			var opts []Option
			if tt.turns > 0 {
				opts = append(opts, WithSubagentTurns(tt.turns))
			}
			resps := runSubagent(t, New(agent.ModelConfig{Name: "demo-fast"}, opts...), tt.prompt, tt.tools)

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
