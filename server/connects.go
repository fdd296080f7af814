package server

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"herd/server/auth"
)

// limitConnects limits WebSocket connects per user, or per client IP for
// a request without a session (which auth.RequireUser then refuses): a
// reconnect storm, scripted or not, costs at most this many handshakes
// and replays a minute.
func (s *Server) limitConnects(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		key := "ip:" + c.RealIP()
		if u := auth.User(c); u != nil {
			key = "user:" + u.ID
		}
		if !s.connLimiter.Allow(key) {
			return &apiError{http.StatusTooManyRequests, "rate_limited", "too many stream connections in a minute; wait a moment and reload"}
		}
		return next(c)
	}
}
