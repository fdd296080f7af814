package server

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"herd/agent"
	"herd/models"
	"herd/server/auth"
	"herd/views"
)

// Search of message text and card results (docs/API.md "Search"): the
// current user's threads only, best first, with snippets.

const (
	searchPage    = 20
	maxSearchPage = 50
	// maxSearchOffset bounds paging: results far down a ranking are not
	// read, and each page ranks every match again.
	maxSearchOffset = 1000
	// maxSearchQuery bounds the query's length in bytes.
	maxSearchQuery = 500
)

// searchJSON is one result of GET /api/search.
type searchJSON struct {
	ThreadID    string    `json:"thread_id"`
	ThreadTitle string    `json:"thread_title"`
	MessageID   string    `json:"message_id"`
	Type        string    `json:"type"`
	RunID       string    `json:"run_id"`
	TaskID      string    `json:"task_id,omitempty"`
	Snippet     string    `json:"snippet"`
	URL         string    `json:"url"`
	CreatedAt   time.Time `json:"created_at"`
}

// searchQuery reads ?q=: words to look for, or a 400 that says why.
func searchQuery(c echo.Context) (string, error) {
	q := strings.TrimSpace(c.QueryParam("q"))
	switch {
	case q == "":
		return "", errBadRequest("q is required: the words to look for")
	case len(q) > maxSearchQuery:
		return "", errBadRequest("q is too long: at most %d bytes", maxSearchQuery)
	case len(models.SearchWords(q)) == 0:
		return "", errBadRequest("q has no word to look for: give letters or digits")
	}
	return q, nil
}

// search runs the current user's search q.
// Hits in what the thread does not show (another version of an answer,
// docs/API.md "Versions") are left out: a page may hold fewer than limit.
func (s *Server) search(c echo.Context, q string, limit, offset int) ([]models.SearchHit, error) {
	ctx := c.Request().Context()
	hits, err := s.store.Search(ctx, auth.User(c).ID, q, limit, offset)
	if errors.Is(err, models.ErrSearchQuery) {
		return nil, errBadRequest("q has no word to look for: give letters or digits")
	}
	if err != nil || len(hits) == 0 {
		return hits, err
	}
	var threads []string
	for _, h := range hits {
		if !slices.Contains(threads, h.ThreadID) {
			threads = append(threads, h.ThreadID)
		}
	}
	runs, err := s.store.RunsOf(ctx, threads)
	if err != nil {
		return nil, err
	}
	shown := make(map[string]agent.Replaced, len(runs))
	for id, rs := range runs {
		shown[id] = agent.ReplacedIn(rs)
	}
	return slices.DeleteFunc(hits, func(h models.SearchHit) bool {
		rp, ok := shown[h.ThreadID]
		// Taken as a message that called tools: a hit is never the stopped
		// text a Continue went on with, whose words its answer repeats.
		return ok && h.RunID != "" && rp.FromThread(&models.Message{RunID: h.RunID, Type: h.Type, ToolCalls: models.JSON("[{}]")})
	}), nil
}

func (s *Server) apiSearch(c echo.Context) error {
	q, err := searchQuery(c)
	if err != nil {
		return err
	}
	limit, err := queryInt(c, "limit", searchPage, 1, maxSearchPage)
	if err != nil {
		return err
	}
	offset, err := queryInt(c, "offset", 0, 0, maxSearchOffset)
	if err != nil {
		return err
	}
	// One more than the page says whether another follows.
	hits, err := s.search(c, q, int(limit)+1, int(offset))
	if err != nil {
		return err
	}
	more := len(hits) > int(limit)
	hits = hits[:min(len(hits), int(limit))]
	out := make([]searchJSON, len(hits))
	for i, h := range hits {
		r := searchResult(h)
		out[i] = searchJSON{ThreadID: h.ThreadID, ThreadTitle: r.ThreadTitle, MessageID: h.MessageID, Type: h.Type, RunID: h.RunID,
			Snippet: views.SnippetHTML(r.Snippet), URL: r.Href, CreatedAt: h.CreatedAt}
		if r.Card {
			out[i].TaskID = h.ToolCallID
		}
	}
	var next any
	if more && int(offset+limit) <= maxSearchOffset {
		next = offset + limit
	}
	return c.JSON(http.StatusOK, map[string]any{"results": out, "next_offset": next})
}

// searchResult is a hit as the page shows it, with its link.
func searchResult(h models.SearchHit) views.SearchResult {
	r := views.SearchResult{ThreadID: h.ThreadID, ThreadTitle: h.ThreadTitle, CreatedAt: h.CreatedAt}
	if r.ThreadTitle == "" {
		r.ThreadTitle = "Untitled thread"
	}
	anchor := views.MessageAnchor(h.MessageID)
	if h.Type == models.SearchedTool {
		r.Card = true
		anchor = views.CardAnchor(h.RunID, h.ToolCallID)
	}
	r.Href = "/threads/" + h.ThreadID + "#" + anchor
	for _, p := range h.SnippetParts() {
		r.Snippet = append(r.Snippet, views.SnippetPart{Text: p.Text, Match: p.Match})
	}
	return r
}

// searchResults are the page's results of the thread list's ?q=; a query
// without a word finds no message (its titles may still match).
func (s *Server) searchResults(c echo.Context, q string) ([]views.SearchResult, error) {
	if len(models.SearchWords(q)) == 0 || len(q) > maxSearchQuery {
		return nil, nil
	}
	hits, err := s.search(c, q, searchPage, 0)
	if err != nil {
		return nil, err
	}
	out := make([]views.SearchResult, len(hits))
	for i, h := range hits {
		out[i] = searchResult(h)
	}
	return out, nil
}
