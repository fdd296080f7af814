package server

import (
	"github.com/labstack/echo/v4"

	"herd/agent"
	"herd/agent/event"
	"herd/models"
	"herd/server/titles"
)

// The server's side of thread titles: the frame type that carries a new
// title to open pages (titles.Pages publishes it; a title call's usage
// frame is the hub's, hub.FrameTitleUsage), and the start of titling when
// a thread's first run starts.

// FrameThreadRenamed tells a thread's open pages its new title (docs/API.md):
// a model's title, or the owner's rename from another tab.
const FrameThreadRenamed = event.TypeRenamed

// titleThread titles an untitled thread whose first run has started: from
// its first message at once, then by its model (titles.Titler) when the
// model makes calls.
func (s *Server) titleThread(c echo.Context, t *models.Thread, started agent.Started, content string) {
	first := titles.From(content)
	if first != "" {
		if _, err := s.store.RenameThread(c.Request().Context(), t.UserID, t.ID, first); err != nil {
			s.log.Warn("title a thread from its first message", "thread", t.ID, "err", err)
			return
		}
	}
	s.titles.Start(t, started, content, first)
}
