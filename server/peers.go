package server

import "time"

// The seam between the server and the other instances (a Cluster), both
// ways: Peers is what the server's parts reach them through, given to
// New; the methods below are what the Cluster calls here when another
// instance's notice asks (ClusterHandlers, given to Cluster.Start).

// Peers are the other instances serving the database, as the server's
// parts reach them: runs, pages and title calls through them, sockets
// closed and deletes scheduled on each. *Cluster implements it; main
// hands the Cluster this server's side in ClusterHandlers.
type Peers interface {
	runControl
	threadPages
	titleCalling
	RelaySockets(sc socketClose)
	RelayPurge(id string, at time.Time)
}

// CloseSockets closes the sockets another instance ended (a sign-out, a
// revoked token, an account changed there).
func (s *Server) CloseSockets(sc socketClose) { s.sockets.apply(sc) }

// RecheckSockets closes the sockets whose credential ended, or whose
// user's role changed, while this instance could not hear of it.
func (s *Server) RecheckSockets() { s.sockets.revalidate(s.auth.CredentialRole) }

// ScheduleDelete purges thread id at at here: another instance took its
// delete, and whichever instance claims it first removes it.
func (s *Server) ScheduleDelete(id string, at time.Time) { s.purger.Set(id, at) }

// UnscheduleDelete forgets thread id's purge here: its owner undid the
// delete on another instance.
func (s *Server) UnscheduleDelete(id string) { s.purger.Unset(id) }

var (
	_ LocalSockets = (*Server)(nil)
	_ LocalDeletes = (*Server)(nil)
	_ Peers        = (*Cluster)(nil)
)
