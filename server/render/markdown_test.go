package render_test

import (
	"strings"
	"testing"

	"herd/server/render"
	"herd/server/render/rendertest"
)

func TestMarkdownIsInert(t *testing.T) {
	md := render.NewMarkdown()
	cases := []struct {
		name     string
		src      string
		contains []string
		absent   []string
	}{
		{"script block shown as text", "<script>alert(1)</script>", []string{"&lt;script&gt;alert(1)&lt;/script&gt;"}, []string{"<script"}},
		{"inline onerror", "look <img src=x onerror=\"alert(1)\"> here", []string{"&lt;img src=x onerror="}, []string{"<img"}},
		{"markdown still works", "**bold** and `code`\n\n- item", []string{"<strong>bold</strong>", "<code>code</code>", "<li>item</li>"}, nil},
		{"javascript link dropped", "[x](javascript:alert(1))", nil, []string{"javascript:"}},
		{"external link safe", "[x](https://example.com)", []string{`rel="nofollow noopener"`, `target="_blank"`}, nil},
		{"table", "| a | b |\n|---|---|\n| 1 | 2 |", []string{"<table>", "<td>1</td>"}, nil},
		{"iframe block", "<iframe src=\"https://evil\"></iframe>", []string{"&lt;iframe"}, []string{"<iframe"}},
		{"style attr via html", "<p style=\"x\">hi</p>", nil, []string{"<p style"}},
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

// TestMarkdownCache: cached output is the renderer's output, and the cache
// stays within its byte bound, dropping the least recently used first.
func TestMarkdownCache(t *testing.T) {
	plain, cached := render.NewMarkdownCache(0), render.NewMarkdownCache(64<<10)
	for i := range 3 {
		src := rendertest.Answer(i) + "\n\n<script>alert(1)</script>"
		want := plain.Render(src)
		for range 2 {
			if got := cached.Render(src); got != want {
				t.Fatalf("cached Render = %q, want %q", got, want)
			}
		}
	}
	if got := cached.Renders(); got != 3 {
		t.Errorf("%d conversions for 3 texts rendered twice, want 3", got)
	}
	hot := rendertest.Answer(-1)
	cached.Render(hot)
	for i := range 200 {
		cached.Render(rendertest.Answer(i))
		cached.Render(hot) // kept in use: never the least recently used
		if render.CacheBytes(cached) > 64<<10 {
			t.Fatalf("cache holds %d bytes, bound %d", render.CacheBytes(cached), 64<<10)
		}
	}
	n := cached.Renders()
	cached.Render(hot)
	if cached.Renders() != n {
		t.Error("the most recently used entry was evicted")
	}
	if l := render.CacheLen(cached); l >= 200 {
		t.Errorf("cache holds %d entries: nothing was evicted", l)
	}
	huge := strings.Repeat("word ", 8<<10)
	cached.Render(huge)
	cached.Render(huge)
	if got := cached.Renders() - n; got != 2 {
		t.Errorf("a text over a quarter of the cache rendered %d times for 2 calls, want 2 (not cached)", got)
	}
}
