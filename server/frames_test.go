package server

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestFramesCarryHTMLUnescaped: rendered Markdown goes out as is, not with
// every '<' as \u003c (a frame is parsed by JSON.parse, never put in a
// page), and the frame still decodes to the same text.
func TestFramesCarryHTMLUnescaped(t *testing.T) {
	const html = `<p>a &amp; <code>b</code></p>`
	raw := encodeEnvelope(0, time.Time{}, "ai_html", "th", "run", map[string]string{"html": html})
	if bytes.Contains(raw, []byte(`\u003c`)) || !bytes.Contains(raw, []byte(html)) {
		t.Fatalf("frame %s: want the HTML unescaped", raw)
	}
	if bytes.HasSuffix(raw, []byte("\n")) {
		t.Error("the frame ends with a newline")
	}
	var env struct {
		Data struct{ HTML string } `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || env.Data.HTML != html {
		t.Fatalf("decoded %q, %v; want %q", env.Data.HTML, err, html)
	}
}
