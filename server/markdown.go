package server

import (
	"bytes"
	"html"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"
)

// Markdown renders model and user text to HTML that cannot run script.
// Raw HTML in the source is shown as the text it is (a user who types
// <script> sees <script>), never passed through; bluemonday's UGC policy
// then sanitizes the result as a second wall.
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
	md := goldmark.New(
		goldmark.WithExtensions(extension.GFM),
		goldmark.WithRendererOptions(renderer.WithNodeRenderers(util.Prioritized(rawHTMLAsText{}, 100))),
	)
	return &Markdown{md: md, policy: p}
}

// Render returns sanitized HTML for src.
func (m *Markdown) Render(src string) string {
	var buf bytes.Buffer
	if err := m.md.Convert([]byte(src), &buf); err != nil {
		return "<pre>" + html.EscapeString(src) + "</pre>"
	}
	return m.policy.Sanitize(buf.String())
}

// rawHTMLAsText renders raw HTML (inline and blocks) as escaped text.
type rawHTMLAsText struct{}

func (rawHTMLAsText) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindRawHTML, func(w util.BufWriter, src []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			segs := n.(*ast.RawHTML).Segments
			for i := 0; i < segs.Len(); i++ {
				s := segs.At(i)
				_, _ = w.WriteString(html.EscapeString(string(s.Value(src))))
			}
		}
		return ast.WalkSkipChildren, nil
	})
	reg.Register(ast.KindHTMLBlock, func(w util.BufWriter, src []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		b := n.(*ast.HTMLBlock)
		_, _ = w.WriteString("<p>")
		lines := b.Lines()
		for i := 0; i < lines.Len(); i++ {
			s := lines.At(i)
			_, _ = w.WriteString(html.EscapeString(string(s.Value(src))))
		}
		if b.HasClosure() {
			_, _ = w.WriteString(html.EscapeString(string(b.ClosureLine.Value(src))))
		}
		_, _ = w.WriteString("</p>\n")
		return ast.WalkSkipChildren, nil
	})
}
