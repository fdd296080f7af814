package agent

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"herd/agent/event"
	"herd/models"
)

// streamed records what a run streamed, by kind.
type streamed struct {
	mu        sync.Mutex
	text      map[string]string // message id → text
	reasoning map[string]string // message id → reasoning
}

func (s *streamed) Publish(_, _ string, f event.Frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch f := f.(type) {
	case event.Delta:
		if f.Reset {
			s.text[f.MessageID] = ""
		}
		s.text[f.MessageID] += f.Text
	case event.Reasoning:
		s.reasoning[f.MessageID] += f.Text
	}
}

// TestReasoningShownNotMixedIn runs a lead that thinks, delegates to a
// subagent that thinks, and answers: the reasoning streams apart and is
// persisted on each AI message and step, and none of it reaches an
// answer's text, the task's result or a later run's history. Within the
// run, the lead's signed thinking goes back with its tool-use turn.
func TestReasoningShownNotMixedIn(t *testing.T) {
	pub := &streamed{text: map[string]string{}, reasoning: map[string]string{}}
	var history [][]Message
	var mu sync.Mutex
	llm := llmFunc(func(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
		if !isLead(req) {
			return Response{CallID: "sub", Text: "sub result", Reasoning: "sub ponders"}, nil
		}
		mu.Lock()
		history = append(history, req.Messages)
		mu.Unlock()
		if lastHuman(req) == "again" {
			onDelta("Again.")
			return Response{CallID: "lead3", Text: "Again."}, nil
		}
		if usedTurns(req) == 0 {
			req.OnReasoning("lead ")
			req.OnReasoning("plans")
			onDelta("Delegating.")
			return Response{CallID: "lead1", Text: "Delegating.", Reasoning: "lead plans",
				Thinking: []ThinkingBlock{{Thinking: "lead plans", Signature: "s1"}}, ToolCalls: []ToolCall{taskCall("t1", "look", "general-purpose")}}, nil
		}
		req.OnReasoning("lead concludes")
		onDelta("Final answer.")
		return Response{CallID: "lead2", Text: "Final answer.", Reasoning: "lead concludes"}, nil
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("m", llm)}, publisher: pub})
	h.run("hello")
	h.run("again")

	msgs, err := h.store.Messages(context.Background(), h.thread)
	if err != nil {
		t.Fatal(err)
	}
	var ais []models.Message
	for _, m := range msgs {
		switch m.Type {
		case TypeAI:
			ais = append(ais, m)
		case TypeTool:
			if strings.Contains(m.Content, "ponders") || !strings.Contains(m.Content, "sub result") {
				t.Errorf("task result %q: want the result without its reasoning", m.Content)
			}
		}
	}
	want := []struct{ content, reasoning string }{{"Delegating.", "lead plans"}, {"Final answer.", "lead concludes"}, {"Again.", ""}}
	if len(ais) != len(want) {
		t.Fatalf("%d AI messages, want %d", len(ais), len(want))
	}
	for i, w := range want {
		var kw map[string]any
		_ = json.Unmarshal(ais[i].AdditionalKwargs, &kw)
		got, _ := kw["reasoning_content"].(string)
		if ais[i].Content != w.content || got != w.reasoning {
			t.Errorf("AI message %d: content %q, reasoning %q; want %q, %q", i, ais[i].Content, got, w.content, w.reasoning)
		}
		if pub.text[ais[i].ID] != w.content || pub.reasoning[ais[i].ID] != w.reasoning {
			t.Errorf("AI message %d streamed text %q and reasoning %q", i, pub.text[ais[i].ID], pub.reasoning[ais[i].ID])
		}
	}

	var step TaskStep
	for _, e := range h.events("t1") {
		if e.EventType == eventSubagentStep {
			ev, err := PayloadOf(&e)
			if err != nil {
				t.Fatal(err)
			}
			step = ev.(TaskStep)
		}
	}
	if step.Text != "sub result" || step.Reasoning != "sub ponders" {
		t.Errorf("step text %q, reasoning %q", step.Text, step.Reasoning)
	}

	if len(history) != 3 {
		t.Fatalf("%d lead calls, want 3", len(history))
	}
	if ai := history[1][len(history[1])-2]; ai.Type != TypeAI || len(ai.Thinking) != 1 || ai.Thinking[0].Signature != "s1" {
		t.Errorf("the continuing turn lost its thinking: %+v", ai)
	}
	for _, m := range history[2] {
		if len(m.Thinking) > 0 || strings.Contains(m.Content, "plans") || strings.Contains(m.Content, "concludes") || strings.Contains(m.Content, "ponders") {
			t.Errorf("a later run's history carries reasoning: %+v", m)
		}
	}
}

// TestStoppedAnswerKeepsReasoning checks that a Stop while the model is
// still thinking keeps what was shown.
func TestStoppedAnswerKeepsReasoning(t *testing.T) {
	thinking := make(chan struct{})
	llm := llmFunc(func(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
		req.OnReasoning("half a thought")
		close(thinking)
		<-ctx.Done()
		return Response{}, ctx.Err()
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("m", llm)}})
	st := h.start("hello")
	<-thinking
	if err := h.rt.Cancel(h.thread, st.RunID); err != nil {
		t.Fatal(err)
	}
	h.wait()
	msgs, err := h.store.Messages(context.Background(), h.thread)
	if err != nil {
		t.Fatal(err)
	}
	last := msgs[len(msgs)-1]
	var kw map[string]any
	_ = json.Unmarshal(last.AdditionalKwargs, &kw)
	if last.Type != TypeAI || last.Content != "" || kw["reasoning_content"] != "half a thought" || kw["stopped"] != true {
		t.Errorf("stopped message %s %q %s", last.Type, last.Content, last.AdditionalKwargs)
	}
}
