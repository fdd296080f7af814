package server

import (
	"context"
	"sort"

	"herd/agent"
	"herd/models"
	"herd/server/hub"
	"herd/views"
)

// cardJSON is a card on the wire (docs/API.md "task"). Under the token gate
// usage is left out, not zeroed.
type cardJSON struct {
	agent.Card
	DisplayModel string            `json:"display_model"`
	Usage        *agent.TokenUsage `json:"usage,omitempty"`
}

// modelLabel maps a model name to its display name; an unknown model shows
// its raw name.
func (s *Server) modelLabel(name string) string {
	if l, ok := s.labelOf(name); ok {
		return l
	}
	return name
}

// labelOf is the display name of the model called name, among those runs
// may use now (the console changes them).
func (s *Server) labelOf(name string) (string, bool) {
	for _, m := range s.rt.Models() {
		if m.Name == name {
			return m.Label(), true
		}
	}
	return "", false
}

// loadCards rebuilds the cards of the view's page in a constant number
// of queries.
func (s *Server) loadCards(ctx context.Context, v *threadView) error {
	active := ""
	if v.active != nil {
		active = v.active.ID
	}
	// A page's task events lie between its first message and the next
	// newer page (MessagesBefore keeps each call on the page of its
	// results).
	from := int64(0)
	if len(v.messages) > 0 && v.next != 0 {
		from = v.messages[0].Seq
	}
	events, err := s.store.CardEventsBetween(ctx, v.thread.ID, active, from, v.before)
	if err != nil {
		return err
	}
	v.cards = agent.ProjectCards(agent.CardSource{Messages: v.messages, Events: events, ActiveRunID: active})
	v.leadWaiting = active != "" && agent.LeadWaiting(events, active)
	return nil
}

// viewTotals is a ledger sum as the views show it.
func viewTotals(t models.UsageTotals) views.UsageTotals {
	return views.UsageTotals{Input: t.InputTokens, Output: t.OutputTokens, Total: t.TotalTokens, Calls: t.Calls, Unreported: t.UnreportedCalls, Lost: t.LostCalls}
}

func (s *Server) cardJSON(c agent.Card, r hub.Redaction) cardJSON {
	return cardJSON{Card: c, DisplayModel: s.modelLabel(c.ModelName), Usage: r.Card(c)}
}

func (s *Server) cardView(threadID string, c agent.Card, r hub.Redaction) *views.CardView {
	v := &views.CardView{
		ThreadID: threadID, TaskID: c.TaskID, RunID: c.RunID, ExecutionID: c.ExecutionID,
		Description: c.Description, Prompt: c.Prompt, SubagentType: c.SubagentType,
		Status: c.Status, Activity: c.Activity, Waiting: c.Waiting,
		ModelName: c.ModelName, ModelLabel: s.modelLabel(c.ModelName),
		ShowTokens: r.Shows(), StopReason: c.StopReason, Error: c.Error,
		Version: c.Version, LastSeq: c.LastSeq, Steps: c.Steps,
		QueuedAt: c.QueuedAt, StartedAt: c.StartedAt, EndedAt: c.EndedAt, Now: s.now(),
	}
	if p := r.Card(c); p != nil {
		u := *p
		v.TotalTokens, v.InputTokens, v.OutputTokens = &u.TotalTokens, &u.InputTokens, &u.OutputTokens
	}
	if c.Result != "" {
		v.ResultHTML = s.md.Render(c.Result)
	}
	if c.Refusal != nil {
		v.RefusalReason, v.RefusalLimit = c.Refusal.Reason, c.Refusal.Limit
	}
	for _, f := range c.Files {
		v.Files = append(v.Files, views.CardFile{Path: f.Path, Size: f.Size})
	}
	return v
}

// usageView is the thread's usage panel from the ledger.
func (s *Server) usageView(u threadUsage) *views.UsageView {
	rep := u.UsageReport
	v := &views.UsageView{Total: viewTotals(rep.Total), Lead: viewTotals(rep.Lead), Subagents: viewTotals(rep.Subagents), Replaced: viewTotals(u.Replaced)}
	for name, t := range rep.ByModel {
		v.ByModel = append(v.ByModel, views.ModelUsage{Model: name, Label: s.modelLabel(name), UsageTotals: viewTotals(t)})
	}
	sort.Slice(v.ByModel, func(i, j int) bool { return v.ByModel[i].Model < v.ByModel[j].Model })
	return v
}
