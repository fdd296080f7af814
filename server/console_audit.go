package server

import "herd/agent"

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
