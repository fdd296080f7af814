package server

import (
	"errors"
	"io/fs"
	"net/http"

	"github.com/labstack/echo/v4"

	"herd/agent/event"
)

// Frame types of a running tool call (docs/API.md), never persisted.
const (
	// FrameToolProgress is the progress of one of the lead's own tool
	// calls, shown next to the call; a subagent's is task_progress.
	FrameToolProgress = event.TypeToolProgress
	// FrameToolLog carries a running call's new log lines, the lead's or
	// a subagent's.
	FrameToolLog = event.TypeToolLog
)

// apiToolImage serves an image a tool of the thread returned, to the
// thread's owner only (docs/API.md). The type is the one the image was
// checked to be when kept (agent.ToolImages) and nosniff is set on every
// answer, so a browser never reads it as anything else. Its name is the
// hash of its bytes: it never changes, so the browser may keep it.
func (s *Server) apiToolImage(c echo.Context) error {
	t, err := s.ownThread(c)
	if err != nil {
		return err
	}
	f, typ, err := s.rt.ToolImage(t.ID, c.Param("name"))
	if errors.Is(err, fs.ErrNotExist) {
		return errNotFound("image")
	} else if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("Content-Type", typ)
	h.Set("Cache-Control", "private, max-age=31536000, immutable")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	http.ServeContent(c.Response(), c.Request(), "", st.ModTime(), f)
	return nil
}
