// Package rendertest checks rendered HTML for anything that could run
// script, for the tests of every path that renders: render's own and the
// server's live render of a streaming answer.
package rendertest

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"herd/server/render"
)

// XSS are hostile texts for every rendering path: the final render
// (render's TestRenderedIsInert) and the live one while an answer streams
// (server's TestLiveRenderIsInert).
var XSS = []string{
	"<script>alert(1)</script>",
	"look <img src=x onerror=\"alert(1)\"> here",
	"<iframe src=\"https://evil\"></iframe>",
	"[x](javascript:alert(1)) [y](JaVaScRiPt:alert(1)) [z](data:text/html,<script>alert(1)</script>)",
	"![i](javascript:alert(1))",
	"<a href=\"javascript:alert(1)\">a</a> <svg onload=alert(1)>",
	"<p style=\"background:url(javascript:alert(1))\">x</p>",
	"```html\n<script>alert(1)</script><img src=x onerror=alert(1)>\n```",
	"```\"><script>alert(1)</script>\ncode\n```",
	"```go onmouseover=alert(1)\nfunc f() {}\n```",
	"```js\" onmouseover=\"alert(1)\nx()\n```",
	"<details open ontoggle=alert(1)>",
	"[x](<javascript:alert(1)>)",
	"```html\n</code></pre><script>alert(1)</script>",
	"<span class=\"k\" onclick=\"alert(1)\">k</span>",
}

// AssertInert parses rendered HTML and fails on anything that could run
// script or restyle the page: script-bearing elements, event handlers,
// style attributes, links or sources with a scheme other than http(s) or
// mailto, and classes outside the renderer's own.
func AssertInert(t *testing.T, src, out string) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(out))
	if err != nil {
		t.Fatalf("parse %q: %v", out, err)
	}
	classOK := regexp.MustCompile(`^(?:chroma|language-[\p{L}\p{N}_-]+|` + strings.TrimSuffix(strings.TrimPrefix(render.TokenClassPattern().String(), `^(?:`), `)$`) + `)$`)
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script", "iframe", "object", "embed", "style", "svg", "math", "form", "input", "details", "link", "meta", "base":
				t.Errorf("Render(%q) has a <%s>: %q", src, n.Data, out)
			}
			for _, a := range n.Attr {
				key, val := strings.ToLower(a.Key), strings.ToLower(strings.TrimSpace(a.Val))
				switch {
				case strings.HasPrefix(key, "on"), key == "style", key == "srcdoc", key == "formaction":
					t.Errorf("Render(%q) has attribute %s=%q: %q", src, a.Key, a.Val, out)
				case key == "href" || key == "src":
					if !strings.HasPrefix(val, "http://") && !strings.HasPrefix(val, "https://") && !strings.HasPrefix(val, "mailto:") && strings.Contains(val, ":") {
						t.Errorf("Render(%q) links to %q: %q", src, a.Val, out)
					}
				case key == "class":
					for _, c := range strings.Fields(a.Val) {
						if !classOK.MatchString(c) {
							t.Errorf("Render(%q) has class %q on <%s>", src, c, n.Data)
						}
					}
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
}

// Answer is a long, realistic answer: headings, a list, a table,
// code and links, about 1.6 KB.
func Answer(i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Step %d: what I found\n\nThe **build** fails because `go vet` reports a *copied lock* in [the hub](https://example.com/hub.go). ", i)
	b.WriteString("Here is the plan:\n\n")
	for k := range 6 {
		fmt.Fprintf(&b, "- item %d: check `file_%d.go`, then run the tests with `-race`\n", k, k)
	}
	b.WriteString("\n| file | lines | status |\n|---|---|---|\n")
	for k := range 6 {
		fmt.Fprintf(&b, "| hub_%d.go | %d | ok |\n", k, 100*k)
	}
	b.WriteString("\n```go\nfunc (h *Hub) Close(ctx context.Context) error {\n\th.mu.Lock()\n\tdefer h.mu.Unlock()\n\treturn nil\n}\n```\n\n")
	b.WriteString("> Note: the second pass keeps <b>raw HTML</b> as text.\n\nDone; see the ~~old~~ new output above. ")
	b.WriteString(strings.Repeat("More prose with *emphasis* and `code`. ", 12))
	return b.String()
}
