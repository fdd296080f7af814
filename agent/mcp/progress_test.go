package mcp

import (
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestProgressText(t *testing.T) {
	tests := []struct {
		name string
		p    sdk.ProgressNotificationParams
		want string
	}{
		{name: "of a total", p: sdk.ProgressNotificationParams{Progress: 3, Total: 10}, want: "search: 3 of 10"},
		{name: "no total", p: sdk.ProgressNotificationParams{Progress: 0.5}, want: "search: 0.5"},
		{name: "message on one line", p: sdk.ProgressNotificationParams{Progress: 1, Total: 2, Message: "reading\n  page\t2"}, want: "search: 1 of 2 · reading page 2"},
		{name: "long message cut", p: sdk.ProgressNotificationParams{Progress: 1, Message: strings.Repeat("é", 300)}, want: "search: 1 · " + strings.Repeat("é", maxProgressText-len([]rune("search: 1 · "))-1) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := progressText("search", &tt.p); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
