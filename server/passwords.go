package server

import (
	_ "embed"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Password rules (docs/API.md). bcrypt reads at most 72 bytes and
// x/crypto refuses more, so a longer password is refused with a clear 422
// rather than cut short or failing as a 500.
const (
	minPassword      = 12 // characters
	maxPasswordBytes = 72
)

// commonPasswordList is SecLists' top 10,000 of Mark Burnett's corpus
// (server/passwords/README.md says where from and under which licence).
//
//go:embed passwords/common-10k.txt
var commonPasswordList string

var commonPasswords = sync.OnceValue(func() map[string]bool {
	set := make(map[string]bool, 10000)
	for line := range strings.Lines(commonPasswordList) {
		if w := strings.ToLower(strings.TrimSpace(line)); w != "" {
			set[w] = true
		}
	}
	return set
})

// isCommonPassword reports whether pw is on the list, in any case, or is a
// listed word with only digits and symbols before or after it: at twelve
// characters and more the list's words mostly appear padded
// (iloveyou2024!, 123456football).
func isCommonPassword(pw string) bool {
	p := strings.ToLower(pw)
	set := commonPasswords()
	if set[p] {
		return true
	}
	core := strings.TrimFunc(p, func(r rune) bool { return !unicode.IsLetter(r) })
	return core != "" && core != p && set[core]
}

// checkPassword applies the rules to a new password.
func checkPassword(pw string) *apiError {
	switch {
	case utf8.RuneCountInString(pw) < minPassword:
		return errWeakPassword("the password needs at least %d characters", minPassword)
	case len(pw) > maxPasswordBytes:
		return errWeakPassword("the password may have at most %d bytes (bcrypt's limit; fewer characters when they are not ASCII)", maxPasswordBytes)
	case isCommonPassword(pw):
		return errWeakPassword("this password is one of the most common ones; choose another")
	}
	return nil
}

func errWeakPassword(format string, a ...any) *apiError {
	e := errUnprocessable(format, a...)
	e.Code = "weak_password"
	return e
}
