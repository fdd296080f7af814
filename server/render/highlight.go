package render

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"html"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/lexers"
	"github.com/alecthomas/chroma/v2/styles"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"
)

// Code blocks are highlighted on the server with chroma, as spans with
// chroma's short class names (CSS classes, never inline styles: the CSP
// forbids them); static/app.css colours the classes for light and dark
// (highlightCSS, docs/DESIGN.md "Rendering").
//
// Highlighting is bounded so a huge answer cannot stall the writer of a
// frame or the page: one block over maxHighlightBlock, or the blocks of a
// text past maxHighlightText in all, are shown plain (escaped). The bounds
// are in bytes, not time, so a text always renders the same way: the live
// render of an answer and its final render cannot differ.
const (
	maxHighlightBlock = 32 << 10
	maxHighlightText  = 64 << 10
)

// highlightAttr marks a fenced code block, before it is rendered, as
// within the highlighting bounds.
var highlightAttr = []byte("herd-highlight")

// markHighlighted marks the fenced code blocks of doc to highlight: those
// with a known language, in order, while they fit the bounds.
func markHighlighted(doc ast.Node, src []byte) {
	budget := maxHighlightText
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		b, ok := n.(*ast.FencedCodeBlock)
		if !entering || !ok {
			return ast.WalkContinue, nil
		}
		size := codeSize(b, src)
		if size > maxHighlightBlock || size > budget || lexerFor(string(b.Language(src))) == nil {
			return ast.WalkSkipChildren, nil
		}
		budget -= size
		b.SetAttribute(highlightAttr, true)
		return ast.WalkSkipChildren, nil
	})
}

func codeSize(b *ast.FencedCodeBlock, src []byte) int {
	n := 0
	lines := b.Lines()
	for i := 0; i < lines.Len(); i++ {
		s := lines.At(i)
		n += s.Stop - s.Start
	}
	return n
}

// lexerFor is the lexer of a fence's language, nil when chroma does not
// know it (the block is then plain text).
func lexerFor(lang string) chroma.Lexer {
	if lang == "" || len(lang) > 40 {
		return nil
	}
	l := lexers.Get(lang)
	if l == nil {
		return nil
	}
	return chroma.Coalesce(l)
}

// codeBlocks renders fenced code blocks: highlighted when marked, else
// escaped, both as <pre><code class="language-…">. Highlighted blocks are
// cached by language and code: while an answer streams it is rendered
// again and again, and only its last block is new each time.
type codeBlocks struct {
	cache *htmlCache // nil: no cache
}

func (cb codeBlocks) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindFencedCodeBlock, func(w util.BufWriter, src []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		b := n.(*ast.FencedCodeBlock)
		var code strings.Builder
		lines := b.Lines()
		for i := 0; i < lines.Len(); i++ {
			s := lines.At(i)
			code.Write(s.Value(src))
		}
		lang := string(b.Language(src))
		_, marked := b.AttributeString(string(highlightAttr))
		class := ""
		if lang != "" {
			class = ` class="language-` + html.EscapeString(lang) + `"`
		}
		if marked {
			if out, ok := cb.highlighted(lang, code.String()); ok {
				_, _ = fmt.Fprintf(w, `<pre class="chroma"><code%s>%s</code></pre>`+"\n", class, out)
				return ast.WalkSkipChildren, nil
			}
		}
		_, _ = fmt.Fprintf(w, "<pre><code%s>%s</code></pre>\n", class, html.EscapeString(code.String()))
		return ast.WalkSkipChildren, nil
	})
}

// highlighted is code as chroma's tokens, escaped; false when the lexer
// fails.
func (cb codeBlocks) highlighted(lang, code string) (string, bool) {
	var key [sha256.Size]byte
	if cb.cache != nil {
		key = sha256.Sum256([]byte(lang + "\x00" + code))
		if out, ok := cb.cache.get(key); ok {
			return out, true
		}
	}
	out, ok := tokens(lexerFor(lang), code)
	if ok && cb.cache != nil {
		cb.cache.put(key, out)
	}
	return out, ok
}

// tokens is code as l's tokens, escaped, in spans of their classes;
// false when the lexer fails.
func tokens(l chroma.Lexer, code string) (string, bool) {
	it, err := l.Tokenise(nil, code)
	if err != nil {
		return "", false
	}
	var out strings.Builder
	out.Grow(len(code) * 2)
	for tok := it(); tok != chroma.EOF; tok = it() {
		text := html.EscapeString(tok.Value)
		if c := tokenClass(tok.Type); c != "" {
			out.WriteString(`<span class="` + c + `">` + text + `</span>`)
		} else {
			out.WriteString(text)
		}
	}
	return out.String(), true
}

