package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"

	"herd/agent"
	"herd/models"
	"herd/server/hub"
)

// apiThreadExport downloads a whole thread (GET /api/threads/{id}/export
// ?format=markdown|json): Markdown to read or paste elsewhere, JSON with
// every message as the API gives it. The token gate applies as to the
// thread's JSON.
func (s *Server) apiThreadExport(c echo.Context) error {
	t, err := s.ownThread(c)
	if err != nil {
		return err
	}
	format := c.QueryParam("format")
	if format == "" {
		format = "markdown"
	}
	if format != "markdown" && format != "json" {
		return errUnprocessable("format must be markdown or json, got %q", format)
	}
	msgs, err := s.store.Messages(c.Request().Context(), t.ID)
	if err == nil {
		msgs, err = s.shownMessages(c.Request().Context(), t.ID, msgs) // as the thread shows them
	}
	if err != nil {
		return err
	}
	name := exportName(t)
	if format == "json" {
		r := s.redaction()
		out := make([]hub.MessageJSON, len(msgs))
		for i := range msgs {
			out[i] = r.Message(&msgs[i], "")
		}
		c.Response().Header().Set(echo.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="%s.json"`, name))
		return c.JSONPretty(http.StatusOK, map[string]any{
			"thread": newThreadJSON(t), "messages": out, "exported_at": s.now().UTC(),
		}, "  ")
	}
	c.Response().Header().Set(echo.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="%s.md"`, name))
	return c.Blob(http.StatusOK, "text/markdown; charset=utf-8", []byte(s.threadMarkdown(t, msgs)))
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// exportName is a download's file name: the title's safe characters, or
// the thread's id.
func exportName(t *models.Thread) string {
	n := strings.Trim(unsafeName.ReplaceAllString(t.Title, "-"), "-.")
	if len(n) > 60 {
		n = n[:60]
	}
	if n == "" {
		n = "thread-" + t.ID
	}
	return n
}

// threadMarkdown is the conversation as Markdown: each message under a
// heading saying who wrote it and when, a task's result quoted under the
// answer that delegated it, other tools' output in code blocks.
func (s *Server) threadMarkdown(t *models.Thread, msgs []models.Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n_Exported from herd on %s._\n", threadItem(t).Title, s.now().UTC().Format("2 January 2006, 15:04 UTC"))
	tasks := map[string]agent.ToolCall{}
	for _, m := range msgs {
		when := m.CreatedAt.UTC().Format("2006-01-02 15:04")
		switch m.Type {
		case agent.TypeHuman:
			fmt.Fprintf(&b, "\n## You · %s\n\n%s\n", when, strings.TrimSpace(m.Content))
		case agent.TypeAI:
			who := "Assistant"
			if l, _ := s.labelOf(m.ModelName); l != "" {
				who += " (" + l + ")"
			}
			fmt.Fprintf(&b, "\n## %s · %s\n", who, when)
			if text := strings.TrimSpace(m.Content); text != "" {
				fmt.Fprintf(&b, "\n%s\n", text)
			}
			var calls []agent.ToolCall
			_ = json.Unmarshal(m.ToolCalls, &calls) // no calls reads as none
			for _, call := range calls {
				tasks[call.ID] = call
			}
		case agent.TypeTool:
			if m.Name == agent.ToolTask {
				var args struct {
					Description  string `json:"description"`
					SubagentType string `json:"subagent_type"`
				}
				_ = json.Unmarshal(tasks[m.ToolCallID].Args, &args)
				fmt.Fprintf(&b, "\n> **Subagent: %s** (%s)\n>\n%s\n", orTask(args.Description), args.SubagentType, quote(m.Content))
			} else {
				fmt.Fprintf(&b, "\n**Tool `%s`:**\n\n%s\n", m.Name, fenced(m.Content))
			}
		}
	}
	return b.String()
}

func orTask(description string) string {
	if description == "" {
		return "task"
	}
	return description
}

// quote puts text in a Markdown blockquote.
func quote(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight("> "+l, " ")
	}
	return strings.Join(lines, "\n")
}

var backticks = regexp.MustCompile("`{3,}")

// fenced puts text in a code block whose fence is longer than any run of
// backticks inside it, so the text cannot close it.
func fenced(text string) string {
	fence := "```"
	for _, run := range backticks.FindAllString(text, -1) {
		if len(run) >= len(fence) {
			fence = strings.Repeat("`", len(run)+1)
		}
	}
	return fence + "\n" + strings.TrimRight(text, "\n") + "\n" + fence
}
