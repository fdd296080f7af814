package provider

import "testing"

func TestRedact(t *testing.T) {
	const (
		openaiKey    = "sk-abcdefgh12"
		anthropicKey = "sk-ant-abcdefgh"
	)
	tests := []struct{ key, in, want string }{
		{openaiKey, "Incorrect API key provided: " + openaiKey + ".", "Incorrect API key provided: [redacted]."},
		{openaiKey, "Bearer " + openaiKey, "Bearer [redacted]"},
		{openaiKey, `{"key":"` + openaiKey + `"}`, `{"key":"[redacted]"}`},
		{openaiKey, openaiKey + " and " + openaiKey, "[redacted] and [redacted]"},
		// Inside a longer token it is not this key.
		{openaiKey, "x" + openaiKey, "x" + openaiKey},
		{openaiKey, openaiKey + "9", openaiKey + "9"},
		{openaiKey, "ask-abcdefgh12-z", "ask-abcdefgh12-z"},
		{openaiKey, "nothing here", "nothing here"},
		{anthropicKey, "bad key sk-ant-abcdefgh.", "bad key [redacted]."},
		{anthropicKey, `"sk-ant-abcdefgh" and sk-ant-abcdefgh`, `"[redacted]" and [redacted]`},
		{anthropicKey, "sk-ant-abcdefghij is another key", "sk-ant-abcdefghij is another key"},
		{anthropicKey, "xsk-ant-abcdefgh", "xsk-ant-abcdefgh"},
	}
	for _, tt := range tests {
		if got, _ := Redact(tt.in, tt.key); got != tt.want {
			t.Errorf("Redact(%q, %q) = %q, want %q", tt.in, tt.key, got, tt.want)
		}
	}
	for _, k := range []string{"", "x", "short7c", "EMPTY", "not-needed", "NOT-NEEDED"} {
		if got, ok := Redact("a "+k+" b", k); ok || got != "a "+k+" b" {
			t.Errorf("key %q redacted: %q", k, got)
		}
	}
	if got, ok := Redact("context deadline exceeded", "x"); ok || got != "context deadline exceeded" {
		t.Errorf("a placeholder key redacted: %q", got)
	}
}
