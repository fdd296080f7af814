package views

import (
	"html"
	"strings"
	"time"
)

// SearchResult is a message that matched a search of message text
// (docs/API.md "Search"): where it is and a snippet of it.
type SearchResult struct {
	ThreadID    string
	ThreadTitle string
	// Href is the message in its thread: /threads/{id}#msg-{id}, or the
	// card whose result it is (#card-{run}-{task}).
	Href string
	// Card is set for a card's result (a task's ToolMessage).
	Card      bool
	CreatedAt time.Time
	Snippet   []SnippetPart
}

// SnippetPart is a piece of a snippet: a match, shown in <mark>, or the
// text between.
type SnippetPart struct {
	Text  string
	Match bool
}

// SnippetHTML is the snippet as HTML, every part escaped and each match
// in <mark>: the API's form of what SearchResults renders.
func SnippetHTML(parts []SnippetPart) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Match {
			b.WriteString("<mark>" + html.EscapeString(p.Text) + "</mark>")
		} else {
			b.WriteString(html.EscapeString(p.Text))
		}
	}
	return b.String()
}

// MessageAnchor is the element id of a message on the thread page
// (views.Thread's <article id="msg-{id}">) or of a card.
func MessageAnchor(messageID string) string { return "msg-" + messageID }

// CardAnchor is the element id of the card of task in run (cardDOMID).
func CardAnchor(runID, taskID string) string {
	return cardDOMID(CardView{RunID: runID, TaskID: taskID})
}
