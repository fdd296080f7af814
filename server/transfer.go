package server

import (
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// transfer keeps a file upload or download going past the HTTP server's
// read and write timeouts as long as it moves: each piece read or
// written sets the deadline that far ahead again, so a large file on a
// slow link arrives and only a transfer that stalls for a whole timeout
// is cut (docs/OPERATIONS.md "Connection limits").
type transfer struct {
	rc          *http.ResponseController
	read, write time.Duration
	readAt      time.Time // when the read deadline was last moved
	writeAt     time.Time
}

// deadlineEvery is how often at most a transfer moves a deadline.
const deadlineEvery = time.Second

func (s *Server) transfer(c echo.Context) *transfer {
	return &transfer{rc: http.NewResponseController(c.Response()), read: s.readTimeout, write: s.writeTimeout}
}

// body is r, the request's body, moving the read deadline.
func (t *transfer) body(r io.Reader) io.Reader { return &movingReader{r: r, t: t} }

// writer is w, the response, moving the write deadline.
func (t *transfer) writer(w http.ResponseWriter) http.ResponseWriter {
	return &movingWriter{ResponseWriter: w, t: t}
}

type movingReader struct {
	r io.Reader
	t *transfer
}

func (m *movingReader) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if now := time.Now(); n > 0 && now.Sub(m.t.readAt) >= deadlineEvery {
		m.t.readAt = now
		_ = m.t.rc.SetReadDeadline(now.Add(m.t.read))
	}
	return n, err
}

type movingWriter struct {
	http.ResponseWriter
	t *transfer
}

func (m *movingWriter) Write(p []byte) (int, error) {
	if now := time.Now(); now.Sub(m.t.writeAt) >= deadlineEvery {
		m.t.writeAt = now
		_ = m.t.rc.SetWriteDeadline(now.Add(m.t.write))
	}
	return m.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (m *movingWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }
