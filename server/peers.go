package server

import (
	"context"
	"time"

	"herd/agent"
	"herd/agent/event"
	"herd/server/hub"
)

// The seam between the server and the other instances (a cluster.Cluster),
// both ways: Peers is what the server's parts reach them through, given
// to New; the methods below are what the cluster calls here when another
// instance's notice asks (cluster.Handlers, which main gives to
// Cluster.Start). server does not import server/cluster: main joins them.

// Peers are the other instances serving the database, as the server's
// parts reach them: runs, pages and title calls through them, sockets
// closed and deletes scheduled on each. *cluster.Cluster implements it.
type Peers interface {
	runControl
	threadPages
	titleCalling
	// RelaySockets tells the others to close the sockets of creds, or of
	// userID (sockets.relay).
	RelaySockets(code int, text, userID string, creds []string)
	// RelayPurge tells the others of a delete due at at, or undone (a
	// zero at) (purger.relay).
	RelayPurge(id string, at time.Time)
	// Rejoining reports whether this instance lost its lease to another
	// and has not registered again: it takes no work meanwhile (readyz).
	Rejoining() bool
	// ID is this instance's id, which its audit entries carry.
	ID() string
}

// runControl stops and watches runs: the local runtime's alone, or with
// Peers every instance's (a Stop on one instance reaches the run on
// another). *agent.Runtime implements it.
type runControl interface {
	ActiveRun(threadID string) (string, bool)
	Cancel(threadID, runID string) error
	CancelTask(threadID, taskID string) error
	Wait(ctx context.Context, threadID string) error
}

// threadPages is where a thread's frames go: the local hub, or Peers
// that also tell the other instances. *hub.Hub implements it.
type threadPages interface {
	Publish(threadID, runID string, f event.Frame)
}

// titleCalling tells pages on every instance that a thread's title call
// is in flight (titler).
type titleCalling interface {
	TitleCall(threadID string, pending bool)
	TitlePending(threadID string) bool
}

var (
	_ agent.Publisher = (*hub.Hub)(nil)
	_ threadPages     = (*hub.Hub)(nil)
)

// CloseSockets closes the sockets another instance ended (a sign-out, a
// revoked token, an account changed there): those of creds, or of userID.
func (s *Server) CloseSockets(code int, text, userID string, creds []string) {
	s.sockets.Apply(hub.SocketClose{Code: code, Text: text, UserID: userID, Creds: creds})
}

// RecheckSockets closes the sockets whose credential ended, or whose
// user's role changed, while this instance could not hear of it.
func (s *Server) RecheckSockets() { s.sockets.Revalidate(s.auth.CredentialRole) }

// ScheduleDelete purges thread id at at here: another instance took its
// delete, and whichever instance claims it first removes it.
func (s *Server) ScheduleDelete(id string, at time.Time) { s.purger.Set(id, at) }

// UnscheduleDelete forgets thread id's purge here: its owner undid the
// delete on another instance.
func (s *Server) UnscheduleDelete(id string) { s.purger.Unset(id) }
