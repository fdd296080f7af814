package main

import (
	"fmt"
	"log/slog"

	"herd/agent"
	"herd/agent/anthropic"
	"herd/agent/demo"
	"herd/agent/openai"
)

// buildModels constructs each configured model's provider, in order (the
// first is the default). Providers log through log, so their lines honour
// log.level and log.format.
func buildModels(cfgs []agent.ModelConfig, log *slog.Logger) ([]*agent.Model, error) {
	out := make([]*agent.Model, 0, len(cfgs))
	for i, c := range cfgs {
		var p agent.Provider
		var err error
		switch c.Provider {
		case "demo":
			p = demo.New(c)
		case "openai":
			p, err = openai.New(c, openai.WithLogger(log))
		case "anthropic":
			p, err = anthropic.New(c, anthropic.WithLogger(log))
		default:
			return nil, fmt.Errorf("models.%d.provider: unknown provider %q", i, c.Provider)
		}
		if err != nil {
			return nil, fmt.Errorf("models.%d (%s): %w", i, c.Name, err)
		}
		out = append(out, &agent.Model{Config: c, Provider: agent.LimitRequests(p, c.MaxConcurrentRequests)})
	}
	return out, nil
}
