package agent

import (
	"errors"
	"fmt"
)

// Errors Start, Cancel and CancelTask return.
var (
	ErrRunActive    = errors.New("a run is already active in this thread")
	ErrUnknownModel = errors.New("unknown model")
	ErrNoActiveRun  = errors.New("no such active run")
	ErrNoTask       = errors.New("no such running task")
	ErrShuttingDown = errors.New("server is shutting down")
	// ErrLeaseTaken ends the runs of an instance whose lease another
	// instance took over (Runtime.Abandon): they are that instance's now.
	ErrLeaseTaken = errors.New("this instance's lease was taken over by another instance")
	// ErrReleased ends the runs of a stop they outlive (Runtime.Release):
	// they resume at the next start, or on another instance.
	ErrReleased = errors.New("released for another instance or the next start to resume")
	// ErrNotLatest refuses a Retry or Regenerate of a run that is not the
	// thread's latest: only the latest answer can be answered again.
	ErrNotLatest = errors.New("only the latest answer of the thread can be answered again")
	// ErrNotStopped refuses a Continue of a run the user did not stop.
	ErrNotStopped = errors.New("only an answer you stopped, or one the model's output limit cut, can be continued")
	// ErrReplaced refuses an Edit of a message a later run replaced, or
	// of a run that has no message of its own (a Retry).
	ErrReplaced = errors.New("that message was replaced; edit the one shown")
)

// Cancellation causes that tell how a run's or an execution's context
// ended: a Stop, a per-task cancel, the task tool's safety net, the task's
// end.
var (
	errStopped       = errors.New("stopped by user")
	errTaskCancelled = errors.New("task cancelled by user")
	errSafetyNet     = errors.New("safety net: stopped waiting")
	errTaskOver      = errors.New("the task is over")
)

// RunLimitError is Start's error when the user already has as many active
// runs as lead.max_active_runs_per_user allows.
type RunLimitError struct{ Limit int }

func (e *RunLimitError) Error() string {
	return fmt.Sprintf("you already have %d active runs, the most one user may have at once (lead.max_active_runs_per_user)", e.Limit)
}
