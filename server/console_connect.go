package server

import (
	"context"
	"fmt"
	"time"

	"herd/agent"
)

// connectionTimeout bounds a Test connection: one tiny call.
const connectionTimeout = 15 * time.Second

// Connection is what Test connection found: whether the provider
// answered, and in plain words what it said or what went wrong; Kind is
// agent's error_kind of a failure.
type Connection struct {
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Kind   string `json:"kind,omitempty"`
}

// TestModel makes one call of a token to model m, with no retry, and
// says how it went. It reaches the network from the server: the console
// is for admins only (docs/OPERATIONS.md, "Admin console").
func (c *Console) TestModel(ctx context.Context, m agent.ModelConfig) Connection {
	m.MaxRetries = new(0)
	built, err := c.o.Build(m)
	if err != nil {
		return Connection{Detail: err.Error(), Kind: agent.ErrorRequest}
	}
	ctx, cancel := context.WithTimeout(ctx, connectionTimeout)
	defer cancel()
	req := agent.Request{Model: m.Model, Messages: []agent.Message{{Type: agent.TypeHuman, Content: "Say OK."}}, MaxTokens: 1}
	if _, err := built.Provider.Complete(ctx, req, nil); err != nil {
		f := agent.FailureOf(err, m)
		return Connection{Kind: f.Kind, Detail: connectionWords(f.Kind, m) + " (" + err.Error() + ")"}
	}
	return Connection{OK: true, Detail: fmt.Sprintf("%s answered as %s", m.Label(), m.Model)}
}

// connectionWords says what a failed test means, by its error kind.
func connectionWords(kind string, m agent.ModelConfig) string {
	switch kind {
	case agent.ErrorAuth:
		return "the API key was refused"
	case agent.ErrorModel:
		return fmt.Sprintf("the provider does not know the model %q", m.Model)
	case agent.ErrorNetwork:
		return "the server at base_url could not be reached (a wrong host, a refused connection or TLS)"
	case agent.ErrorTimeout:
		return fmt.Sprintf("no answer within %s", connectionTimeout)
	case agent.ErrorRateLimit:
		return "the provider's rate limit was reached; the settings may be right"
	case agent.ErrorServer:
		return "the provider failed on its side"
	}
	return "the provider refused the call"
}
