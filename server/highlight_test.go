package server

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/chroma/v2"
	"golang.org/x/net/html"
)

// xssFixtures are hostile texts for every rendering path: the final render
// (TestRenderedIsInert) and the live one while an answer streams
// (TestLiveRenderIsInert).
var xssFixtures = []string{
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

// assertInert parses rendered HTML and fails on anything that could run
// script or restyle the page: script-bearing elements, event handlers,
// style attributes, links or sources with a scheme other than http(s) or
// mailto, and classes outside the renderer's own.
func assertInert(t *testing.T, src, out string) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(out))
	if err != nil {
		t.Fatalf("parse %q: %v", out, err)
	}
	classOK := regexp.MustCompile(`^(?:chroma|language-[\p{L}\p{N}_-]+|` + strings.TrimSuffix(strings.TrimPrefix(tokenClassPattern().String(), `^(?:`), `)$`) + `)$`)
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

func TestRenderedIsInert(t *testing.T) {
	md := NewMarkdownCache(0)
	for _, src := range xssFixtures {
		assertInert(t, src, md.Render(src))
		// Inside a list, a quote and a table cell too.
		assertInert(t, src, md.Render("- "+src))
		assertInert(t, src, md.Render("> "+src))
	}
}

func TestHighlight(t *testing.T) {
	md := NewMarkdownCache(0)
	cases := []struct {
		name     string
		src      string
		contains []string
		absent   []string
	}{
		{"go is highlighted with classes", "```go\nfunc main() { x := \"a<b\" } // note\n```",
			[]string{`<pre class="chroma"><code class="language-go">`, `<span class="kd">func</span>`, `<span class="c1">// note</span>`, `&#34;a&lt;b&#34;`},
			[]string{"style="}},
		{"an alias names the language", "```py\ndef f(): pass\n```", []string{`<pre class="chroma"><code class="language-py">`, `<span class="k">def</span>`}, nil},
		{"unknown language is plain and escaped", "```nosuchlang\na <b> c\n```", []string{`<pre><code class="language-nosuchlang">a &lt;b&gt; c`}, []string{"chroma", "<span"}},
		{"no language is plain", "```\nfunc main() {}\n```", []string{"<pre><code>func main() {}"}, []string{"chroma", "<span"}},
		{"indented code is plain", "    func main() {}\n", []string{"<pre><code>func main() {}"}, []string{"<span"}},
		{"markup in code stays text", "```html\n<script>alert(1)</script>\n```", []string{`<pre class="chroma">`, "&lt;</span>"}, []string{"<script"}},
		{"a hostile info string loses its class", "```go\" onclick=\"x\nfunc f() {}\n```", []string{"<pre><code>"}, []string{"onclick"}},
		{"an open fence renders as code to the end", "text\n\n```go\nfunc f() {\n", []string{`<pre class="chroma"><code class="language-go">`}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := md.Render(c.src)
			for _, s := range c.contains {
				if !strings.Contains(got, s) {
					t.Errorf("Render(%q) = %q, want it to contain %q", c.src, got, s)
				}
			}
			for _, s := range c.absent {
				if strings.Contains(got, s) {
					t.Errorf("Render(%q) = %q, must not contain %q", c.src, got, s)
				}
			}
		})
	}
}

// TestHighlightBounds: a block over maxHighlightBlock, and the blocks past
// maxHighlightText in one text, are plain; their code is all there.
func TestHighlightBounds(t *testing.T) {
	md := NewMarkdownCache(0)
	line := "func f(a int) int { return a }\n"
	block := func(size int) string { return "```go\n" + strings.Repeat(line, size/len(line)) + "```\n\n" }
	huge := block(maxHighlightBlock + len(line))
	got := md.Render(huge)
	if strings.Contains(got, "<span") || strings.Count(got, "func f(a int)") != (maxHighlightBlock+len(line))/len(line) {
		t.Errorf("a block over %d bytes: highlighted %v, %d lines", maxHighlightBlock, strings.Contains(got, "<span"), strings.Count(got, "func f(a int)"))
	}
	n := maxHighlightText/(maxHighlightBlock-len(line)) + 1
	got = md.Render(strings.Repeat(block(maxHighlightBlock-len(line)), n))
	if hl, plain := strings.Count(got, `<pre class="chroma">`), strings.Count(got, "<pre><code"); hl != n-1 || plain != 1 {
		t.Errorf("%d blocks of %d bytes: %d highlighted and %d plain, want %d and 1", n, maxHighlightBlock-len(line), hl, plain, n-1)
	}
}

// TestHighlightCached: a code block is highlighted once however often the
// text around it is rendered (an answer streaming), and the cached output
// is the same.
func TestHighlightCached(t *testing.T) {
	md := NewMarkdown()
	plain := NewMarkdownCache(0)
	code := "```go\nfunc f() {}\n```\n\n"
	for i := range 3 {
		src := code + strings.Repeat("more ", i)
		if got, want := md.Render(src), plain.Render(src); got != want {
			t.Fatalf("cached %q, want %q", got, want)
		}
	}
	if n := md.highlights.len(); n != 1 {
		t.Errorf("%d highlighted blocks cached for one block rendered three times, want 1", n)
	}
}

// TestHighlightCSS: the highlighting section of static/app.css is
// highlightCSS(); HERD_UPDATE_CSS=1 rewrites it.
func TestHighlightCSS(t *testing.T) {
	const path = "../static/app.css"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	css := string(b)
	start := strings.Index(css, highlightCSSBegin)
	end := strings.Index(css, highlightCSSEnd)
	if start < 0 || end < start {
		t.Fatalf("app.css has no section between %q and %q", highlightCSSBegin, highlightCSSEnd)
	}
	got := css[start+len(highlightCSSBegin) : end]
	want := "\n" + highlightCSS()
	if got == want {
		return
	}
	if os.Getenv("HERD_UPDATE_CSS") != "" {
		if err := os.WriteFile(path, []byte(css[:start+len(highlightCSSBegin)]+want+css[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("static/app.css's highlighting differs from highlightCSS(); run HERD_UPDATE_CSS=1 go test ./server -run TestHighlightCSS")
}

const (
	highlightCSSBegin = "/* BEGIN code highlighting: generated by server/highlight.go highlightCSS, kept equal by TestHighlightCSS. */"
	highlightCSSEnd   = "/* END code highlighting. */"
)

// TestHighlightCSSCoversClasses: every class the renderer can emit that
// the styles colour has a rule in both themes.
func TestHighlightCSSCoversClasses(t *testing.T) {
	css := highlightCSS()
	for _, c := range []string{"k", "kd", "s", "s1", "c", "c1", "nf", "mi"} {
		rule := regexp.MustCompile(`(?m)^\.chroma \.` + c + ` \{ color: light-dark\(#[0-9a-f]{6}, #[0-9a-f]{6}\)`)
		if !rule.MatchString(css) {
			t.Errorf("no light and dark colour for .%s in\n%s", c, css)
		}
	}
	if strings.Contains(css, "currentColor, currentColor") {
		t.Error("a rule with no colour in either theme")
	}
}

// TestTokenClasses: every class tokenClass gives a token is one the
// sanitizer lets through, so no highlighted span loses its class.
func TestTokenClasses(t *testing.T) {
	allowed := tokenClassPattern()
	for typ := range chroma.StandardTypes {
		if c := tokenClass(typ); c != "" && !allowed.MatchString(c) {
			t.Errorf("tokenClass(%v) = %q, which the sanitizer drops", typ, c)
		}
	}
}
