package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// TestContextWindowFromConfig: a model's context_window and
// max_output_tokens set through the config (here HERD_ variables on the
// demo model) reach the runtime: a thread that outgrows the window keeps
// getting answers, the latest carries the note, and the log says turns
// were left out.
func TestContextWindowFromConfig(t *testing.T) {
	p := startHerdWith(t, t.TempDir(),
		"HERD_MODELS_0_CONTEXT_WINDOW=3072", "HERD_MODELS_0_MAX_OUTPUT_TOKENS=256",
		// The demo counts no tool definitions in its usage, which would
		// calibrate the estimate down; without usage it stays as is.
		"HERD_MODELS_0_USAGE=false", "HERD_MODELS_0_LATENCY_MS=0", "HERD_MODELS_0_CHUNK_MS=0")
	c := p.signIn()
	var th struct{ ID string }
	c.call("POST", "/api/threads", map[string]string{"title": "long"}, &th)
	for i := range 8 {
		c.send(th.ID, fmt.Sprintf("Question %d. %s", i, strings.Repeat("Tell me more about the weather. ", 12)))
	}
	var page struct {
		Messages []struct {
			Type   string `json:"type"`
			Kwargs struct {
				Trimmed *struct{ Sent, Total int } `json:"context_trimmed"`
			} `json:"additional_kwargs"`
		} `json:"messages"`
	}
	c.call("GET", "/api/threads/"+th.ID+"/messages?limit=100", nil, &page)
	last := page.Messages[len(page.Messages)-1]
	if len(page.Messages) != 16 || last.Type != "ai" || last.Kwargs.Trimmed == nil || last.Kwargs.Trimmed.Sent >= last.Kwargs.Trimmed.Total {
		t.Fatalf("%d messages, the last %+v: want 8 answers, the last with turns left out\n%s", len(page.Messages), last, p.log.String())
	}
	if !strings.Contains(p.log.String(), "left turns out to fit the context window") {
		t.Errorf("the log does not say turns were left out:\n%s", p.log.String())
	}
}
