package agent

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
)

// TestSetModelsKeepsRunsInFlight: a run started before an admin changes
// the models finishes on the ones it started with, its lead and the
// model its task's type names alike; the next run uses the new ones
// (docs/DESIGN.md §12).
func TestSetModelsKeepsRunsInFlight(t *testing.T) {
	var mu sync.Mutex
	var called []string
	calls := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		called = append(called, name)
	}
	leadAsked, swapped := make(chan struct{}), make(chan struct{})
	oldLead := llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
		calls("old-lead")
		if usedTurns(req) == 0 {
			close(leadAsked)
			<-swapped
			return reply("", nil, taskCall("t1", "look", "researcher")), nil
		}
		return reply("done", nil), nil
	})
	answer := func(name string) Provider {
		return llmFunc(func(context.Context, Request, func(string)) (Response, error) {
			calls(name)
			return reply(name+" answer", nil), nil
		})
	}
	sub := defaultSubagents()
	sub.Agents = map[string]AgentConfig{"researcher": {Description: "r", Model: "helper"}}
	h := newHarness(t, harnessConfig{subagents: sub, models: []*Model{model("main", oldLead), model("helper", answer("old-helper"))}})

	h.start("first")
	<-leadAsked
	if err := h.rt.SetModels([]*Model{model("main", answer("new-lead")), model("helper", answer("new-helper"))}); err != nil {
		t.Fatal(err)
	}
	close(swapped)
	h.wait()
	mu.Lock()
	got := append([]string(nil), called...)
	called = nil
	mu.Unlock()
	want := []string{"old-lead", "old-helper", "old-lead"}
	if !slices.Equal(got, want) {
		t.Fatalf("the run in flight called %v, want %v: it must keep its catalog", got, want)
	}
	h.run("second")
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(called, []string{"new-lead"}) {
		t.Fatalf("the next run called %v, want [new-lead]", called)
	}
}

// TestSetModelsRefusesDanglingType: a list that a subagent type's model
// is missing from is refused whole, and the models stay as they were.
func TestSetModelsRefusesDanglingType(t *testing.T) {
	sub := defaultSubagents()
	sub.Agents = map[string]AgentConfig{"researcher": {Description: "r", Model: "helper"}}
	p := llmFunc(func(context.Context, Request, func(string)) (Response, error) { return reply("x", nil), nil })
	h := newHarness(t, harnessConfig{subagents: sub, models: []*Model{model("main", p), model("helper", p)}})
	if err := h.rt.SetModels([]*Model{model("main", p)}); err == nil {
		t.Fatal("SetModels took a list without the model a subagent type names")
	}
	if err := h.rt.SetModels(nil); err == nil {
		t.Fatal("SetModels took no models")
	}
	if got := len(h.rt.Models()); got != 2 {
		t.Fatalf("after refusals %d models, want the 2 of before", got)
	}
	if _, err := h.rt.model("helper"); errors.Is(err, ErrUnknownModel) {
		t.Fatal("a refused change removed a model")
	}
}

// TestSetCatalogTypes: a subagent type added is offered to the runs that
// start after, never to the toolbox a run already holds; one naming a
// model missing from the list is refused.
func TestSetCatalogTypes(t *testing.T) {
	p := llmFunc(func(context.Context, Request, func(string)) (Response, error) { return reply("x", nil), nil })
	h := newHarness(t, harnessConfig{models: []*Model{model("main", p)}})
	held := h.rt.cat.Load().withCommands
	models := h.rt.cat.Load().order
	if err := h.rt.SetCatalog(models, map[string]AgentConfig{"writer": {Description: "writes", Model: "nope"}}); err == nil {
		t.Fatal("SetCatalog took a type naming a model that is not there")
	}
	if err := h.rt.SetCatalog(models, map[string]AgentConfig{"writer": {Description: "writes"}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.rt.cat.Load().withCommands.agents.byName["writer"]; !ok {
		t.Fatal("the new type is not offered to new runs")
	}
	if _, ok := held.agents.byName["writer"]; ok {
		t.Fatal("the new type reached a toolbox a run already held")
	}
	if err := h.rt.SetModels(models); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.rt.cat.Load().withCommands.agents.byName["writer"]; !ok {
		t.Fatal("SetModels dropped the types")
	}
}
