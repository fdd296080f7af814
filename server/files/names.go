package files

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// maxNameBytes bounds an uploaded file's name: under the 255 bytes a
// name may have on Linux, Windows and macOS, with room for a clash's
// " (9999)".
const maxNameBytes = 200

// maxExtBytes is the longest extension a cut name keeps whole.
const maxExtBytes = 16

// fallbackName names an upload whose name has nothing left.
const fallbackName = "file"

// CleanName turns the name a client gave an uploaded file into one that
// is safe in the workspace and wherever the file goes next (a zip opened
// on Windows or macOS): its last non-empty part between "/" or "\"; invalid
// UTF-8 as "_"; no control, format (bidirectional overrides, zero-width
// characters), separator or other invisible character; "_" for the
// characters Windows reserves (<>:"|?*); other spaces as " "; NFC (macOS
// sends names decomposed); no leading dot or space (no hidden file, no
// ".", ".."), no trailing dot or space; a Windows device name (CON,
// NUL, COM1 …) prefixed with "_"; at most maxNameBytes, cut in the stem at
// a character's boundary so the extension stays; "file" when nothing is
// left.
func CleanName(raw string) string {
	raw = strings.TrimRight(raw, `/\`)
	if i := strings.LastIndexAny(raw, `/\`); i >= 0 {
		raw = raw[i+1:]
	}
	raw = strings.ToValidUTF8(raw, "_")
	name := norm.NFC.String(strings.Map(cleanRune, raw))
	name = strings.TrimLeft(name, ". ")
	name = trimEnd(cutName(name))
	if name == "" {
		return fallbackName
	}
	if reservedOnWindows(name) {
		name = trimEnd(cutUTF8("_"+name, maxNameBytes))
	}
	return name
}

// cleanRune maps one character of a name: -1 drops it.
func cleanRune(r rune) rune {
	switch {
	case strings.ContainsRune(`<>:"|?*`, r):
		return '_'
	case r == ' ':
		return r
	case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Other_Default_Ignorable_Code_Point, unicode.Noncharacter_Code_Point):
		return -1
	case unicode.IsSpace(r):
		return ' '
	}
	return r
}

// trimEnd drops the trailing dots and spaces Windows would drop.
func trimEnd(name string) string { return strings.TrimRight(name, ". ") }

// cutName bounds name to maxNameBytes, cutting the stem and keeping a
// short extension.
func cutName(name string) string {
	if len(name) <= maxNameBytes {
		return name
	}
	stem, ext := splitExt(name)
	if len(ext) > maxExtBytes {
		stem, ext = name, ""
	}
	return cutUTF8(stem, maxNameBytes-len(ext)) + ext
}

// cutUTF8 is s's longest prefix of at most n bytes that ends on a
// character's boundary.
func cutUTF8(s string, n int) string {
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:min(n, len(s))]
}

// splitExt splits name before its extension, ".tar.gz" and the like
// counted whole, so that a clash reads "archive (2).tar.gz".
func splitExt(name string) (stem, ext string) {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 {
		return name, ""
	}
	if j := strings.LastIndexByte(name[:i], '.'); j > 0 && strings.EqualFold(name[j:i], ".tar") {
		i = j
	}
	return name[:i], name[i:]
}

// suffixed is the n-th name tried for name when it clashes: "report.pdf",
// then "report (2).pdf", "report (3).pdf" ….
func suffixed(name string, n int) string {
	if n <= 1 {
		return name
	}
	stem, ext := splitExt(name)
	return fmt.Sprintf("%s (%d)%s", stem, n, ext)
}

// reservedOnWindows reports a name Windows takes for a device whatever
// its extension: CON, PRN, AUX, NUL, COM0-9, LPT0-9 (the superscript
// digits too), CONIN$, CONOUT$, in any case.
func reservedOnWindows(name string) bool {
	stem := name
	if i := strings.IndexByte(stem, '.'); i >= 0 {
		stem = stem[:i]
	}
	stem = strings.ToUpper(strings.TrimRight(stem, " "))
	switch stem {
	case "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$":
		return true
	}
	if len(stem) < 4 || (stem[:3] != "COM" && stem[:3] != "LPT") {
		return false
	}
	switch stem[3:] {
	case "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "¹", "²", "³":
		return true
	}
	return false
}
