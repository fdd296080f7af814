package server

import (
	"bytes"
	"html"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// Markdown renders model and user text to HTML that cannot run script:
// goldmark renders (raw HTML in the source is escaped, not passed through),
// and bluemonday's UGC policy sanitizes the result as a second wall.
type Markdown struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
}

// NewMarkdown returns the renderer.
func NewMarkdown() *Markdown {
	p := bluemonday.UGCPolicy()
	p.RequireNoFollowOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	p.AllowAttrs("class").Matching(bluemonday.SpaceSeparatedTokens).OnElements("code", "pre")
	return &Markdown{
		md:     goldmark.New(goldmark.WithExtensions(extension.GFM)),
		policy: p,
	}
}

// Render returns sanitized HTML for src.
func (m *Markdown) Render(src string) string {
	var buf bytes.Buffer
	if err := m.md.Convert([]byte(src), &buf); err != nil {
		return "<pre>" + html.EscapeString(src) + "</pre>"
	}
	return m.policy.Sanitize(buf.String())
}