// MaxHighlightFile bounds the text of a file CodeFile highlights: a
// preview reads no more (server's file preview), and a longer one is
// shown plain.
const MaxHighlightFile = 256 << 10

// FileLexer is the lexer of a file by its name ("report.py",
// "Makefile", "drawing.svg"), nil when chroma knows none or knows it as
// plain text only.
func FileLexer(name string) chroma.Lexer {
	l := lexers.Match(name)
	if l == nil || l.Config().Name == "plaintext" {
		return nil
	}
	return chroma.Coalesce(l)
}

// CodeFile is a file's text as a code block, highlighted as a fenced
// block of its language is (same classes, same escaping: the source
// shows, markup of an SVG or HTML file never renders), or escaped plain
// when chroma knows no lexer for the name, the text is over
// MaxHighlightFile or the lexer fails.
func CodeFile(name, code string) string {
	l := FileLexer(name)
	if l != nil && len(code) <= MaxHighlightFile {
		if out, ok := tokens(l, code); ok {
			lang := strings.ToLower(l.Config().Name)
			return `<pre class="chroma"><code class="language-` + html.EscapeString(lang) + `">` + out + "</code></pre>\n"
		}
	}
	return "<pre><code>" + html.EscapeString(code) + "</code></pre>\n"
}

// tokenClass is chroma's class of a token type, or of its nearest
// ancestor that has one ("" for plain text and chroma's meta types, such
// as the error of code the lexer could not read: a block still being
// written is often that).
func tokenClass(t chroma.TokenType) string {
	if t.Category() == chroma.Text {
		return "" // whitespace and plain text look like the code around them
	}
	for ; t > 0; t = t.Parent() {
		if c, ok := chroma.StandardTypes[t]; ok {
			return c
		}
	}
	return ""
}

// tokenClasses is every class tokenClass can return, for the sanitizer's
// allow-list and the stylesheet; TestTokenClasses ties the two.
func tokenClasses() map[string]chroma.TokenType {
	out := map[string]chroma.TokenType{}
	for t, c := range chroma.StandardTypes {
		if t > 0 && c != "" && t.Category() != chroma.Text {
			out[c] = t
		}
	}
	return out
}

// TokenClassPattern matches exactly one token class: the sanitizer lets
// spans carry these and nothing else.
func TokenClassPattern() *regexp.Regexp {
	names := slices.Sorted(maps.Keys(tokenClasses()))
	return regexp.MustCompile(`^(?:` + strings.Join(names, "|") + `)$`)
}

// The chroma styles static/app.css takes its highlighting colours from.
const (
	LightStyle = "github"
	DarkStyle  = "github-dark"
)

// highlightCSS is the highlighting section of static/app.css: one rule per
// token class whose look differs from plain code in either theme, each
// colour a light-dark() pair of the two chroma styles, so the app's
// light, dark and system themes apply without a second stylesheet.
// TestHighlightCSS keeps app.css equal to it.
func highlightCSS() string {
	light, dark := styles.Get(LightStyle), styles.Get(DarkStyle)
	lightBase, darkBase := light.Get(chroma.Background), dark.Get(chroma.Background)
	classes := tokenClasses()
	names := slices.SortedFunc(maps.Keys(classes), func(a, b string) int { return cmp.Compare(classes[a], classes[b]) })
	var b strings.Builder
	for _, name := range names {
		l, d := light.Get(classes[name]), dark.Get(classes[name])
		var decl []string
		if l.Colour != lightBase.Colour || d.Colour != darkBase.Colour {
			decl = append(decl, fmt.Sprintf("color: light-dark(%s, %s)", cssColour(l.Colour), cssColour(d.Colour)))
		}
		if l.Background != lightBase.Background && l.Background.IsSet() && d.Background != darkBase.Background && d.Background.IsSet() {
			decl = append(decl, fmt.Sprintf("background: light-dark(%s, %s)", l.Background, d.Background))
		}
		if l.Bold == chroma.Yes {
			decl = append(decl, "font-weight: bold")
		}
		if l.Italic == chroma.Yes {
			decl = append(decl, "font-style: italic")
		}
		if l.Underline == chroma.Yes {
			decl = append(decl, "text-decoration: underline")
		}
		if len(decl) > 0 {
			fmt.Fprintf(&b, ".chroma .%s { %s; }\n", name, strings.Join(decl, "; "))
		}
	}
	return b.String()
}

// cssColour is a style's colour, or the text's own when it sets none.
func cssColour(c chroma.Colour) string {
	if !c.IsSet() {
		return "currentColor"
	}
	return c.String()
}
