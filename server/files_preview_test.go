package server

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// previewOf is the preview fragment of path in thread th, parsed, with
// its root element.
func previewOf(t *testing.T, u *user, th, path string) (response, *html.Node) {
	t.Helper()
	r := u.do("GET", "/threads/"+th+"/preview/"+(&url.URL{Path: path}).EscapedPath(), nil)
	if r.status != http.StatusOK {
		t.Fatalf("preview %s: %d %.300s", path, r.status, r.body)
	}
	doc, err := html.Parse(bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	roots := findAll(doc, func(n *html.Node) bool { return hasClass(n, "file-preview") })
	if len(roots) != 1 {
		t.Fatalf("preview %s: %d .file-preview roots in %.300s", path, len(roots), r.body)
	}
	return r, roots[0]
}

func findAll(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func hasClass(n *html.Node, class string) bool {
	return n.Type == html.ElementNode && strings.Contains(" "+attrOf(n, "class")+" ", " "+class+" ")
}

func byTagName(tag string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Data == tag }
}

func textOfNode(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// TestFilePreview: each kind of file previews as its kind, by its bytes
// first and then its name: Markdown rendered and sanitized, code and the
// markup of SVG and HTML shown as highlighted source, a CSV as a table
// cut to its rows, columns and cells, other text escaped, an image from
// the files route, a PDF and anything else as a line; every preview has
// its download link, a long text says it was cut, and nothing of a file
// becomes an element that runs.
func TestFilePreview(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("preview")

	var wide strings.Builder
	for c := range 60 {
		fmt.Fprintf(&wide, "col%d,", c)
	}
	wide.WriteString("last\n")
	for r := range 150 {
		fmt.Fprintf(&wide, "<b>%d</b>,%s\n", r, strings.Repeat("x", 300))
	}
	bigLog := strings.Repeat("a log line <i>\n", 40_000) // 600,000 bytes
	// 2-byte characters after one byte: the 256 KiB cut falls inside one.
	bigUTF8 := "a" + strings.Repeat("é", 200_000)
	bigCSV := "n,v\n" + strings.Repeat("1,2\n", 100_000)
	png := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), make([]byte, 64)...)
	u.upload(th,
		upload{name: "notes.md", data: []byte("# Plan\n\n<script>alert(1)</script>\n\n[click](javascript:alert(1))\n\n```go\nfunc main() {}\n```\n")},
		upload{name: "drawing.svg", data: []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(1)</script></svg>`)},
		upload{name: "page.html", data: []byte(`<html><body><script>alert(1)</script><img src=x onerror=alert(1)></body></html>`)},
		upload{name: "main.go", data: []byte("package main\n\nfunc main() {}\n")},
		upload{name: "wide.csv", data: []byte(wide.String())},
		upload{name: "bad.csv", data: []byte("a,\"b\nc,d\n")},
		upload{name: "tabs.tsv", data: []byte("name\tcount\napples\t3\n")},
		upload{name: "readme.txt", data: []byte("plain <b>text</b> & more\n")},
		upload{name: "pic.png", data: png},
		upload{name: "report.pdf", data: append([]byte("%PDF-1.4\n"), make([]byte, 1<<20)...)},
		upload{name: "blob.bin", data: []byte{0x00, 0xff, 0xfe, 'x', 0x01}},
		upload{name: "big.log", data: []byte(bigLog)},
		upload{name: "big utf8.txt", data: []byte(bigUTF8)},
		upload{name: "big.csv", data: []byte(bigCSV)},
		upload{name: "empty.txt"},
	)
	const cut = 256 << 10

	for _, c := range []struct {
		name, kind string
		truncated  bool
		check      func(t *testing.T, root *html.Node, text string)
	}{
		{"notes.md", "markdown", false, func(t *testing.T, root *html.Node, text string) {
			if len(findAll(root, byTagName("h1"))) != 1 || len(findAll(root, func(n *html.Node) bool { return hasClass(n, "chroma") })) != 1 {
				t.Errorf("no heading or highlighted block")
			}
			if !strings.Contains(text, "<script>alert(1)</script>") {
				t.Errorf("raw HTML not shown as text: %q", text)
			}
		}},
		{"drawing.svg", "code", false, func(t *testing.T, root *html.Node, text string) {
			if len(findAll(root, byTagName("svg"))) != 0 || !strings.Contains(text, `<svg xmlns=`) {
				t.Errorf("an SVG not shown as its source: %q", text)
			}
			if len(findAll(root, func(n *html.Node) bool { return n.Data == "span" && attrOf(n, "class") != "" })) == 0 {
				t.Errorf("an SVG's source not highlighted")
			}
		}},
		{"page.html", "code", false, func(t *testing.T, root *html.Node, text string) {
			if len(findAll(root, byTagName("body"))) != 0 || !strings.Contains(text, "<img src=x onerror=alert(1)>") {
				t.Errorf("HTML not shown as its source: %q", text)
			}
		}},
		{"main.go", "code", false, func(t *testing.T, root *html.Node, text string) {
			if code := findAll(root, byTagName("code")); len(code) != 1 || attrOf(code[0], "class") != "language-go" || !strings.Contains(text, "func main() {}") {
				t.Errorf("Go source: %q", text)
			}
		}},
		{"wide.csv", "csv", false, func(t *testing.T, root *html.Node, text string) {
			ths, trs := findAll(root, byTagName("th")), findAll(root, func(n *html.Node) bool { return n.Data == "tr" && n.Parent.Data == "tbody" })
			if len(ths) != 50 || textOfNode(ths[0]) != "col0" || len(trs) != 100 {
				t.Fatalf("%d header cells, %d rows; want 50 and 100", len(ths), len(trs))
			}
			td := findAll(trs[0], byTagName("td"))
			if textOfNode(td[0]) != "<b>0</b>" || utf8.RuneCountInString(textOfNode(td[1])) != 201 || !strings.HasSuffix(textOfNode(td[1]), "…") {
				t.Errorf("cells %q, %d characters", textOfNode(td[0]), utf8.RuneCountInString(textOfNode(td[1])))
			}
			if !strings.Contains(text, "First 100 of 150 rows, first 50 of 61 columns") {
				t.Errorf("no note of what was cut: %q", text[len(text)-200:])
			}
		}},
		{"bad.csv", "text", false, func(t *testing.T, root *html.Node, text string) {
			if len(findAll(root, byTagName("pre"))) != 1 || !strings.Contains(text, `a,"b`) {
				t.Errorf("bad CSV not as text: %q", text)
			}
		}},
		{"tabs.tsv", "csv", false, func(t *testing.T, root *html.Node, text string) {
			if ths := findAll(root, byTagName("th")); len(ths) != 2 || textOfNode(ths[1]) != "count" || strings.Contains(text, "rows") {
				t.Errorf("TSV: %q", text)
			}
		}},
		{"readme.txt", "text", false, func(t *testing.T, root *html.Node, text string) {
			if len(findAll(root, byTagName("b"))) != 0 || !strings.Contains(text, "plain <b>text</b> & more") {
				t.Errorf("text: %q", text)
			}
		}},
		{"pic.png", "image", false, func(t *testing.T, root *html.Node, _ string) {
			img := findAll(root, byTagName("img"))
			if len(img) != 1 || attrOf(img[0], "src") != "/api/threads/"+th+"/files/uploads/pic.png" || attrOf(img[0], "alt") != "uploads/pic.png" {
				t.Errorf("image: %v", img)
			}
		}},
		{"report.pdf", "pdf", false, func(t *testing.T, root *html.Node, text string) {
			if !strings.Contains(text, "PDF document · 1.0 MB") {
				t.Errorf("PDF: %q", text)
			}
		}},
		{"blob.bin", "binary", false, func(t *testing.T, root *html.Node, text string) {
			if !strings.Contains(text, "No preview for this type") {
				t.Errorf("binary: %q", text)
			}
		}},
		{"big.log", "text", true, func(t *testing.T, root *html.Node, text string) {
			pre := findAll(root, byTagName("pre"))
			if len(pre) != 1 || len(textOfNode(pre[0])) != cut || !strings.Contains(text, "Showing the first 256.0 KB of 585.9 KB") {
				t.Errorf("a cut log: %d bytes shown, %q", len(textOfNode(pre[0])), text[:80])
			}
		}},
		{"big utf8.txt", "text", true, func(t *testing.T, root *html.Node, _ string) {
			if shown := textOfNode(findAll(root, byTagName("pre"))[0]); len(shown) != cut-1 || !utf8.ValidString(shown) {
				t.Errorf("a text cut inside a character: %d bytes shown", len(shown))
			}
		}},
		{"big.csv", "csv", true, func(t *testing.T, root *html.Node, text string) {
			if !strings.Contains(text, "First 100 of at least ") {
				t.Errorf("a cut CSV: %q", text[len(text)-120:])
			}
		}},
		{"empty.txt", "text", false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := "uploads/" + c.name
			r, root := previewOf(t, u, th, p)
			if h := r.header; !strings.HasPrefix(h.Get("Content-Type"), "text/html") || h.Get("Cache-Control") != "no-store" ||
				!strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") {
				t.Errorf("headers: %v", h)
			}
			info, _ := os.Stat(filepath.Join(a.workspace(th), p))
			if got := [4]string{attrOf(root, "data-kind"), attrOf(root, "data-path"), attrOf(root, "data-size"), attrOf(root, "data-truncated")}; got != [4]string{c.kind, p, fmt.Sprint(info.Size()), fmt.Sprint(c.truncated)} {
				t.Errorf("root data: %q, want %s %s %d %v", got, c.kind, p, info.Size(), c.truncated)
			}
			dl := findAll(root, func(n *html.Node) bool { return n.Data == "a" && hasClass(n, "file-download") })
			if len(dl) != 1 || attrOf(dl[0], "href") != "/api/threads/"+th+"/files/"+(&url.URL{Path: p}).EscapedPath() || !hasAttr(dl[0], "download") {
				t.Errorf("download link: %v", dl)
			}
			for _, n := range findAll(root, func(*html.Node) bool { return true }) {
				if n.Data == "script" || n.Data == "svg" || n.Data == "iframe" || n.Data == "object" {
					t.Errorf("a <%s> element in the preview", n.Data)
				}
				for _, at := range n.Attr {
					if strings.HasPrefix(at.Key, "on") || at.Key == "style" || strings.HasPrefix(strings.ToLower(strings.TrimSpace(at.Val)), "javascript:") {
						t.Errorf("<%s %s=%q> in the preview", n.Data, at.Key, at.Val)
					}
				}
			}
			if c.check != nil {
				c.check(t, root, textOfNode(root))
			}
		})
	}
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// TestFilePreviewRefusals: a preview reaches a file as its download does:
// a folder, a missing file or a FIFO is 404 (at once), a link out 403,
// a path with ".." 400.
func TestFilePreviewRefusals(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("refusals")
	u.upload(th, upload{name: "x.txt", data: []byte("x")})
	ws := a.workspace(th)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path   string
		status int
	}{
		{"uploads", 404},
		{"uploads/nope.txt", 404},
		{"pipe", 404},
		{"out/secret.txt", 403},
		{"uploads/%2e%2e/%2e%2e/x", 400},
	} {
		done := make(chan response, 1)
		go func() { done <- u.do("GET", "/threads/"+th+"/preview/"+c.path, nil) }()
		select {
		case r := <-done:
			if r.status != c.status || strings.Contains(string(r.body), "SECRET") {
				t.Errorf("preview %s: %d, want %d", c.path, r.status, c.status)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("preview %s hangs", c.path)
		}
	}
}
