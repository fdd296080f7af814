package server

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"herd/server/auth"
	"herd/server/hub"
)

// stream upgrades GET /api/threads/{id}/stream?after_seq=N&restore_generation=G
// (docs/API.md). Ownership is checked before the upgrade, so a foreign
// thread is a plain 404. Cookie-authenticated upgrades must come from
// this origin.
func (s *Server) stream(c echo.Context) error {
	t, after, err := s.ownThreadAfter(c)
	if err != nil {
		return err
	}
	gen := c.QueryParam("restore_generation")
	if len(gen) > maxGenerationLen {
		return errBadRequest("restore_generation is too long")
	}
	bearer := auth.Bearer(c)
	up := websocket.Upgrader{
		// A client only sends pings, and the hub writes its frames on the
		// socket itself (Hub.Serve): an idle socket holds a small read
		// buffer and no write buffer (docs/PERFORMANCE.md, idle sockets).
		ReadBufferSize:  socketReadBuffer,
		WriteBufferPool: socketWriteBuffers,
		CheckOrigin: func(r *http.Request) bool {
			return bearer || s.auth.SameOrigin(r)
		},
	}
	if !bearer && !s.auth.SameOrigin(c.Request()) {
		return &apiError{http.StatusForbidden, "bad_origin", "cross-origin WebSocket refused"}
	}
	// The slot is held until the socket has closed, so the count is
	// exact. The socket outlives this handler (Hub.Serve returns once it
	// is connected), so it keeps nothing of the request: not its context,
	// which ends with the handler, nor its user.
	u := auth.User(c)
	uid := u.ID
	upgrade := func() (*websocket.Conn, error) { return up.Upgrade(c.Response(), c.Request(), nil) }
	if !s.socketCap.Acquire(u.ID) {
		if bearer {
			return &apiError{http.StatusTooManyRequests, "too_many_sockets", tooManySockets}
		}
		refuseSocket(upgrade)
		return nil
	}
	// The socket lives only as long as what signed it in (hub/sockets.go).
	ctx, upgrade, done := s.sockets.Track(context.Background(), uid, u.Role, auth.Credential(c), upgrade, s.auth.CredentialValid(c))
	closed := func() {
		done()
		s.socketCap.Release(uid)
	}
	from := hub.Cursor{Seq: after, Generation: gen}
	if err := s.hub.Serve(ctx, upgrade, t.ID, from, closed); errors.Is(err, hub.ErrCredentialEnded) {
		return &apiError{http.StatusUnauthorized, "unauthorized", "sign in first"}
	} else if errors.Is(err, hub.ErrClosed) {
		return &apiError{http.StatusServiceUnavailable, "unavailable", "the server is shutting down; try again shortly"}
	}
	return nil // the upgrader has answered its own errors
}

const socketReadBuffer = 512

// maxGenerationLen bounds the restore generation a client sends back:
// the hub's are 24 characters (models.Store.RestoreGeneration).
const maxGenerationLen = 64

// socketWriteBuffers lends gorilla a write buffer for the few frames it
// writes itself (a close), so no socket keeps one.
var socketWriteBuffers = &sync.Pool{}

// CloseTooManySockets is the close code of a browser's socket over its
// account's cap (docs/API.md); static/socket.js shows the reason.
const CloseTooManySockets = 4429

const tooManySockets = "too many open streams for this account; close a tab and this one reconnects"

// refuseSocket answers a browser over its account's socket cap. A browser
// cannot read the status of a refused handshake, only the close of an
// open socket, so it is upgraded and closed at once with the reason; the
// connect rate limit bounds what that costs.
func refuseSocket(upgrade func() (*websocket.Conn, error)) {
	conn, err := upgrade()
	if err != nil {
		return // the upgrader has answered
	}
	defer conn.Close()
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(CloseTooManySockets, tooManySockets), time.Now().Add(time.Second))
}
