package files

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// hostileNames are 40 names a client may give an upload, each with what
// it becomes: traversal, absolute and Windows paths, hidden and dot
// names, NUL and control characters, bidirectional and invisible
// characters, Windows' reserved names and characters, invalid UTF-8,
// decomposed Unicode, and names too long for a file system.
var hostileNames = []struct{ raw, want string }{
	{"report.pdf", "report.pdf"},
	{"../../etc/passwd", "passwd"},
	{`..\..\windows\system32\cmd.exe`, "cmd.exe"},
	{"/etc/shadow", "shadow"},
	{`C:\Users\me\notes.txt`, "notes.txt"},
	{"a/b/", "b"},
	{"uploads/../../../x.txt", "x.txt"},
	{".bashrc", "bashrc"},
	{"..", fallbackName},
	{".", fallbackName},
	{"...", fallbackName},
	{"  .hidden ", "hidden"},
	{"", fallbackName},
	{"file\x00name.txt", "filename.txt"},
	{"line\nbreak\r.txt", "linebreak.txt"},
	{"tab\there.txt", "tabhere.txt"},
	{"del\x7f.txt", "del.txt"},
	{"c1\u0085\u009b.txt", "c1.txt"},
	{"evil\u202Etxt.exe", "eviltxt.exe"},
	{"zero\u200Bwidth\u200D.md", "zerowidth.md"},
	{"bom\uFEFF.txt", "bom.txt"},
	{"line\u2028sep\u2029.txt", "linesep.txt"},
	{"\u3164\u3164.txt", "txt"},
	{"nbsp\u00a0name\u3000.txt", "nbsp name .txt"},
	{"\xff\xfeinvalid.txt", "_invalid.txt"},
	{"\ufdd0non\uffff.txt", "non.txt"},
	{"e\u0301te\u0301.txt", "\u00e9t\u00e9.txt"},
	{"CON", "_CON"},
	{"con.txt", "_con.txt"},
	{"Nul.tar.gz", "_Nul.tar.gz"},
	{"COM1", "_COM1"},
	{"lpt9.log", "_lpt9.log"},
	{"COM\u00b9.txt", "_COM\u00b9.txt"},
	{"CONIN$", "_CONIN$"},
	{"AUX .txt", "_AUX .txt"},
	{"<script>alert(1)</script>.html", "script_.html"},
	{`a:b|c*d"e?.txt`, "a_b_c_d_e_.txt"},
	{"trailing. . .", "trailing"},
	{strings.Repeat("a", 300) + ".txt", strings.Repeat("a", maxNameBytes-4) + ".txt"},
	{strings.Repeat("\u00e9", 150) + ".tar.gz", strings.Repeat("\u00e9", (maxNameBytes-7)/2) + ".tar.gz"},
}

func TestCleanName(t *testing.T) {
	if len(hostileNames) < 40 {
		t.Fatalf("%d hostile names, want 40", len(hostileNames))
	}
	for _, c := range hostileNames {
		if got := CleanName(c.raw); got != c.want {
			t.Errorf("CleanName(%q) = %q, want %q", c.raw, got, c.want)
		}
		checkSafeName(t, c.raw, CleanName(c.raw))
	}
}

// checkSafeName fails t unless name, made of raw, is safe anywhere.
func checkSafeName(t *testing.T, raw, name string) {
	t.Helper()
	switch {
	case name == "" || name == "." || name == "..":
		t.Errorf("%q became %q", raw, name)
	case !utf8.ValidString(name):
		t.Errorf("%q became %q, not UTF-8", raw, name)
	case len(name) > maxNameBytes:
		t.Errorf("%q became %d bytes, over %d", raw, len(name), maxNameBytes)
	case strings.ContainsAny(name, "/\\<>:\"|?*"):
		t.Errorf("%q became %q, with a separator or a character Windows reserves", raw, name)
	case strings.HasPrefix(name, ".") || strings.HasPrefix(name, " ") || strings.HasSuffix(name, ".") || strings.HasSuffix(name, " "):
		t.Errorf("%q became %q, hidden or trimmed by Windows", raw, name)
	case reservedOnWindows(name):
		t.Errorf("%q became %q, a Windows device", raw, name)
	case strings.IndexFunc(name, func(r rune) bool { return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) }) >= 0:
		t.Errorf("%q became %q, with a control or invisible character", raw, name)
	case CleanName(name) != name:
		t.Errorf("%q became %q, which cleans again to %q", raw, name, CleanName(name))
	}
}

func FuzzCleanName(f *testing.F) {
	for _, c := range hostileNames {
		f.Add(c.raw)
	}
	f.Fuzz(func(t *testing.T, raw string) { checkSafeName(t, raw, CleanName(raw)) })
}

func TestSuffixed(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
		want string
	}{
		{"report.pdf", 1, "report.pdf"},
		{"report.pdf", 2, "report (2).pdf"},
		{"archive.tar.gz", 3, "archive (3).tar.gz"},
		{"README", 2, "README (2)"},
		{"_CON.txt", 2, "_CON (2).txt"},
	} {
		if got := suffixed(c.name, c.n); got != c.want {
			t.Errorf("suffixed(%q, %d) = %q, want %q", c.name, c.n, got, c.want)
		}
	}
}
