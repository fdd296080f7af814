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
