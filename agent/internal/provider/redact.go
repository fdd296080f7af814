package provider

import "strings"

// minSecretLen is the shortest api_key treated as a secret. Shorter keys
// (x, ollama, EMPTY) are placeholders for servers that check nothing, and
// replacing their letters would mangle ordinary words.
const minSecretLen = 8

// placeholderKeys are keys of at least minSecretLen characters that local
// servers' docs tell users to set; they are no secret.
var placeholderKeys = map[string]bool{
	"sk-no-key-required": true, // llama.cpp server
	"not-needed":         true, // LM Studio examples
	"lm-studio":          true,
	"token-abc123":       true, // vLLM docs
	"dummy-key":          true,
	"anything":           true,
}

// Redact replaces each whole-token occurrence of key in text with
// [redacted]: one not preceded or followed by a letter, digit, - or _, so
// that a key is never found inside a longer word. It reports whether
// there was one; placeholder keys are left alone.
func Redact(text, key string) (string, bool) {
	if len(key) < minSecretLen || placeholderKeys[strings.ToLower(key)] {
		return text, false
	}
	var b strings.Builder
	found := false
	for rest := text; ; {
		i := strings.Index(rest, key)
		if i < 0 {
			b.WriteString(rest)
			break
		}
		end := i + len(key)
		whole := (i == 0 || !isTokenByte(rest[i-1])) && (end == len(rest) || !isTokenByte(rest[end]))
		b.WriteString(rest[:i])
		if whole {
			b.WriteString("[redacted]")
			found = true
		} else {
			b.WriteString(key)
		}
		rest = rest[end:]
	}
	return b.String(), found
}

func isTokenByte(c byte) bool {
	return c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// scrubbedError replaces an error's text while keeping its chain for
// errors.Is and errors.As.
type scrubbedError struct {
	text string
	err  error
}

func (e *scrubbedError) Error() string { return e.text }
func (e *scrubbedError) Unwrap() error { return e.err }
