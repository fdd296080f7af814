package server

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// titleRunes is how long a title made from a message may be.
const titleRunes = 60

// titleFrom makes a thread's title from its first message: the first line
// with words, without Markdown's markers (headings, list bullets,
// emphasis, code ticks) or a trailing colon, cut at a word boundary.
// "Four jobs:\n- alpha" is "Four jobs"; a message of only symbols gives "".
func titleFrom(content string) string {
	for line := range strings.Lines(content) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~") {
			continue
		}
		line = strings.TrimLeft(line, "#>-*+ \t")
		line = strings.NewReplacer("`", "", "*", "", "__", "").Replace(line)
		line = strings.Join(strings.Fields(line), " ")
		line = strings.TrimRight(line, ":;,")
		if strings.IndexFunc(line, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) < 0 {
			continue
		}
		return cutWords(line, titleRunes)
	}
	return ""
}

// cutWords cuts s to at most n runes, at a space when there is one in
// the second half, with an ellipsis.
func cutWords(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	cut := string(r[:n-1])
	if r[n-1] != ' ' {
		if i := strings.LastIndexByte(cut, ' '); i > len(cut)/2 {
			cut = cut[:i]
		}
	}
	return strings.TrimRight(cut, " ,;:.") + "…"
}
