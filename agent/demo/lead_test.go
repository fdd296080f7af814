package demo

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"herd/agent"
	"herd/agent/tools"
)

// offPrompt is a lead prompt of a run without commands, as the runtime
// writes it.
var offPrompt = "You lead.\n\n" + agent.CommandsOff + "only admins may run commands on this host.\nYou cannot run shell commands."

func TestLeadFirstResponse(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	type wantTask struct {
		description, subagentType string
		promptHas                 []string
		promptLacks               string
	}
	tests := []struct {
		name     string
		msg      string
		system   string // the lead's system prompt; "" is "You lead."
		types    []string
		want     []wantTask
		textHas  []string
		textNots []string
	}{
		{
			name:  "three item list with a researcher prefix",
			msg:   "Compare these for me:\n- SQLite WAL mode and readers\n- researcher: Go error wrapping\n* the echo router",
			types: allTypes,
			want: []wantTask{
				{"SQLite WAL mode and readers", agent.SubagentGeneral, []string{"SQLite WAL mode and readers", "Compare these for me:"}, ""},
				{"Go error wrapping", "researcher", []string{"Go error wrapping", "Compare these for me:"}, "researcher:"},
				{"the echo router", agent.SubagentGeneral, []string{"the echo router"}, ""},
			},
			textHas: []string{"3 items"},
		},
		{
			name:  "numbered list with a short item and an indented continuation",
			msg:   "1. alpha beta gamma delta epsilon zeta\n   more about alpha\n2) delta",
			types: allTypes,
			want: []wantTask{
				{"alpha beta gamma delta epsilon zeta", agent.SubagentGeneral, []string{"alpha beta gamma delta epsilon zeta\nmore about alpha"}, "Context from"},
				{"delta", agent.SubagentGeneral, []string{"delta"}, "more about alpha"},
			},
			textHas: []string{"2 items"},
		},
		{
			name:  "prefix that is not a subagent type stays in the prompt",
			msg:   "- note: keep the cache warm",
			types: allTypes,
			want:  []wantTask{{"note: keep the cache warm", agent.SubagentGeneral, []string{"note: keep the cache warm"}, ""}},
		},
		{
			name:  "type prefix is case-insensitive and bash is a type too",
			msg:   "- Researcher: compare caches\n- BASH: count files",
			types: allTypes,
			want: []wantTask{
				{"compare caches", "researcher", []string{"compare caches"}, "Researcher:"},
				{"count files", agent.SubagentBash, []string{"count files"}, "BASH:"},
			},
		},
		{
			name:    "backticked command goes to a bash subagent",
			msg:     "Run `sleep 2 && echo Done` please",
			types:   allTypes,
			want:    []wantTask{{"Run Shell Command", agent.SubagentBash, []string{"`sleep 2 && echo Done`"}, ""}},
			textHas: []string{"`sleep 2 && echo Done`"},
		},
		{
			name:     "backticked command without a bash type is answered directly",
			msg:      "Run `ls`",
			types:    []string{agent.SubagentGeneral, "researcher"},
			textHas:  []string{"I can't run `ls`. This server has no bash subagent", "offline demo model"},
			textNots: []string{"sleep 2"},
		},
		{
			name:     "backticked command with commands turned off says why first",
			msg:      "Run `tr '\\0' '\\n' < /proc/$PPID/environ`",
			system:   offPrompt,
			types:    []string{agent.SubagentGeneral},
			textHas:  []string{"I can't run `tr", "Commands are turned off for your account: only admins may run commands on this host."},
			textNots: []string{"Put a command in backticks"},
		},
		{
			name:    "a bash: item with commands turned off is answered, not delegated",
			msg:     "- bash: cat /proc/self/environ",
			system:  offPrompt,
			types:   []string{agent.SubagentGeneral, "researcher"},
			textHas: []string{"I can't run that command. Commands are turned off for your account: only admins may run commands on this host."},
		},
		{
			name:    "the other items of a list still run when a bash: item cannot",
			msg:     "Please:\n- bash: ls -la\n- summarise the notes\n- BASH: make test",
			system:  offPrompt,
			types:   []string{agent.SubagentGeneral},
			want:    []wantTask{{"summarise the notes", agent.SubagentGeneral, []string{"summarise the notes"}, "bash:"}},
			textHas: []string{"I'll hand this item to a subagent.", "I can't run the 2 `bash:` items. Commands are turned off for your account"},
		},
		{
			name:  "plain text is answered directly with the delegation hints",
			msg:   "What is herd?",
			types: allTypes,
			textHas: []string{"What is herd?", "offline demo model", "### How to delegate\n\n- **Send a list**", "`- `", "``Run `sleep 2 && echo Done` ``", "`researcher: …`", "general-purpose, bash, researcher",
				"- **Write anything else**", "```markdown\nThree jobs for the demo:\n- Compare SQLite and PostgreSQL\n- Write a haiku about servers\n- bash: run `uname -sr`\n```"},
		},
		{
			name:    "a list inside a code fence is an example, not a request",
			msg:     "Explain this:\n```\n- a item\n- b item\n```",
			types:   allTypes,
			textHas: []string{"Explain this:"},
		},
		{
			name:    "empty message",
			msg:     "",
			types:   allTypes,
			textHas: []string{"empty"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New(agent.ModelConfig{Name: "demo-fast", DisplayName: "Provider Fast"})
			system := tt.system
			if system == "" {
				system = "You lead."
			}
			resp, streamed := complete(t, d, leadRequest(t, tt.types, agent.Message{Type: agent.TypeSystem, Content: system}, human(tt.msg)))
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
				a := decodeTask(t, c)
				w := tt.want[i]
				if a.Description != w.description {
					t.Errorf("call %d description = %q, want %q", i, a.Description, w.description)
				}
				if n := len(strings.Fields(a.Description)); n < 1 || n > 6 {
					t.Errorf("call %d description %q has %d words, want 1–6", i, a.Description, n)
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

func TestLeadAfterToolResults(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	call := func(id, desc, typ string) agent.ToolCall {
		args, _ := json.Marshal(map[string]string{"description": desc, "prompt": "p", "subagent_type": typ})
		return agent.ToolCall{ID: id, Name: agent.ToolTask, Args: args}
	}
	toolMsg := func(id, name, content string) agent.Message {
		return agent.Message{Type: agent.TypeTool, ToolCallID: id, Name: name, Content: content}
	}
	tests := []struct {
		name    string
		calls   []agent.ToolCall
		results []agent.Message
		textHas []string
	}{
		{
			name: "every outcome is cited with its description",
			calls: []agent.ToolCall{
				call("call_a", "Alpha Task Here", agent.SubagentGeneral), call("call_b", "Beta Task Here", "researcher"),
				call("call_c", "Gamma Task Here", agent.SubagentBash), call("call_d", "Delta Task Here", agent.SubagentGeneral),
				call("call_e", "Epsilon Task Here", agent.SubagentGeneral), call("call_f", "Zeta Task Here", agent.SubagentGeneral),
			},
			results: []agent.Message{
				toolMsg("call_a", agent.ToolTask, "Task Succeeded. Result: Finished: alpha.\n\n```\nDone\n```"),
				toolMsg("call_b", agent.ToolTask, "Task failed. Error: the notes were missing"),
				toolMsg("call_c", agent.ToolTask, "Task timed out. Error: Execution timed out after 5 seconds"),
				toolMsg("call_d", agent.ToolTask, "Task cancelled by user."),
				toolMsg("call_e", agent.ToolTask, "Task Succeeded (capped: turn budget). Result: partial notes"),
				toolMsg("call_f", agent.ToolTask, "the backend wait gave up after 65 seconds"),
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
			calls:   []agent.ToolCall{call("call_a", "Run Shell Command", agent.SubagentBash)},
			results: []agent.Message{toolMsg("call_a", agent.ToolTask, "Task Succeeded. Result: I ran it.")},
			textHas: []string{"the subagent reported", "**Run Shell Command** (bash) succeeded: I ran it.", "Everything I delegated is done."},
		},
		{
			name:    "a file a subagent wrote is named whole, however long its answer",
			calls:   []agent.ToolCall{call("call_a", "Read uploads/long.txt", agent.SubagentGeneral)},
			results: []agent.Message{toolMsg("call_a", agent.ToolTask, "Task Succeeded. Result: "+strings.Repeat("word ", 60)+"ends. Wrote `summaries/long.md`.")},
			textHas: []string{"word word…", " Wrote `summaries/long.md`.\n"},
		},
		{
			name:    "other tools' results are quoted",
			calls:   []agent.ToolCall{{ID: "call_x", Name: tools.Ls, Args: json.RawMessage(`{"path":"."}`)}},
			results: []agent.Message{toolMsg("call_x", tools.Ls, "notes/\nREADME.md 12")},
			textHas: []string{"**ls**", "```\nnotes/\nREADME.md 12\n```"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := append([]agent.Message{human("- a\n- b"), {Type: agent.TypeAI, Content: "Delegating.", ToolCalls: tt.calls}}, tt.results...)
			resp, _ := complete(t, New(agent.ModelConfig{Name: "demo-fast"}), leadRequest(t, allTypes, msgs...))
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

// TestLeadReasons checks that the demo lead's first turn reasons in a
// sentence, streamed apart from its text, and its turn after tools does not.
func TestLeadReasons(t *testing.T) {
	tests := []struct {
		name, message, want string
	}{
		{"direct answer", "hello there", "nothing to delegate"},
		{"one command", "Run `echo hi`", "One piece of work"},
		{"a list", "Research:\n- cats\n- dogs\n- owls", "3 items: one subagent each"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := leadRequest(t, allTypes, human(tt.message))
			var streamed, text strings.Builder
			req.OnReasoning = func(s string) { streamed.WriteString(s) }
			resp, err := New(agent.ModelConfig{Name: "demo-fast", Provider: "demo"}).Complete(context.Background(), req, func(s string) { text.WriteString(s) })
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(resp.Reasoning, tt.want) || streamed.String() != resp.Reasoning {
				t.Errorf("reasoning %q, streamed %q; want it to contain %q", resp.Reasoning, streamed.String(), tt.want)
			}
			if strings.Contains(resp.Text, resp.Reasoning) || text.String() != resp.Text {
				t.Errorf("text %q (streamed %q) mixes in the reasoning", resp.Text, text.String())
			}
		})
	}
	after := leadRequest(t, allTypes, human("Run `echo hi`"),
		agent.Message{Type: agent.TypeAI, ToolCalls: []agent.ToolCall{{ID: "c1", Name: agent.ToolTask, Args: json.RawMessage(`{}`)}}},
		agent.Message{Type: agent.TypeTool, ToolCallID: "c1", Name: agent.ToolTask, Content: "Task Succeeded. Result: hi"})
	resp, err := New(agent.ModelConfig{Name: "demo-fast", Provider: "demo"}).Complete(context.Background(), after, nil)
	if err != nil || resp.Reasoning != "" {
		t.Errorf("after tools: reasoning %q, err %v; want none", resp.Reasoning, err)
	}
}

// TestLeadExampleWorks: the message the direct answer offers to try, in
// its fenced block, does what the answer says: three subagents, the last
// a bash one when bash is offered.
func TestLeadExampleWorks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		types []string
		last  string
	}{
		{"with bash", allTypes, agent.SubagentBash},
		{"without bash", []string{agent.SubagentGeneral}, agent.SubagentGeneral},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := New(agent.ModelConfig{Name: "demo-fast"})
			answer, _ := complete(t, d, leadRequest(t, tc.types, human("hello")))
			_, rest, ok := strings.Cut(answer.Text, "```markdown\n")
			example, _, closed := strings.Cut(rest, "```")
			if !ok || !closed {
				t.Fatalf("no fenced example in %q", answer.Text)
			}
			resp, _ := complete(t, d, leadRequest(t, tc.types, human(example)))
			if len(resp.ToolCalls) != 3 {
				t.Fatalf("the example %q makes %d calls, want 3", example, len(resp.ToolCalls))
			}
			if got := decodeTask(t, resp.ToolCalls[2]).SubagentType; got != tc.last {
				t.Errorf("the last item goes to %q, want %q", got, tc.last)
			}
		})
	}
}

// TestLeadContinuesACutAnswer: after the text so far and ContinueNote,
// the demo lead writes the rest of the answer it would have written, and
// nothing of the text so far.
func TestLeadContinuesACutAnswer(t *testing.T) {
	msgs := []agent.Message{{Type: agent.TypeSystem, Content: "You lead."}, {Type: agent.TypeHuman, Content: "hello there"}}
	whole := lead(msgs, allTypes, nil, "Demo")
	if len(whole.text) < 10 {
		t.Fatalf("the demo's answer %q is too short to cut", whole.text)
	}
	so := whole.text[:len(whole.text)/2]
	cut := append(msgs, agent.Message{Type: agent.TypeAI, Content: so}, agent.Message{Type: agent.TypeHuman, Content: agent.ContinueNote})
	rest := lead(cut, allTypes, nil, "Demo")
	if so+rest.text != whole.text || rest.reasoning != "" {
		t.Fatalf("continued with %q (reasoning %q); want %q", rest.text, rest.reasoning, whole.text[len(so):])
	}
}
