package demo

import (
	"testing"
)

func TestTokens(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
	}{
		{"empty", "", 0},
		{"words and punctuation", "hello, world!", 4},
		{"digits join words", "x1 y2", 2},
		{"hyphen splits", "a-b", 3},
		{"ideographs count one each", "日本語", 3},
		{"json", `{"a":"b"}`, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tokens(tt.in); got != tt.want {
				t.Errorf("tokens(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	for in, want := range map[string]string{
		"alpha":                        "alpha",
		"Run `date` and `uname -s`":    "Run `date` and `uname -s`",
		"SQLite  WAL mode\nmore lines": "SQLite WAL mode",
		"check the README, then fix every typo in it":      "check the README, then fix…",
		"run `go test ./...` and then report the failures": "run `go test ./...` and…",
		"please run `go test -race -count=1 ./...` now":    "please run go test -race…",
		"Über größe: ÄÖÜ stays as written":                 "Über größe: ÄÖÜ stays as written",
	} {
		if got := describe(in); got != want {
			t.Errorf("describe(%q) = %q, want %q", in, got, want)
		}
	}
}
