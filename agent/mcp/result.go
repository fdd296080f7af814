package mcp

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// render turns a call's content into the tool result the model reads:
// text as it is, other content as a line saying what it was, the
// structured result when there is no content; at most limit bytes, the
// head and the tail kept.
func render(res *sdk.CallToolResult, limit int) string {
	var parts []string
	for _, c := range res.Content {
		parts = append(parts, renderContent(c))
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return bound(strings.Join(parts, "\n"), limit)
}

// showImages hands the call's images to show: image content, and
// embedded resources whose blob is an image. Which are kept is the
// agent's to decide (agent.ToolImages).
func showImages(res *sdk.CallToolResult, show func(mimeType string, data []byte)) {
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.ImageContent:
			show(c.MIMEType, c.Data)
		case *sdk.EmbeddedResource:
			if r := c.Resource; r != nil && len(r.Blob) > 0 && strings.HasPrefix(r.MIMEType, "image/") {
				show(r.MIMEType, r.Blob)
			}
		}
	}
}

func renderContent(c sdk.Content) string {
	switch c := c.(type) {
	case *sdk.TextContent:
		return c.Text
	case *sdk.ImageContent:
		return fmt.Sprintf("[image: %s, %d bytes]", c.MIMEType, len(c.Data))
	case *sdk.AudioContent:
		return fmt.Sprintf("[audio: %s, %d bytes]", c.MIMEType, len(c.Data))
	case *sdk.ResourceLink:
		return fmt.Sprintf("[resource link: %s %s]", c.Name, c.URI)
	case *sdk.EmbeddedResource:
		r := c.Resource
		if r == nil {
			return "[resource]"
		}
		if r.Text != "" {
			return fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text)
		}
		return fmt.Sprintf("[resource %s: %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob))
	default:
		return fmt.Sprintf("[%T content]", c)
	}
}

// bound keeps the head and the tail of s within limit bytes, on rune
// boundaries, and says how much was cut.
func bound(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	head, tail := limit/2, limit-limit/2
	for head > 0 && !utf8Start(s[head]) {
		head--
	}
	start := len(s) - tail
	for start < len(s) && !utf8Start(s[start]) {
		start++
	}
	return fmt.Sprintf("%s\n[… %d bytes cut …]\n%s", s[:head], start-head, s[start:])
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
