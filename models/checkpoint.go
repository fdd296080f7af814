package models

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"time"
)

// Checkpoint is one piece of the exact history of a conversation that is
// still running (docs/DESIGN.md §11): what a subagent's next model call
// needs beyond what the thread's messages and bounded steps hold — its
// AI messages whole, with their tool calls and the reasoning a provider
// must get back, and its tool results whole. The pieces of a run's task
// (TaskID) in ID order are that conversation. A piece is written in the
// commit of the step it belongs to (the same Writer job), so the log
// never shows a step whose history is not kept; the Writer deletes a
// run's pieces in the commit that ends it.
type Checkpoint struct {
	ID       int64  `gorm:"primaryKey;autoIncrement"`
	ThreadID string `gorm:"not null;size:36"`
	RunID    string `gorm:"index:idx_checkpoints_run_task,priority:1;not null;size:36"`
	TaskID   string `gorm:"index:idx_checkpoints_run_task,priority:2;not null;default:''"`
	// Format is the version of Body's encoding, the agent's to define: a
	// herd resumes only the formats it knows.
	Format int64 `gorm:"not null"`
	// Gzip says Body is compressed (pieces over checkpointGzipOver).
	Gzip      bool   `gorm:"not null;default:false"`
	Body      []byte `gorm:"not null"`
	CreatedAt time.Time
}

// checkpointGzipOver is the size past which a piece is compressed, when
// that makes it smaller: a short step is not worth a gzip header.
const checkpointGzipOver = 1024

// NewCheckpoint is a piece of the history of run runID's task taskID
// ("" for the lead), body encoded in format; compressed when large.
func NewCheckpoint(threadID, runID, taskID string, format int64, body []byte) *Checkpoint {
	c := &Checkpoint{ThreadID: threadID, RunID: runID, TaskID: taskID, Format: format, Body: body}
	if len(body) <= checkpointGzipOver {
		return c
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	_, _ = zw.Write(body)
	if zw.Close() == nil && buf.Len() < len(body) {
		c.Body, c.Gzip = buf.Bytes(), true
	}
	return c
}

// Data is the piece's body, uncompressed.
func (c *Checkpoint) Data() ([]byte, error) {
	if !c.Gzip {
		return c.Body, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(c.Body))
	if err != nil {
		return nil, fmt.Errorf("store: checkpoint %d: %w", c.ID, err)
	}
	defer zr.Close()
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("store: checkpoint %d: %w", c.ID, err)
	}
	return b, nil
}

// Checkpoints returns the pieces of run runID's conversations, by task
// and then in the order they were written.
func (s *Store) Checkpoints(ctx context.Context, runID string) ([]Checkpoint, error) {
	return list[Checkpoint](s.r.WithContext(ctx).Where("run_id = ?", runID).Order("task_id, id"), "checkpoints")
}

// deleteCheckpointsSQL drops an ended run's pieces, in the commit of its
// end (retention: a checkpoint serves only a run that may continue).
const deleteCheckpointsSQL = "DELETE FROM checkpoints WHERE run_id = ?"
