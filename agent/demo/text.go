package demo

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"herd/agent"
)

var inlineCode = regexp.MustCompile("`([^`\n]+)`")

// command returns the first inline code span of s: the demo's
// signal that s asks for a shell command.
func command(s string) (string, bool) {
	if !strings.Contains(s, "`") {
		return "", false
	}
	for _, m := range inlineCode.FindAllStringSubmatch(s, -1) {
		if cmd := strings.TrimSpace(m[1]); cmd != "" {
			return cmd, true
		}
	}
	return "", false
}

// describe makes a task's card title from its text in the user's own
// words and case: the first line whole when it is short, else its first
// five words and an ellipsis. A cut that splits a `code span` drops the
// backticks, so no stray one shows in the title.
func describe(item string) string {
	first, _, _ := strings.Cut(item, "\n")
	words := strings.Fields(first)
	if len(words) <= 6 {
		return strings.Join(words, " ")
	}
	title := strings.Join(words[:5], " ")
	if strings.Count(title, "`")%2 == 1 {
		title = strings.ReplaceAll(title, "`", "")
	}
	return strings.TrimRight(title, ",;:") + "…"
}

// slug names a subagent's notes file after its topic.
func slug(topic string) string {
	var b strings.Builder
	words := 0
	for _, f := range strings.FieldsFunc(strings.ToLower(topic), func(r rune) bool { return !wordRune(r) }) {
		if words == 6 || utf8.RuneCountInString(b.String())+utf8.RuneCountInString(f) > 40 {
			break
		}
		if words > 0 {
			b.WriteByte('-')
		}
		b.WriteString(f)
		words++
	}
	if b.Len() == 0 {
		return "task"
	}
	return b.String()
}

func wordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func hasWord(s string) bool { return strings.IndexFunc(s, wordRune) >= 0 }

func firstLine(s string) string {
	for line := range strings.Lines(s) {
		if t := strings.TrimSpace(line); t != "" {
			return t
		}
	}
	return ""
}

func firstOf(msgs []agent.Message, typ string) string {
	for _, m := range msgs {
		if m.Type == typ {
			return m.Content
		}
	}
	return ""
}

func lastOf(msgs []agent.Message, typ string) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Type == typ {
			return msgs[i].Content
		}
	}
	return ""
}

func count(msgs []agent.Message, typ string) int {
	n := 0
	for _, m := range msgs {
		if m.Type == typ {
			n++
		}
	}
	return n
}

// clip cuts s to at most n runes, marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// oneLine flattens s to one clipped line for a bullet, dropping code fence
// markers that would otherwise swallow the rest of the list.
func oneLine(s string, n int) string {
	var words []string
	for line := range strings.Lines(s) {
		if t := strings.TrimSpace(line); !strings.HasPrefix(t, "```") {
			words = append(words, strings.Fields(t)...)
		}
	}
	return clip(strings.Join(words, " "), n)
}

// codeBlock fences s with more backticks than it contains in a row, so
// tool output cannot close the block early.
func codeBlock(s string) string {
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	return fence + "\n" + strings.TrimRight(s, "\n") + "\n" + fence
}

// chunks splits s into word-sized pieces, each word with the space
// after it, so the pieces concatenate back to s exactly.
func chunks(s string) []string {
	var chunks []string
	start, inSpace := 0, false
	for i, r := range s {
		space := unicode.IsSpace(r)
		if inSpace && !space {
			chunks = append(chunks, s[start:i])
			start = i
		}
		inSpace = space
	}
	if start < len(s) {
		chunks = append(chunks, s[start:])
	}
	return chunks
}

// tokens counts tokens the way Provider documents: runs of letters and
// digits, CJK ideographs and other non-space characters count one each.
func tokens(s string) int64 {
	var n int64
	inWord := false
	for _, r := range s {
		word := wordRune(r) && (r < utf8.RuneSelf || !unicode.Is(unicode.Han, r))
		if word && !inWord || !word && !unicode.IsSpace(r) {
			n++
		}
		inWord = word
	}
	return n
}
