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
