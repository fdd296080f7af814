package server

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"
)

// stream upgrades GET /api/threads/{id}/stream?after_seq=N (docs/API.md).
// Ownership is checked before the upgrade, so a foreign thread is a plain
// 404. Cookie-authenticated upgrades must come from this origin.
func (s *Server) stream(c echo.Context) error {
	t, after, err := s.ownThreadAfter(c)
	if err != nil {
		return err
	}
	bearer := c.Get(ctxBearer) != nil
	up := websocket.Upgrader{
		ReadBufferSize:  4096,
		WriteBufferSize: 16384,
		CheckOrigin: func(r *http.Request) bool {
			return bearer || s.sameOrigin(r)
		},
	}
	if !bearer && !s.sameOrigin(c.Request()) {
		return &apiError{http.StatusForbidden, "bad_origin", "cross-origin WebSocket refused"}
	}
	upgrade := func() (*websocket.Conn, error) { return up.Upgrade(c.Response(), c.Request(), nil) }
	// The socket lives only as long as what signed it in (sockets.go).
	cred, _ := c.Get(ctxCredential).(string)
	ctx, upgrade, done := s.sockets.track(c.Request().Context(), currentUser(c).ID, cred, upgrade, s.credentialValid(c))
	defer done()
	if err := s.hub.Serve(ctx, upgrade, t.ID, after, currentUser(c).IsAdmin()); errors.Is(err, errCredentialEnded) {
		return err
	} else if errors.Is(err, ErrClosed) {
		return &apiError{http.StatusServiceUnavailable, "unavailable", "the server is shutting down; try again shortly"}
	}
	return nil // the upgrader has answered its own errors
}

// sameOrigin accepts a request whose Origin is this server: the configured
// public URL, or else the request's own Host.
func (s *Server) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	if s.publicURL != "" {
		return strings.EqualFold(u.Scheme+"://"+u.Host, s.publicURL)
	}
	return strings.EqualFold(u.Host, r.Host)
}
