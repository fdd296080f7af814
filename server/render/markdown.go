// Package render turns model and user text into HTML that cannot run
// script: Markdown (goldmark, GFM), sanitized by bluemonday, its fenced
// code highlighted with chroma classes, and a bounded cache of what it
// rendered. It knows nothing of herd.
package render

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"html"
	"regexp"
	"sync"
	"sync/atomic"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// Markdown renders model and user text to HTML that cannot run script.
// Raw HTML in the source is shown as the text it is (a user who types
// <script> sees <script>), never passed through; bluemonday's UGC policy
// then sanitizes the result as a second wall. Fenced code is highlighted
// with classes (highlight.go); docs/DESIGN.md "Rendering".
//
// Rendered HTML is kept in a bounded LRU cache keyed by the source's
// SHA-256, so replaying a thread to a storm of reconnecting clients
// renders each message once, not once per client (server's
// BenchmarkReplayStorm).
type Markdown struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
	cache  *htmlCache // nil: no cache
	// highlights caches highlighted code blocks (highlight.go); nil: none.
	highlights *htmlCache
	// renders counts conversions, cached or not (tests, benchmarks).
	renders atomic.Int64
}

// DefaultMarkdownCacheBytes bounds the rendered HTML the cache keeps:
// about 4,000 long answers, a few large threads' worth.
const DefaultMarkdownCacheBytes = 32 << 20

// NewMarkdown returns the renderer with a cache of
// DefaultMarkdownCacheBytes.
func NewMarkdown() *Markdown { return NewMarkdownCache(DefaultMarkdownCacheBytes) }

// NewMarkdownCache returns the renderer with a cache of at most maxBytes of
// HTML; 0 renders every call afresh.
func NewMarkdownCache(maxBytes int) *Markdown {
	p := bluemonday.UGCPolicy()
	p.RequireNoFollowOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	p.AllowAttrs("class").Matching(bluemonday.SpaceSeparatedTokens).OnElements("code", "pre")
	// Highlighted code is spans of chroma's token classes (highlight.go),
	// and only those.
	p.AllowAttrs("class").Matching(regexp.MustCompile(TokenClassPattern().String() + `|^math-(?:inline|display)$`)).OnElements("span")
	// Math for static/math.js to typeset (math.go).
	p.AllowAttrs("class").Matching(regexp.MustCompile(`^math-display$`)).OnElements("div")
	var code codeBlocks
	if maxBytes > 0 {
		code.cache = newHTMLCache(maxBytes / 8)
	}
	md := goldmark.New(
		goldmark.WithExtensions(extension.GFM, Math),
		goldmark.WithRendererOptions(renderer.WithNodeRenderers(
			util.Prioritized(rawHTMLAsText{}, 100),
			util.Prioritized(code, 100),
		)),
	)
	m := &Markdown{md: md, policy: p, highlights: code.cache}
	if maxBytes > 0 {
		m.cache = newHTMLCache(maxBytes)
	}
	return m
}

// Renders counts the texts converted, cache hits aside: tests and
// benchmarks prove with it that a replay renders nothing again.
func (m *Markdown) Renders() int64 { return m.renders.Load() }

// Render returns sanitized HTML for src.
func (m *Markdown) Render(src string) string {
	if m.cache == nil {
		return m.render(src)
	}
	key := sha256.Sum256([]byte(src))
	if out, ok := m.cache.get(key); ok {
		return out
	}
	out := m.render(src)
	m.cache.put(key, out)
	return out
}

func (m *Markdown) render(src string) string {
	m.renders.Add(1)
	var buf bytes.Buffer
	b := []byte(src)
	doc := m.md.Parser().Parse(text.NewReader(b))
	markHighlighted(doc, b)
	if err := m.md.Renderer().Render(&buf, b, doc); err != nil {
		return "<pre>" + html.EscapeString(src) + "</pre>"
	}
	return m.policy.Sanitize(buf.String())
}

// htmlCache is a least-recently-used map from a source's hash to its HTML,
// bounded by the bytes of HTML it holds. The key is the content's hash, not
// a message id: the output depends on the text alone, and an edited text
// is a new key, so an entry is never stale.
type htmlCache struct {
	mu       sync.Mutex
	maxBytes int
	bytes    int
	order    *list.List // front = most recently used; values are *htmlEntry
	byKey    map[[sha256.Size]byte]*list.Element
}

type htmlEntry struct {
	key  [sha256.Size]byte
	html string
}

// entryOverhead approximates an entry's bookkeeping (list element, map
// slot, key), so many tiny entries are bounded too.
const entryOverhead = 128

func newHTMLCache(maxBytes int) *htmlCache {
	return &htmlCache{maxBytes: maxBytes, order: list.New(), byKey: map[[sha256.Size]byte]*list.Element{}}
}

func (c *htmlCache) get(key [sha256.Size]byte) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return "", false
	}
	c.order.MoveToFront(e)
	return e.Value.(*htmlEntry).html, true
}

// put keeps html unless it alone would take more than a quarter of the
// cache, then drops the least recently used entries over the bound.
func (c *htmlCache) put(key [sha256.Size]byte, html string) {
	size := len(html) + entryOverhead
	if size > c.maxBytes/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; ok {
		return // rendered concurrently by another caller
	}
	c.byKey[key] = c.order.PushFront(&htmlEntry{key: key, html: html})
	c.bytes += size
	for c.bytes > c.maxBytes {
		old := c.order.Back()
		e := old.Value.(*htmlEntry)
		c.order.Remove(old)
		delete(c.byKey, e.key)
		c.bytes -= len(e.html) + entryOverhead
	}
}

// len is the number of cached entries (tests).
func (c *htmlCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
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
