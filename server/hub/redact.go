package hub

import (
	"encoding/json"

	"herd/agent"
	"herd/models"
)

// The token gate (server.Settings.TokenUsage) keeps every token figure out of
// chat views while it is off, for users and admins alike; an admin reads
// the accounting on the usage page. This file is the one definition of
// what the gate hides: the keys below, per kind of record, and Redaction,
// through which every surface goes — live frames (Hub.recordFrame,
// eventFrame, usageTitleFrame) here, and in package server the events
// API, the messages API, export and pages (cards, the usage panel).
const (
	// usageKey carries the figures of a message (its usage column, kept
	// as null), of an event payload that has any (eventHasFigures: left
	// out), of a card (left out) and of a title call's frame (null).
	usageKey = "usage"
	// subagentUsageKey is the task call's figures in a message's
	// additional_kwargs, left out.
	subagentUsageKey = "subagent_token_usage"
)

// Redaction is the token gate as one view sees it: Hide leaves every
// token figure out. The zero value shows them.
type Redaction struct{ Hide bool }

// Shows reports whether figures reach this view: pages then render the
// usage panel and cards their tokens, and the usage API answers.
func (r Redaction) Shows() bool { return !r.Hide }

// Message converts a stored message for the wire (docs/API.md), its
// usage null and its additional_kwargs without subagentUsageKey when
// hidden.
func (r Redaction) Message(m *models.Message, html string) MessageJSON {
	out := MessageJSON{
		ID: m.ID, Seq: m.Seq, RunID: m.RunID, Type: m.Type, Content: m.Content,
		ToolCalls: RawOr(m.ToolCalls, "[]"), ToolCallID: m.ToolCallID, Name: m.Name,
		AdditionalKwargs: RawOr(m.AdditionalKwargs, "{}"), Usage: RawOr(m.Usage, "null"),
		ModelName: m.ModelName, CreatedAt: m.CreatedAt, HTML: html,
	}
	if r.Hide {
		out.Usage = json.RawMessage("null")
		out.AdditionalKwargs = withoutKeys(out.AdditionalKwargs, subagentUsageKey)
	}
	return out
}

// messageHasFigures reports whether m can differ once redacted: a frame
// without any builds no redacted variant.
func messageHasFigures(m *models.Message) bool {
	return len(m.Usage) > 0 || len(m.AdditionalKwargs) > 0
}

// EventContent leaves the figures out of an event's stored content, as
// the events API returns it.
func (r Redaction) EventContent(content map[string]any) {
	if r.Hide {
		delete(content, usageKey)
	}
}

// eventFrame returns the options that frame an event payload as this
// view may see it: the payload's own Frame leaves usageKey out.
func (r Redaction) eventFrame(o agent.FrameOptions) agent.FrameOptions {
	o.Redact = r.Hide
	return o
}

// eventHasFigures reports whether an event's payload carries usageKey:
// only these frames build a redacted variant.
func eventHasFigures(ev agent.Event) bool {
	switch ev.(type) {
	case agent.TaskStep, agent.TaskEnd, agent.RunEnd:
		return true
	}
	return false
}

// Card returns a card's usage as this view may see it: nil, left out of
// the card's JSON and view, when hidden.
func (r Redaction) Card(c agent.Card) *agent.TokenUsage {
	if r.Hide {
		return nil
	}
	return c.Usage
}

// titleUsage returns a title call's usage as this view may see it: nil
// when hidden, so the frame says only that the call was made.
func (r Redaction) titleUsage(rep *models.UsageReport) *models.UsageReport {
	if r.Hide {
		return nil
	}
	return rep
}

// withoutKeys returns the object raw minus keys (raw unchanged if it has
// none of them, or is not an object).
func withoutKeys(raw json.RawMessage, keys ...string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	changed := false
	for _, k := range keys {
		if _, ok := m[k]; ok {
			delete(m, k)
			changed = true
		}
	}
	if !changed {
		return raw
	}
	b, _ := json.Marshal(m)
	return b
}
