package auth

import (
	"context"
	_ "embed"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"herd/models"
)

// Password rules (docs/API.md). bcrypt reads at most 72 bytes and
// x/crypto refuses more, so a longer password is refused as weak rather
// than cut short or failing as an internal error.
const (
	MinPassword      = 12 // characters
	MaxPasswordBytes = 72
)

// commonPasswordList is SecLists' top 10,000 of Mark Burnett's corpus
// (server/auth/passwords/README.md says where from and under which licence).
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

// CheckPassword applies the rules to a new password: nil, or a
// *PasswordError saying which it breaks.
func CheckPassword(pw string) error {
	switch {
	case utf8.RuneCountInString(pw) < MinPassword:
		return weakPassword("the password needs at least %d characters", MinPassword)
	case len(pw) > MaxPasswordBytes:
		return weakPassword("the password may have at most %d bytes (bcrypt's limit; fewer characters when they are not ASCII)", MaxPasswordBytes)
	case isCommonPassword(pw):
		return weakPassword("this password is one of the most common ones; choose another")
	}
	return nil
}

// CheckEmail is nil for an email a new account may have, else
// ErrInvalidEmail.
func CheckEmail(email string) error {
	e := strings.TrimSpace(email)
	at := strings.LastIndexByte(e, '@')
	if at < 1 || at == len(e)-1 || len(e) > 254 || strings.ContainsAny(e, " \t\r\n<>\"") {
		return ErrInvalidEmail
	}
	return nil
}

// HashPassword is the bcrypt hash of pw at the service's cost.
func (s *Service) HashPassword(pw string) (string, error) {
	b, err := bcrypt.GenerateFromPassword([]byte(pw), s.bcryptCost)
	return string(b), err
}

// StoreUser stores a user with the hash of password (see
// models.Store.CreateUser for role and onlyIfEmpty).
func (s *Service) StoreUser(ctx context.Context, email, password, role string, onlyIfEmpty bool) (*models.User, error) {
	hash, err := s.HashPassword(password)
	if err != nil {
		return nil, err
	}
	return s.store.CreateUser(ctx, email, hash, role, onlyIfEmpty)
}
