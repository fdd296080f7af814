package agent

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"herd/agent/tools"
)

// offered is what a spy provider saw: the lead's tools, its system
// prompt and task enum, and each subagent's tools by type.
type offered struct {
	mu        sync.Mutex
	leadTools []string
	prompt    string
	enum      []string
	subTools  map[string][]string // by the subagent's first prompt line
}

func (o *offered) provider() Provider {
	o.subTools = map[string][]string{}
	return llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
		var names []string
		for _, s := range req.Tools {
			names = append(names, s.Name)
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if !isLead(req) {
			o.subTools[lastHuman(req)] = names
			return reply("done", nil), nil
		}
		if usedTurns(req) > 0 {
			return reply("summary", nil), nil
		}
		o.leadTools, o.prompt, o.enum = names, req.Messages[0].Content, taskEnum(req.Tools)
		return reply("delegating", nil,
			taskCall("g", "general", SubagentGeneral), taskCall("c", "custom", "ops"), taskCall("b", "shell", SubagentBash)), nil
	})
}

func taskEnum(specs []tools.Spec) []string {
	for _, s := range specs {
		if s.Name != ToolTask {
			continue
		}
		var schema struct {
			Properties map[string]struct {
				Enum []string `json:"enum"`
			} `json:"properties"`
		}
		_ = json.Unmarshal(s.Parameters, &schema)
		return schema.Properties["subagent_type"].Enum
	}
	return nil
}

// TestCommandsOffered: a run with commands offers bash to the lead, the
// bash type and bash in a custom agent's tools; a run without offers
// none of them, says why in the lead's prompt, and refuses a bash task
// the model names anyway (docs/DESIGN.md §4, the shell rule).
func TestCommandsOffered(t *testing.T) {
	bash, err := tools.NewBash(tools.SandboxConfig{Mode: tools.SandboxHost, AllowHostBash: true, BashTimeoutSeconds: 5, OutputLimitBytes: 2000})
	if err != nil {
		t.Fatal(err)
	}
	const reason = "this server runs commands on its host, so only admins may run them."
	cfg := defaultSubagents()
	cfg.Agents = map[string]AgentConfig{"ops": {Description: "ops", Tools: &[]string{tools.Bash, tools.Ls}}}
	for _, c := range []struct {
		name     string
		commands bool
	}{{"with commands", true}, {"without commands", false}} {
		t.Run(c.name, func(t *testing.T) {
			var o offered
			h := newHarness(t, harnessConfig{subagents: cfg, tools: append(tools.Workspace(), bash), noCommands: !c.commands, offReason: reason,
				models: []*Model{model("m", o.provider())}})
			h.run("go")
			has := func(list []string) bool { return slices.Contains(list, tools.Bash) }
			if has(o.leadTools) != c.commands {
				t.Errorf("lead tools %v; bash offered = %v, want %v", o.leadTools, has(o.leadTools), c.commands)
			}
			if has(o.enum) != c.commands {
				t.Errorf("task enum %v; bash type offered = %v, want %v", o.enum, has(o.enum), c.commands)
			}
			for prompt, names := range o.subTools {
				if has(names) != c.commands {
					t.Errorf("subagent %q had tools %v", prompt, names)
				}
			}
			if ops := o.subTools["do custom"]; !slices.Contains(ops, tools.Ls) {
				t.Errorf("the custom agent's tools %v lost more than bash", ops)
			}
			offNote := strings.Contains(o.prompt, CommandsOff+reason)
			if offNote == c.commands {
				t.Errorf("lead prompt %q: commands-off note present = %v", o.prompt, offNote)
			}
			b := h.toolMessages()["b"]
			refused := strings.Contains(b.Content, "Unknown subagent type 'bash'")
			if refused == c.commands {
				t.Errorf("a bash task without commands: %q", b.Content)
			}
		})
	}
}

// TestCommandsWithoutBash: where bash is not configured there is one
// toolbox, no note in the prompt and Commands reports false.
func TestCommandsWithoutBash(t *testing.T) {
	h := newHarness(t, harnessConfig{models: []*Model{model("m", split(leadThen(), nil))}})
	if h.rt.Commands() || h.rt.cat.Load().withCommands != h.rt.cat.Load().withoutCommands {
		t.Fatal("two toolboxes without the bash tool")
	}
	if strings.Contains(h.rt.cat.Load().withoutCommands.prompt, CommandsOff) {
		t.Error("the prompt says commands are off where none exist")
	}
}
