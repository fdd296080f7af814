package agent

import (
	"encoding/json"
	"slices"
	"strings"

	"herd/models"
)

// kwargTaskContinues is the additional_kwargs key of an AI message whose
// task calls continue calls the per-response limit refused: a map of each
// such call's id to the first call of its item (docs/API.md). The runtime
// writes it, so the cards (ProjectCards, static/merge.js) follow one
// link rather than guess (docs/DESIGN.md §9).
const kwargTaskContinues = "task_continues"

// heldCalls are a run's task calls the per-response limit refused and no
// later call continues yet, oldest first: the lead was told to call them
// again (TaskCallAgain). Only the run's loop touches them.
type heldCalls struct {
	waiting []heldCall
	// first maps a call that continues a held one to its item's first
	// call, so an item refused twice keeps one card.
	first map[string]string
}

type heldCall struct {
	key   string // the task as the card shows it: heldKey
	first string // the id of the item's first call
}

// heldKey is what makes a later call the same item: the description,
// the prompt with its acceptance criteria and the subagent type, as a
// card shows them.
func heldKey(args json.RawMessage) string {
	var a taskArgs
	if json.Unmarshal(args, &a) != nil {
		return ""
	}
	return strings.TrimSpace(a.Description) + "\x00" + a.fullPrompt() + "\x00" + strings.TrimSpace(a.SubagentType)
}

// link matches the task calls of a new response to the held ones: each
// continues the earliest held call of the same task, once. It returns
// the links the response's AI message records (kwargTaskContinues); nil
// for none.
func (h *heldCalls) link(calls []ToolCall) map[string]string {
	var links map[string]string
	for _, c := range calls {
		if c.Name != ToolTask || len(h.waiting) == 0 {
			continue
		}
		key := heldKey(c.Args)
		i := slices.IndexFunc(h.waiting, func(w heldCall) bool { return w.key == key })
		if key == "" || i < 0 {
			continue
		}
		if links == nil {
			links = map[string]string{}
		}
		h.follow(c.ID, h.waiting[i].first)
		links[c.ID] = h.waiting[i].first
		h.waiting = slices.Delete(h.waiting, i, i+1)
	}
	return links
}

func (h *heldCalls) follow(callID, first string) {
	if h.first == nil {
		h.first = map[string]string{}
	}
	h.first[callID] = first
}

// hold keeps a call the per-response limit refused, to be continued.
func (h *heldCalls) hold(c ToolCall) {
	first := h.first[c.ID]
	if first == "" {
		first = c.ID
	}
	h.waiting = append(h.waiting, heldCall{key: heldKey(c.Args), first: first})
}

// heldIn rebuilds a resumed run's held calls from its stored messages,
// as its loop left them: the links its AI messages record, the
// per-response refusals its ToolMessages carry.
func heldIn(msgs []models.Message, runID string) heldCalls {
	var h heldCalls
	calls := map[string]ToolCall{}
	for _, m := range msgs {
		if m.RunID != runID {
			continue
		}
		switch {
		case m.Type == TypeAI:
			var cs []ToolCall
			if len(m.ToolCalls) > 0 {
				_ = json.Unmarshal(m.ToolCalls, &cs)
			}
			for _, c := range cs {
				calls[c.ID] = c
			}
			for callID, first := range continuesOf(m) {
				h.follow(callID, first)
				h.waiting = slices.DeleteFunc(h.waiting, func(w heldCall) bool { return w.first == first })
			}
		case m.Type == TypeTool && m.Name == ToolTask:
			if r := refusalOf(m); r != nil && r.Reason == RefusedPerResponse {
				if c, ok := calls[m.ToolCallID]; ok {
					h.hold(c)
				}
			}
		}
	}
	return h
}

// continuesOf reads an AI message's links (kwargTaskContinues); nil for
// none or a malformed value.
func continuesOf(m models.Message) map[string]string {
	if m.Type != TypeAI || len(m.AdditionalKwargs) == 0 {
		return nil
	}
	var kw struct {
		Continues map[string]string `json:"task_continues"`
	}
	if json.Unmarshal(m.AdditionalKwargs, &kw) != nil {
		return nil
	}
	return kw.Continues
}

// refusalOf is the refusal a task ToolMessage's metadata carries, nil for
// none.
func refusalOf(m models.Message) *Refusal {
	kw, err := DecodeContent(m.AdditionalKwargs)
	if err != nil {
		return nil
	}
	md, ok := readMetadata(kw)
	if !ok {
		return nil
	}
	return md.Refusal
}
