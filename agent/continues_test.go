package agent

import (
	"context"
	"maps"
	"slices"
	"testing"

	"herd/models"
)

// TestHeldCallsContinue: task calls the per-response limit refused and
// the lead calls again are linked to the first call of their item in the
// AI message that calls them (task_continues), the earliest held call of
// the same task first, across a second refusal; the cards are one per
// item (docs/DESIGN.md §9), and a resumed run finds the held calls again
// from the stored messages.
func TestHeldCallsContinue(t *testing.T) {
	cfg := defaultSubagents()
	cfg.MaxConcurrentPerResponse = 2
	h := newHarness(t, harnessConfig{subagents: cfg, models: []*Model{model("m", split(
		func(ctx context.Context, req Request) (Response, error) {
			switch usedTurns(req) {
			case 0:
				return reply("", nil, taskCall("a1", "a", SubagentGeneral), taskCall("a2", "b", SubagentGeneral), taskCall("a3", "c", SubagentGeneral), taskCall("a4", "d", SubagentGeneral)), nil
			case 1:
				// d continues a4; c continues a3 and is refused again.
				return reply("", nil, taskCall("b1", "x", SubagentGeneral), taskCall("b2", "d", SubagentGeneral), taskCall("b3", "c", SubagentGeneral)), nil
			case 2:
				return reply("", nil, taskCall("c1", "c", SubagentGeneral)), nil
			}
			return reply("done", nil), nil
		},
		func(ctx context.Context, req Request) (Response, error) { return reply("ok", nil), nil },
	))}})
	h.run("go")
	msgs, err := h.store.Messages(context.Background(), h.thread)
	if err != nil {
		t.Fatal(err)
	}
	var links []map[string]string
	for _, m := range msgs {
		if m.Type == TypeAI && len(m.ToolCalls) > 0 {
			links = append(links, continuesOf(m))
		}
	}
	want := []map[string]string{nil, {"b2": "a4", "b3": "a3"}, {"c1": "a3"}}
	if !slices.EqualFunc(links, want, maps.Equal) {
		t.Errorf("task_continues of the AI messages = %v, want %v", links, want)
	}

	cards := ProjectCards(CardSource{Messages: msgs})
	var got [][3]string
	for _, c := range cards {
		got = append(got, [3]string{c.Slot(), c.TaskID, c.Status})
	}
	wantCards := [][3]string{
		{"a1", "a1", StatusCompleted}, {"a2", "a2", StatusCompleted},
		{"a3", "c1", StatusCompleted}, {"a4", "b2", StatusCompleted},
		{"b1", "b1", StatusCompleted},
	}
	if !slices.Equal(got, wantCards) {
		t.Errorf("cards (slot, task, status) = %v, want %v", got, wantCards)
	}

	// Resumed before its third response, the run holds c again, with a3
	// as its first call.
	cut := slices.IndexFunc(msgs, func(m models.Message) bool {
		return m.Type == TypeAI && len(continuesOf(m)) > 0 && continuesOf(m)["c1"] != ""
	})
	held := heldIn(msgs[:cut], msgs[0].RunID)
	if l := held.link([]ToolCall{taskCall("z1", "c", SubagentGeneral), taskCall("z2", "c", SubagentGeneral)}); !maps.Equal(l, map[string]string{"z1": "a3"}) {
		t.Errorf("a resumed run links %v, want z1 to a3 only", l)
	}
}
