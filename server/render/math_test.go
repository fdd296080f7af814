package render

import "testing"

// TestMathMarked: TeX in its four delimiters is marked for the page to
// typeset, escaped and never parsed as Markdown; currency, escaped
// dollars and code stay text; what is inside cannot become HTML.
func TestMathMarked(t *testing.T) {
	m := NewMarkdownCache(0)
	for _, c := range []struct{ name, src, want string }{
		{"inline", "$x^2$ is", `<p><span class="math-inline">x^2</span> is</p>` + "\n"},
		{"no emphasis inside", "$a_1$ and $b_2$", `<p><span class="math-inline">a_1</span> and <span class="math-inline">b_2</span></p>` + "\n"},
		{"paren", `so \(a*b*c\) holds`, `<p>so <span class="math-inline">a*b*c</span> holds</p>` + "\n"},
		{"display in a paragraph", `see $$\sum_i x_i$$ and \[y\]`, `<p>see <span class="math-display">\sum_i x_i</span> and <span class="math-display">y</span></p>` + "\n"},
		{"display block", "$$\n\\int_0^1 x\\,dx\n= \\frac12\n$$\n\nafter", `<div class="math-display">\int_0^1 x\,dx` + "\n" + `= \frac12</div>` + "\n<p>after</p>\n"},
		{"bracket block", "\\[\n a_1 \\]", `<div class="math-display">a_1</div>` + "\n"},
		{"one-line block", "$$e^{i\\pi}$$", `<div class="math-display">e^{i\pi}</div>` + "\n"},
		{"currency", "costs $5 and $10 today", "<p>costs $5 and $10 today</p>\n"},
		{"space after the opening", "$ x$", "<p>$ x$</p>\n"},
		{"space before the closing", "$x $", "<p>$x $</p>\n"},
		{"escaped dollar", `\$x$ and more`, "<p>$x$ and more</p>\n"},
		{"in code", "`$x$`", "<p><code>$x$</code></p>\n"},
		{"html inside", `$<img src=x onerror=alert(1)>$`, `<p><span class="math-inline">&lt;img src=x onerror=alert(1)&gt;</span></p>` + "\n"},
		{"href inside", `$\href{javascript:alert(1)}{x}$`, `<p><span class="math-inline">\href{javascript:alert(1)}{x}</span></p>` + "\n"},
		{"quotes inside", `$a<b & "c"$`, `<p><span class="math-inline">a&lt;b &amp; &#34;c&#34;</span></p>` + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := m.Render(c.src); got != c.want {
				t.Errorf("Render(%q)\n got %q\nwant %q", c.src, got, c.want)
			}
		})
	}
}
