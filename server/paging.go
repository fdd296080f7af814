package server

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"herd/models"
)

// Page sizes of the thread list and of a thread's messages (docs/API.md
// "Pagination"): a page of messages counts human and AI messages, each
// with its tool results.
const (
	threadsPage    = 50
	maxThreadsPage = 200
	messagesPage   = 50
	maxMessagesPg  = 200
)

// errBadCursor answers a before that this server did not give out.
func errBadCursor() *apiError {
	return &apiError{http.StatusUnprocessableEntity, "bad_cursor", "before must be the next value of a previous page"}
}

// threadCursor encodes a thread's position in its owner's list as an
// opaque token: the clients pass it back, never build it.
func threadCursor(t *models.Thread) string {
	raw := strconv.FormatInt(t.UpdatedAt.UnixNano(), 10) + ":" + t.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// parseThreadCursor reads ?before= of the thread list; nil without one.
func parseThreadCursor(c echo.Context) (*models.ThreadCursor, error) {
	v := c.QueryParam("before")
	if v == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(raw) > 128 {
		return nil, errBadCursor()
	}
	at, id, ok := strings.Cut(string(raw), ":")
	n, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, errBadCursor()
	}
	return &models.ThreadCursor{UpdatedAt: time.Unix(0, n).UTC(), ID: id}, nil
}

// parseBeforeSeq reads ?before= of a thread's messages: a seq, 0 without
// one (the newest page).
func parseBeforeSeq(c echo.Context) (int64, error) {
	v := c.QueryParam("before")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, errBadCursor()
	}
	return n, nil
}

// threadsPageOf loads the current user's page of threads the query asks
// for, and the cursor of the next page ("" when it is the last).
func (s *Server) threadsPageOf(c echo.Context) ([]models.Thread, string, error) {
	after, err := parseThreadCursor(c)
	if err != nil {
		return nil, "", err
	}
	limit, err := queryInt(c, "limit", threadsPage, 1, maxThreadsPage)
	if err != nil {
		return nil, "", err
	}
	ts, more, err := s.store.ThreadsPage(c.Request().Context(), currentUser(c).ID, after, int(limit))
	if err != nil || !more {
		return ts, "", err
	}
	return ts, threadCursor(&ts[len(ts)-1]), nil
}
