package render_test

import (
	"testing"

	"herd/server/render"
	"herd/server/render/rendertest"
)

// TestRenderedIsInert: no hostile text renders to HTML that could run
// script or restyle the page, alone or inside a list or a quote.
func TestRenderedIsInert(t *testing.T) {
	md := render.NewMarkdownCache(0)
	for _, src := range rendertest.XSS {
		rendertest.AssertInert(t, src, md.Render(src))
		// Inside a list, a quote and a table cell too.
		rendertest.AssertInert(t, src, md.Render("- "+src))
		rendertest.AssertInert(t, src, md.Render("> "+src))
	}
}
