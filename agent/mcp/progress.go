package mcp

import (
	"fmt"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// watchProgress routes the progress notifications of one call, by a
// token unique to herd's process, to show as "tool: 3 of 10".
func (s *Servers) watchProgress(tool string, show func(string)) string {
	token := "herd-" + strconv.FormatUint(s.tokens.Add(1), 10)
	s.progress.Store(token, func(p *sdk.ProgressNotificationParams) { show(progressText(tool, p)) })
	return token
}

// onProgress routes a notifications/progress of any server (observe).
func (s *Servers) onProgress(p *sdk.ProgressNotificationParams) {
	if f, ok := s.progress.Load(fmt.Sprint(p.ProgressToken)); ok {
		f.(func(*sdk.ProgressNotificationParams))(p)
	}
}

// maxProgressText bounds the status line a server's message may fill.
const maxProgressText = 160

func progressText(tool string, p *sdk.ProgressNotificationParams) string {
	n := strconv.FormatFloat(p.Progress, 'f', -1, 64)
	if p.Total > 0 {
		n += " of " + strconv.FormatFloat(p.Total, 'f', -1, 64)
	}
	text := tool + ": " + n
	if m := strings.Join(strings.Fields(p.Message), " "); m != "" {
		text += " · " + m
	}
	if r := []rune(text); len(r) > maxProgressText {
		text = string(r[:maxProgressText-1]) + "…"
	}
	return text
}
