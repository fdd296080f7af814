package main

import (
	"fmt"
	"log/slog"

	"herd/agent"
	"herd/agent/anthropic"
	"herd/agent/demo"
	"herd/agent/mcp"
	"herd/agent/openai"
	"herd/internal/config"
	"herd/server"
)

// buildModels constructs each configured model's provider, in order (the
// first is the default).
func buildModels(cfgs []agent.ModelConfig, log *slog.Logger) ([]*agent.Model, error) {
	out := make([]*agent.Model, 0, len(cfgs))
	for i, c := range cfgs {
		p, err := newProvider(c, log)
		if err != nil {
			if c.Provider != "demo" && c.Provider != "openai" && c.Provider != "anthropic" {
				return nil, fmt.Errorf("models.%d.provider: %w", i, err)
			}
			return nil, fmt.Errorf("models.%d (%s): %w", i, c.Name, err)
		}
		out = append(out, &agent.Model{Config: c, Provider: agent.LimitRequests(p, c.MaxConcurrentRequests)})
	}
	return out, nil
}

// newProvider is model c's provider. Providers log through log, so their
// lines honour log.level and log.format.
func newProvider(c agent.ModelConfig, log *slog.Logger) (agent.Provider, error) {
	switch c.Provider {
	case "demo":
		return demo.New(c), nil
	case "openai":
		return openai.New(c, openai.WithLogger(log))
	case "anthropic":
		return anthropic.New(c, anthropic.WithLogger(log))
	}
	return nil, fmt.Errorf("unknown provider %q", c.Provider)
}

// modelBuilder builds a model the admin console adds as the config
// file's are built: its provider, its request limit and its metrics.
func modelBuilder(log *slog.Logger, instrument func(string, agent.Provider) agent.Provider) server.ModelBuilder {
	return func(c agent.ModelConfig) (*agent.Model, error) {
		p, err := newProvider(c, log)
		if err != nil {
			return nil, err
		}
		return &agent.Model{Config: c, Provider: instrument(c.Name, agent.LimitRequests(p, c.MaxConcurrentRequests))}, nil
	}
}

// checkAgent is config.CheckAgent as the console reads it.
func checkAgent(name string, a agent.AgentConfig, models []agent.ModelConfig, servers []mcp.ServerConfig) []server.FieldProblem {
	return fieldProblems(config.CheckAgent(name, a, models, servers))
}

// checkMCP is config.CheckMCPServer as the console reads it.
func checkMCP(sc mcp.ServerConfig) []server.FieldProblem {
	return fieldProblems(config.CheckMCPServer(sc))
}

// checkModel is config.CheckModel as the console reads it.
func checkModel(m agent.ModelConfig) []server.FieldProblem {
	return fieldProblems(config.CheckModel(m))
}

func fieldProblems(errs []config.FieldError) []server.FieldProblem {
	var out []server.FieldProblem
	for _, f := range errs {
		out = append(out, server.FieldProblem{Field: f.Field, Message: f.Message})
	}
	return out
}
