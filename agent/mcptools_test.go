package agent

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"herd/agent/mcp"
	"herd/agent/tools"
	"herd/models"
)

// fakeMCPTool stands in for an agent/mcp.Tool.
type fakeMCPTool struct{ server, name string }

func (f fakeMCPTool) Spec() tools.Spec {
	return tools.Spec{Name: mcp.ModelName(f.server, f.name), Description: f.name, Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (f fakeMCPTool) MCP() (string, string) { return f.server, f.name }
func (f fakeMCPTool) Run(context.Context, tools.Env, json.RawMessage) (string, error) {
	return "result of " + f.server + "/" + f.name, nil
}

// fakeSource offers files and search to everyone and secret to admins;
// add adds a tool to files, as tools/list_changed would.
type fakeSource struct {
	mu    sync.Mutex
	files []string
	gen   atomic.Uint64
}

func (s *fakeSource) Tools(_ context.Context, admin bool) []tools.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []tools.Tool
	for _, n := range s.files {
		out = append(out, fakeMCPTool{"files", n})
	}
	out = append(out, fakeMCPTool{"search", "web_search"}, fakeMCPTool{"search", "news"})
	if admin {
		out = append(out, fakeMCPTool{"secret", "vault"})
	}
	return out
}

func (s *fakeSource) Generation() uint64 { return s.gen.Load() }

func (s *fakeSource) add(name string) {
	s.mu.Lock()
	s.files = append(s.files, name)
	s.mu.Unlock()
	s.gen.Add(1)
}

func specNames(specs []tools.Spec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

// The lead and each subagent type see the MCP tools their lists name,
// and only those of servers the user may use; task stays the lead's.
func TestMCPToolsPerAgent(t *testing.T) {
	tests := []struct {
		name      string
		admin     bool
		lead      []string // the lead's tools besides task
		general   []string
		searcher  []string
		unlimited []string // a custom type without a tools list
	}{
		{
			name:      "user",
			lead:      []string{"ls", "mcp__files__read"},
			general:   []string{"ls", "mcp__files__read"},
			searcher:  []string{"mcp__search__web_search"},
			unlimited: []string{"ls", "mcp__files__read"},
		},
		{
			name:      "admin",
			admin:     true,
			lead:      []string{"ls", "mcp__files__read", "mcp__secret__vault"},
			general:   []string{"ls", "mcp__files__read", "mcp__secret__vault"},
			searcher:  []string{"mcp__search__web_search", "mcp__secret__vault"},
			unlimited: []string{"ls", "mcp__files__read", "mcp__secret__vault"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &fakeSource{files: []string{"read"}}
			set := tools.NewSet(tools.Workspace()...)
			with, _, err := newToolboxes(setTools(set), src.Tools(context.Background(), tt.admin), SubagentsConfig{Agents: map[string]AgentConfig{
				"searcher":  {Description: "d", Tools: &[]string{"mcp:search/web_search", "mcp:secret/*", "task"}},
				"unlimited": {Description: "d", DisallowedTools: &[]string{"read_file", "write_file", "str_replace"}},
			}}, nil, LeadConfig{Tools: &[]string{"ls", "mcp:files/*", "mcp:secret/vault", "task"}}, "")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := specNames(with.specs), append(slices.Clone(tt.lead), "task"); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
				t.Errorf("lead's tools = %v, want %v", got, slices.Sorted(slices.Values(want)))
			}
			for name, want := range map[string][]string{SubagentGeneral: tt.general, "searcher": tt.searcher, "unlimited": tt.unlimited} {
				if got := specNames(with.agents.byName[name].tools.Specs()); !slices.Equal(got, want) {
					t.Errorf("%s's tools = %v, want %v", name, got, want)
				}
			}
		})
	}
}

// A run's next model call sees the MCP tools as they are after a change
// (tools/list_changed): the lead calls a tool, the list grows meanwhile,
// and the lead's second call is offered the new tool.
func TestMCPToolsRefreshForTheNextCall(t *testing.T) {
	src := &fakeSource{files: []string{"read"}}
	var mu sync.Mutex
	var seen [][]string
	lead := llmFunc(func(_ context.Context, req Request, _ func(string)) (Response, error) {
		mu.Lock()
		seen = append(seen, specNames(req.Tools))
		n := len(seen)
		mu.Unlock()
		if n == 1 {
			src.add("write")
			return reply("", nil, ToolCall{ID: "c1", Name: "mcp__files__read", Args: json.RawMessage(`{}`)}), nil
		}
		return reply("done", nil), nil
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("m", lead)}, mcp: src, leadTools: &[]string{"mcp:files/*"}})
	h.run("go")
	want := [][]string{
		{"mcp__files__read", "task"},
		{"mcp__files__read", "mcp__files__write", "task"},
	}
	if !slices.EqualFunc(seen, want, slices.Equal) {
		t.Errorf("the lead's tools per call = %v, want %v", seen, want)
	}
	msgs, err := h.store.Messages(context.Background(), h.thread)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(msgs, func(m models.Message) bool { return m.Type == TypeTool && m.Content == "result of files/read" }) {
		t.Errorf("the tool's result is not in the thread: %+v", msgs)
	}
}

// A subagent's next model call sees its type's MCP tools as they are
// after a change mid-run (tools/list_changed), as the lead's does.
func TestSubagentToolsRefreshMidRun(t *testing.T) {
	src := &fakeSource{files: []string{"read"}}
	var mu sync.Mutex
	var seen [][]string
	llm := llmFunc(func(_ context.Context, req Request, _ func(string)) (Response, error) {
		names := specNames(req.Tools)
		if slices.Contains(names, ToolTask) {
			if len(req.Messages) > 0 && req.Messages[len(req.Messages)-1].Type == TypeTool {
				return reply("done", nil), nil
			}
			return reply("", nil, taskCall("t1", "file things", "filer")), nil
		}
		mu.Lock()
		seen = append(seen, names)
		n := len(seen)
		mu.Unlock()
		if n == 1 {
			src.add("write")
			return reply("", nil, ToolCall{ID: "c1", Name: "mcp__files__read", Args: json.RawMessage(`{}`)}), nil
		}
		return reply("filed", nil), nil
	})
	sub := defaultSubagents()
	sub.Agents = map[string]AgentConfig{"filer": {Description: "Files.", Tools: &[]string{"mcp:files/*"}}}
	h := newHarness(t, harnessConfig{models: []*Model{model("m", llm)}, mcp: src, subagents: sub})
	h.run("go")
	want := [][]string{{"mcp__files__read"}, {"mcp__files__read", "mcp__files__write"}}
	if !slices.EqualFunc(seen, want, slices.Equal) {
		t.Errorf("the subagent's tools per call = %v, want %v", seen, want)
	}
}
