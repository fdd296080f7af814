package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"herd/agent"
	"herd/agent/anthropic"
	"herd/agent/demo"
	"herd/agent/openai"
	"herd/agent/openai/openaitest"
)

// TestProviderLogsHonourLevel: the openai provider logs through the
// configured logger, at its level (issue 11: its lines bypassed it).
func TestProviderLogsHonourLevel(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		srv := openaitest.NewServer(t, openaitest.Text("hi"))
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))
		ms, err := buildModels([]agent.ModelConfig{{Name: "gpt", Provider: "openai", Model: "gpt-test", BaseURL: srv.URL(), APIKey: "x"}}, log)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ms[0].Provider.Complete(context.Background(), agent.Request{Messages: []agent.Message{{Type: agent.TypeHuman, Content: "hello"}}}, nil); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		logged := strings.Contains(buf.String(), `"msg":"openai: call completed"`)
		if logged != (level == slog.LevelDebug) {
			t.Errorf("level %s: call logged %v, want %v (log: %q)", level, logged, level == slog.LevelDebug, buf.String())
		}
	}
}

func TestBuildModels(t *testing.T) {
	t.Run("each provider, in order", func(t *testing.T) {
		ms, err := buildModels([]agent.ModelConfig{
			{Name: "fast", Provider: "demo"},
			{Name: "gpt", Provider: "openai", BaseURL: "http://127.0.0.1:1/v1", APIKey: "k"},
			{Name: "claude", Provider: "anthropic", APIKey: "k"},
		}, slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 3 || ms[0].Config.Name != "fast" || ms[1].Config.Name != "gpt" || ms[2].Config.Name != "claude" {
			t.Fatalf("models = %+v, want fast, gpt, claude", ms)
		}
		if _, ok := ms[0].Provider.(*demo.Provider); !ok {
			t.Errorf("fast: provider %T, want *demo.Provider", ms[0].Provider)
		}
		if _, ok := ms[1].Provider.(*openai.Provider); !ok {
			t.Errorf("gpt: provider %T, want *openai.Provider", ms[1].Provider)
		}
		if _, ok := ms[2].Provider.(*anthropic.Provider); !ok {
			t.Errorf("claude: provider %T, want *anthropic.Provider", ms[2].Provider)
		}
	})
	tests := []struct {
		name string
		cfgs []agent.ModelConfig
		want string
	}{
		{"unknown provider", []agent.ModelConfig{{Name: "fast", Provider: "demo"}, {Name: "x", Provider: "claude"}}, `models.1.provider: unknown provider "claude"`},
		{"anthropic refuses its config", []agent.ModelConfig{{Name: "claude", Provider: "anthropic"}}, `models.0 (claude): anthropic model "claude": api_key is required`},
		{"provider refuses its config", []agent.ModelConfig{{Name: "gpt", Provider: "openai", BaseURL: "ftp://x"}}, `models.0 (gpt): openai model "gpt": base_url`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := buildModels(tt.cfgs, slog.Default())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
