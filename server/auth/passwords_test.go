package auth

import (
	"errors"
	"strings"
	"testing"
)

func TestPasswordRules(t *testing.T) {
	cases := []struct {
		pw   string
		want string // "" = accepted, else part of the message
	}{
		{"eleven char", "at least 12"},
		{"éééééééééééé", ""}, // 12 characters, 24 bytes
		{strings.Repeat("a", 72), ""},
		{strings.Repeat("b", 73), "at most 72 bytes"},
		{strings.Repeat("é", 37), "at most 72 bytes"}, // 37 characters, 74 bytes
		{"password1234", "most common"},
		{"PASSWORD1234", "most common"},
		{"Iloveyou2024!", "most common"},
		{"2024!football", "most common"},
		{"1qaz2wsx3edc", "most common"}, // listed as is
		{"qwertyuiop123", "most common"},
		{"tall ocean lantern", ""},
		{"football is a sport", ""},
	}
	for _, c := range cases {
		err := CheckPassword(c.pw)
		var pe *PasswordError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q refused: %s", c.pw, err)
		case c.want != "" && (!errors.As(err, &pe) || !strings.Contains(pe.Reason, c.want) || !errors.Is(err, ErrWeakPassword)):
			t.Errorf("%q: %v, want an ErrWeakPassword saying %q", c.pw, err, c.want)
		}
	}
	// 10,000 lines; fewer once case is folded (Password, PASSWORD).
	if n, lines := len(commonPasswords()), strings.Count(commonPasswordList, "\n"); lines != 10000 || n < 9900 {
		t.Errorf("the embedded list has %d lines, %d passwords; want 10000 lines", lines, n)
	}
}
