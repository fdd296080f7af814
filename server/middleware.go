package server

import (
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// limitBody caps every request body at max bytes, chunked ones included:
// a declared length over it is refused before anything is read, a chunked
// body once it passes max, both with 413 (docs/API.md). A form is parsed
// here, because the handlers' FormValue would drop the error and answer
// as if a field were missing. A route that streams its body under its
// own limits (streams) is left alone.
func limitBody(max int64, streams func(echo.Context) bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if streams(c) {
				return next(c)
			}
			req := c.Request()
			if req.ContentLength > max {
				return errTooLarge("the request body is larger than 1 MB")
			}
			// The server's own writer, so that an overrun also closes the
			// connection instead of reading the rest.
			req.Body = http.MaxBytesReader(c.Response().Writer, req.Body, max)
			var err error
			switch mt, _, _ := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType)); mt {
			case echo.MIMEApplicationForm:
				err = req.ParseForm()
			case echo.MIMEMultipartForm:
				err = req.ParseMultipartForm(max)
			}
			if maxb := (*http.MaxBytesError)(nil); errors.As(err, &maxb) {
				return errTooLarge("the request body is larger than 1 MB")
			}
			return next(c)
		}
	}
}

// noStoreAPI keeps every JSON API answer, errors included, out of
// browser and proxy caches: they hold one user's data. Pages say the same
// in render.
func noStoreAPI(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if strings.HasPrefix(c.Request().URL.Path, "/api/") {
			c.Response().Header().Set("Cache-Control", "no-store")
		}
		return next(c)
	}
}

// securityHeaders sets the CSP and friends on every response: no inline
// script or style anywhere, no framing, no sniffing.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		return next(c)
	}
}

func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("handler panicked", "path", c.Request().URL.Path, "panic", p)
				err = &apiError{http.StatusInternalServerError, "internal", "something went wrong on our side"}
			}
		}()
		return next(c)
	}
}

func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		req := c.Request()
		status := c.Response().Status
		level := slog.LevelDebug
		switch {
		case status == http.StatusServiceUnavailable:
			// Every 503 is transient (shutting down, storage failing) and
			// its cause is logged where it arises, once: at Error each
			// retrying page would fill the log.
			level = slog.LevelInfo
		case status >= 500:
			level = slog.LevelError
		case status >= 400:
			level = slog.LevelInfo
		}
		attrs := []any{"method", req.Method, "path", req.URL.Path, "status", status, "dur", time.Since(start).Round(time.Microsecond), "request_id", c.Response().Header().Get(echo.HeaderXRequestID)}
		if id := c.Param("id"); id != "" && (strings.HasPrefix(req.URL.Path, "/api/threads/") || strings.HasPrefix(req.URL.Path, "/threads/")) {
			attrs = append(attrs, "thread", id)
		}
		s.log.Log(req.Context(), level, "http", attrs...)
		return nil
	}
}
