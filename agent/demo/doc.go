// Package demo is herd's offline LLM provider: a deterministic, rule-based
// stand-in that plays the lead (lead.go) and the subagents (subagent.go)
// from the request's messages alone, so herd runs with no key and still
// exercises delegation, tools, streaming, usage and failures for real.
package demo
