// Package agent is herd's runtime core: the lead loop, the task tool, the
// subagent executor and its registry, the typed task events, usage
// accounting, the card projection, the status contract and crash
// recovery (docs/DESIGN.md). It knows nothing of HTTP or WebSocket: it
// persists through a Journal and streams through a Publisher that the
// server implements. LLM providers (agent/demo, agent/openai) and tools
// (agent/tools) are adapters in their own packages; the composition root
// (main) chooses them from the configuration.
package agent
