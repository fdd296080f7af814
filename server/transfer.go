package server

import (
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// transfer keeps a file upload or download going past the HTTP server's
// read and write timeouts as long as it moves: each piece read or
// written sets both deadlines that far ahead again, so a large file on a
// slow link arrives and only a transfer that stalls for a whole timeout
// is cut (docs/OPERATIONS.md "Connection limits"). Both, because an
// upload answers after its body and the server reads in the background
// while a download is written (a read deadline passing there ends the
// request's context).
type transfer struct {
	rc          *http.ResponseController
	read, write time.Duration
	every       time.Duration // how often at most the deadlines move
	movedAt     time.Time
}

func (s *Server) transfer(c echo.Context) *transfer {
	// Four times per timeout, so a moving transfer always moves them in
	// time, and at most once a second.
	every := min(time.Second, s.readTimeout/4, s.writeTimeout/4)
	return &transfer{rc: http.NewResponseController(c.Response()), read: s.readTimeout, write: s.writeTimeout, every: every}
}

// moved moves the deadlines on, at most every t.every.
func (t *transfer) moved() {
	now := time.Now()
	if now.Sub(t.movedAt) < t.every {
		return
	}
	t.movedAt = now
	_ = t.rc.SetReadDeadline(now.Add(t.read))
	_ = t.rc.SetWriteDeadline(now.Add(t.write))
}

// body is r, the request's body, moving the deadlines as it is read.
func (t *transfer) body(r io.Reader) io.Reader { return &movingReader{r: r, t: t} }

// writer is w, the response, moving the deadlines as it is written.
func (t *transfer) writer(w http.ResponseWriter) http.ResponseWriter {
	return &movingWriter{ResponseWriter: w, t: t}
}

type movingReader struct {
	r io.Reader
	t *transfer
}

func (m *movingReader) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if n > 0 {
		m.t.moved()
	}
	return n, err
}

type movingWriter struct {
	http.ResponseWriter
	t *transfer
}

func (m *movingWriter) Write(p []byte) (int, error) {
	m.t.moved()
	return m.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (m *movingWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }
