package server

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"herd/models"
)

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers within its 2 s deadline whether herd can take work:
// 503 while the writer is retrying through a storage fault or the probe
// finds the disk full or the database locked, 200 again by itself once
// the fault passes (docs/DESIGN.md §10). It never queues behind the
// writer.
func (s *Server) readyz(c echo.Context) error {
	if s.draining.Load() {
		return errDraining
	}
	if s.rejoining != nil && s.rejoining() {
		return errRejoining
	}
	if err := s.storageReady(c.Request().Context()); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

// errDraining is readyz's answer once the instance is stopping: a proxy
// sends new work to another instance.
var errDraining = &apiError{http.StatusServiceUnavailable, "draining", "this instance is stopping and takes no new runs"}

// errRejoining is readyz's answer, and a new run's, while another
// instance has taken over this one's lease and it registers again
// (docs/DESIGN.md §14).
var errRejoining = &apiError{http.StatusServiceUnavailable, "rejoining", "this instance is rejoining the other instances and takes no new runs for a moment; try again shortly"}

// Drain marks the server as stopping (docs/OPERATIONS.md "Rolling
// upgrade"): /readyz fails from now on, so a proxy stops sending it
// requests, while its runs finish and its sockets stay open. The runtime
// refuses new runs itself (agent.Runtime.Drain).
func (s *Server) Drain() { s.draining.Store(true) }

// storageReady is nil when the database can be written now, else the 503
// that says why.
func (s *Server) storageReady(ctx context.Context) error {
	f := s.storage.Fault()
	if f == nil {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := s.store.Probe(ctx); err != nil {
			f, _ = models.AsStorageFault(err)
		}
	}
	if f == nil {
		return nil
	}
	return storageUnavailable(f)
}

func storageUnavailable(f *models.StorageFault) *apiError {
	return &apiError{http.StatusServiceUnavailable, "storage_unavailable",
		"herd cannot write to its database right now: " + f.Reason + "; try again shortly"}
}
