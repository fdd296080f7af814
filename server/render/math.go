package render

import (
	"bytes"
	"html"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// Math marks TeX in model text so that the page can typeset it
// (static/math.js, KaTeX): $…$ and \(…\) become <span class="math-inline">,
// $$…$$ and \[…\] a <span class="math-display"> inside a paragraph or a
// <div class="math-display"> on lines of their own. The TeX inside is
// escaped text, never parsed as Markdown, so `$a_1$ and $b_2$` keeps its
// underscores. Currency stays text: an inline $ opens only before a
// non-space and closes only after one, not before a digit ("$5 and $10").
var Math goldmark.Extender = mathExtension{}

// KindMath is the kind of a math span or block.
var KindMath = ast.NewNodeKind("Math")

type mathInline struct {
	ast.BaseInline
	tex     []byte
	display bool
}

func (*mathInline) Kind() ast.NodeKind           { return KindMath }
func (n *mathInline) Dump(src []byte, level int) { ast.DumpHelper(n, src, level, nil, nil) }
func (*mathInline) IsRaw() bool                  { return true }
func (*mathBlock) Kind() ast.NodeKind            { return kindMathBlock }
func (n *mathBlock) Dump(src []byte, level int)  { ast.DumpHelper(n, src, level, nil, nil) }
func (*mathBlock) IsRaw() bool                   { return true }
func (*mathBlock) CanInterruptParagraph() bool   { return true }
func (mathExtension) Extend(m goldmark.Markdown) {
	m.Parser().AddOptions(mathParsers...)
	m.Renderer().AddOptions(mathRenderers)
}
func (mathBlockParser) Trigger() []byte                             { return []byte{'$', '\\'} }
func (mathBlockParser) CanInterruptParagraph() bool                 { return true }
func (mathBlockParser) CanAcceptIndentedLine() bool                 { return false }
func (mathInlineParser) Trigger() []byte                            { return []byte{'$', '\\'} }
func (mathBlockParser) Close(ast.Node, text.Reader, parser.Context) {}

var kindMathBlock = ast.NewNodeKind("MathBlock")

type mathBlock struct {
	ast.BaseBlock
	close []byte // the delimiter that ends it: $$ or \]
	done  bool
}

type mathExtension struct{}

var (
	mathParsers = []parser.Option{
		parser.WithInlineParsers(util.Prioritized(mathInlineParser{}, 50)),
		parser.WithBlockParsers(util.Prioritized(mathBlockParser{}, 50)),
	}
	mathRenderers = renderer.WithNodeRenderers(util.Prioritized(mathRenderer{}, 50))
)

// mathInlineParser reads $…$, $$…$$, \(…\) and \[…\] within one line.
type mathInlineParser struct{}

func (mathInlineParser) Parse(parent ast.Node, block text.Reader, pc parser.Context) ast.Node {
	line, _ := block.PeekLine()
	open, closing, display := delimiters(line)
	if open == 0 {
		return nil
	}
	body := line[open:]
	end := -1
	if closing == "$" {
		// Not $ followed by a space; closed by a $ after a non-space and
		// not followed by a digit (pandoc's rule, which keeps "$5 and $10").
		if len(body) == 0 || isSpace(body[0]) {
			return nil
		}
		for i := 1; i < len(body); i++ {
			if body[i] == '\\' {
				i++
				continue
			}
			if body[i] == '$' && !isSpace(body[i-1]) && (i+1 >= len(body) || !isDigit(body[i+1])) {
				end = i
				break
			}
		}
	} else {
		end = bytes.Index(body, []byte(closing))
	}
	if end <= 0 || len(bytes.TrimSpace(body[:end])) == 0 {
		return nil
	}
	n := &mathInline{tex: bytes.TrimSpace(body[:end]), display: display}
	block.Advance(open + end + len(closing))
	return n
}

// delimiters names the math delimiter line starts with: the length of its
// opening, the closing to look for, and whether it is display math;
// open 0 when line starts none.
func delimiters(line []byte) (open int, closing string, display bool) {
	switch {
	case bytes.HasPrefix(line, []byte("$$")):
		return 2, "$$", true
	case bytes.HasPrefix(line, []byte("$")):
		return 1, "$", false
	case bytes.HasPrefix(line, []byte(`\(`)):
		return 2, `\)`, false
	case bytes.HasPrefix(line, []byte(`\[`)):
		return 2, `\]`, true
	}
	return 0, "", false
}

// mathBlockParser reads display math on lines of its own: a line that
// starts with $$ or \[ up to the line that ends with $$ or \].
type mathBlockParser struct{}

func (mathBlockParser) Open(parent ast.Node, reader text.Reader, pc parser.Context) (ast.Node, parser.State) {
	line, seg := reader.PeekLine()
	pos := pc.BlockOffset()
	if pos < 0 {
		return nil, parser.NoChildren
	}
	rest := line[pos:]
	var closing []byte
	switch {
	case bytes.HasPrefix(rest, []byte("$$")):
		closing = []byte("$$")
	case bytes.HasPrefix(rest, []byte(`\[`)):
		closing = []byte(`\]`)
	default:
		return nil, parser.NoChildren
	}
	inner := bytes.TrimRight(rest[2:], " \t\r\n")
	n := &mathBlock{close: closing}
	start := seg.Start + pos + 2
	if bytes.HasSuffix(inner, closing) {
		// The whole block on one line: $$x$$, unless something follows
		// it (then it is inline, in a paragraph).
		n.done = true
		inner = inner[:len(inner)-len(closing)]
		if len(bytes.TrimSpace(inner)) == 0 {
			return nil, parser.NoChildren
		}
		n.Lines().Append(text.NewSegment(start, start+len(inner)))
	} else if len(bytes.TrimSpace(inner)) > 0 {
		if bytes.Contains(inner, closing) {
			return nil, parser.NoChildren // $$a$$ and more: inline math
		}
		n.Lines().Append(text.NewSegment(start, seg.Stop))
	}
	reader.AdvanceToEOL()
	return n, parser.NoChildren
}

func (mathBlockParser) Continue(node ast.Node, reader text.Reader, pc parser.Context) parser.State {
	n := node.(*mathBlock)
	if n.done {
		return parser.Close
	}
	line, seg := reader.PeekLine()
	if line == nil {
		return parser.Close
	}
	trimmed := bytes.TrimRight(line, " \t\r\n")
	if bytes.HasSuffix(trimmed, n.close) {
		body := trimmed[:len(trimmed)-len(n.close)]
		if len(bytes.TrimSpace(body)) > 0 {
			n.Lines().Append(text.NewSegment(seg.Start, seg.Start+len(body)))
		}
		reader.AdvanceToEOL()
		return parser.Close
	}
	n.Lines().Append(seg)
	reader.AdvanceToEOL()
	return parser.Continue | parser.NoChildren
}

// mathRenderer writes math as escaped TeX in its marked element.
type mathRenderer struct{}

func (mathRenderer) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(KindMath, func(w util.BufWriter, src []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			m := n.(*mathInline)
			class := "math-inline"
			if m.display {
				class = "math-display"
			}
			_, _ = w.WriteString(`<span class="` + class + `">` + html.EscapeString(string(m.tex)) + `</span>`)
		}
		return ast.WalkSkipChildren, nil
	})
	reg.Register(kindMathBlock, func(w util.BufWriter, src []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			var tex bytes.Buffer
			lines := n.Lines()
			for i := 0; i < lines.Len(); i++ {
				s := lines.At(i)
				tex.Write(s.Value(src))
			}
			_, _ = w.WriteString(`<div class="math-display">` + html.EscapeString(string(bytes.TrimSpace(tex.Bytes()))) + "</div>\n")
		}
		return ast.WalkSkipChildren, nil
	})
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
