package server

import (
	"context"
	"time"
)

// defaultUndoWindow is how long a deleted thread can be brought back.
const defaultUndoWindow = 10 * time.Second

// ResumeDeletes schedules the deletions a previous server left pending
// (purge.Purger.Resume).
func (s *Server) ResumeDeletes(ctx context.Context) error { return s.purger.Resume(ctx) }
