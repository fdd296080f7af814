package server

import (
	"herd/agent"
	"herd/agent/mcp"
)

// What the audit log keeps of the console's entries (docs/DESIGN.md §10):
// the settings as the API shows them, and a model's key as it is, which
// models.MaskAudit masks before anything is stored, saying when an edit
// changed it.

// auditedModel is model m for the audit log.
func auditedModel(m agent.ModelConfig) any {
	return struct {
		storedModel
		APIKey string `json:"api_key"`
	}{specOf(m), m.APIKey}
}

// auditedAgent is subagent type name for the audit log.
func auditedAgent(name string, a agent.AgentConfig) any { return agentSpecOf(name, a) }

// auditedMCP is MCP server sc for the audit log: its env and header
// values as they are, which models.MaskAudit masks; of its arguments,
// which may hold a token, how many.
func auditedMCP(sc mcp.ServerConfig) any {
	spec := mcpSpecOf(sc)
	spec.Args = nil
	return struct {
		storedMCP
		Args    int               `json:"args,omitempty"`
		Env     map[string]string `json:"env,omitempty"`
		Headers map[string]string `json:"headers,omitempty"`
	}{spec, len(sc.Args), sc.Env, sc.Headers}
}
