package server

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"herd/models"
	"herd/server/auth"
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

// pageQuery reads the page a query asks for: ?before=, which cursor
// decodes (absent: the first page, C's zero value), and ?limit=, def when
// absent, at most max. A before that cursor refuses is one this server did
// not give out.
func pageQuery[C any](c echo.Context, cursor func(string) (C, bool), def, max int64) (C, int, error) {
	var before C
	if v := c.QueryParam("before"); v != "" {
		var ok bool
		if before, ok = cursor(v); !ok {
			return before, 0, &apiError{http.StatusUnprocessableEntity, "bad_cursor", "before must be the next value of a previous page"}
		}
	}
	limit, err := queryInt(c, "limit", def, 1, max)
	return before, int(limit), err
}

// threadCursor encodes a thread's position in its owner's list as an
// opaque token: the clients pass it back, never build it.
func threadCursor(t *models.Thread) string {
	raw := strconv.FormatInt(t.UpdatedAt.UnixNano(), 10) + ":" + t.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// parseThreadCursor reads a before of the thread list (threadCursor).
func parseThreadCursor(v string) (*models.ThreadCursor, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(raw) > 128 {
		return nil, false
	}
	at, id, ok := strings.Cut(string(raw), ":")
	n, err := strconv.ParseInt(at, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, false
	}
	return &models.ThreadCursor{UpdatedAt: time.Unix(0, n).UTC(), ID: id}, true
}

// parseBeforeSeq reads a before of a thread's messages: a seq.
func parseBeforeSeq(v string) (int64, bool) {
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n >= 1
}

// threadsPageOf loads the current user's page of threads the query asks
// for, and the cursor of the next page ("" when it is the last).
func (s *Server) threadsPageOf(c echo.Context) ([]models.Thread, string, error) {
	after, limit, err := pageQuery(c, parseThreadCursor, threadsPage, maxThreadsPage)
	if err != nil {
		return nil, "", err
	}
	ts, more, err := s.store.ThreadsPage(c.Request().Context(), auth.User(c).ID, after, limit)
	if err != nil || !more {
		return ts, "", err
	}
	return ts, threadCursor(&ts[len(ts)-1]), nil
}
