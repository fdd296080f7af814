package server

import (
	"strings"
	"testing"
)

func TestMarkdownIsInert(t *testing.T) {
	md := NewMarkdown()
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
	plain, cached := NewMarkdownCache(0), NewMarkdownCache(64<<10)
	for i := range 3 {
		src := answerMarkdown(i) + "\n\n<script>alert(1)</script>"
		want := plain.Render(src)
		for range 2 {
			if got := cached.Render(src); got != want {
				t.Fatalf("cached Render = %q, want %q", got, want)
			}
		}
	}
	if got := cached.renders.Load(); got != 3 {
		t.Errorf("%d conversions for 3 texts rendered twice, want 3", got)
	}
	hot := answerMarkdown(-1)
	cached.Render(hot)
	for i := range 200 {
		cached.Render(answerMarkdown(i))
		cached.Render(hot) // kept in use: never the least recently used
		if cached.cache.bytes > 64<<10 {
			t.Fatalf("cache holds %d bytes, bound %d", cached.cache.bytes, 64<<10)
		}
	}
	n := cached.renders.Load()
	cached.Render(hot)
	if cached.renders.Load() != n {
		t.Error("the most recently used entry was evicted")
	}
	if l := cached.cache.len(); l >= 200 {
		t.Errorf("cache holds %d entries: nothing was evicted", l)
	}
	huge := strings.Repeat("word ", 8<<10)
	cached.Render(huge)
	cached.Render(huge)
	if got := cached.renders.Load() - n; got != 2 {
		t.Errorf("a text over a quarter of the cache rendered %d times for 2 calls, want 2 (not cached)", got)
	}
}

// TestReplayRendersOnce: reconnecting to a thread does not render its
// Markdown again; the first replay renders each text once.
func TestReplayRendersOnce(t *testing.T) {
	md := NewMarkdown()
	a := newApp(t, func(c *appConfig) { c.markdown = md })
	u := a.newUser("ann@example.com", false)
	th := u.newThread("big")
	last := a.seedConversation(th, u.id, 20)
	if err := u.replayAll(th, last); err != nil {
		t.Fatal(err)
	}
	first := md.renders.Load()
	if first != 40 {
		t.Errorf("first replay rendered %d texts, want 40", first)
	}
	for range 5 {
		if err := u.replayAll(th, last); err != nil {
			t.Fatal(err)
		}
	}
	if got := md.renders.Load(); got != first {
		t.Errorf("5 reconnects rendered %d more texts, want 0", got-first)
	}
}
