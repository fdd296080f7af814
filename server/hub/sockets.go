package hub

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"herd/server/auth"
)

// CloseReason is how a socket is told that its credential ended. 4401 is
// one of the codes static/socket.js treats as final ("Session ended"):
// reconnecting cannot help.
type CloseReason struct {
	code int
	text string
}

// The reasons package server closes sockets for.
var (
	CloseSignedOut      = CloseReason{4401, "signed out"}
	CloseSessionEnded   = CloseReason{4401, "session ended; sign in again"}
	CloseAccountChanged = CloseReason{4401, "your account was changed; sign in again"}
	CloseTokenRevoked   = CloseReason{4401, "API token revoked"}
)

// Sockets knows every open stream by user and credential, so that ending
// a session, revoking a token or changing an account closes its sockets
// at once (docs/DESIGN.md §10).
type Sockets struct {
	mu   sync.Mutex
	open map[*socket]struct{}
	// relay, when set, tells the other instances (Cluster.RelaySockets),
	// whose sockets of the same credentials and user must close too.
	relay func(SocketClose)
}

// SocketClose is a close of sockets: of the credentials Creds, or of
// every socket of UserID.
type SocketClose struct {
	Code   int
	Text   string
	UserID string
	Creds  []string
}

type socket struct {
	userID     string
	role       string // the user's role when the socket opened
	credential string
	cancel     context.CancelFunc
	conn       *websocket.Conn // nil until upgraded
	ended      *CloseReason    // set once closed
}

// NewSockets is the registry; relay tells the other instances of each
// close, nil on one instance.
func NewSockets(relay func(SocketClose)) *Sockets {
	return &Sockets{open: map[*socket]struct{}{}, relay: relay}
}

// Track registers a stream of userID, whose role is role, signed in by
// credential before its upgrade. It returns the context to serve it with, which ends when the
// credential does, the upgrade to use instead, and a func to call when
// the stream is over. The wrapped upgrade refuses a credential that
// ended between the request's sign-in and its registration (stillValid),
// so no socket slips past a revocation.
func (r *Sockets) Track(ctx context.Context, userID, role, credential string, upgrade func() (*websocket.Conn, error), stillValid func() bool) (context.Context, func() (*websocket.Conn, error), func()) {
	ctx, cancel := context.WithCancel(ctx)
	sk := &socket{userID: userID, role: role, credential: credential, cancel: cancel}
	r.mu.Lock()
	r.open[sk] = struct{}{}
	r.mu.Unlock()
	wrapped := func() (*websocket.Conn, error) {
		if !stillValid() {
			return nil, ErrCredentialEnded
		}
		conn, err := upgrade()
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		sk.conn = conn
		if sk.ended != nil {
			sayClose(conn, *sk.ended)
		}
		return conn, nil
	}
	done := func() {
		cancel()
		r.mu.Lock()
		delete(r.open, sk)
		r.mu.Unlock()
	}
	return ctx, wrapped, done
}

// ErrCredentialEnded is the upgrade's error when the socket's credential
// ended before it was registered: the handler answers 401.
var ErrCredentialEnded = errors.New("hub: credential ended")

// Close closes every socket signed in by one of credentials.
func (r *Sockets) Close(reason CloseReason, credentials ...string) {
	r.Apply(SocketClose{Code: reason.code, Text: reason.text, Creds: credentials})
	if r.relay != nil {
		r.relay(SocketClose{Code: reason.code, Text: reason.text, Creds: credentials})
	}
}

// CloseUser closes every socket of userID, whatever signed it in.
func (r *Sockets) CloseUser(reason CloseReason, userID string) {
	r.Apply(SocketClose{Code: reason.code, Text: reason.text, UserID: userID})
	if r.relay != nil {
		r.relay(SocketClose{Code: reason.code, Text: reason.text, UserID: userID})
	}
}

// Revalidate asks role (auth.Service.CredentialRole) about the
// credential of every open socket and closes those that ended, and those
// whose user's role changed since they opened, as the instance that
// made the change closed its own: a Cluster calls it when it may have
// missed another instance's word of a sign-out,
// a revoked token or a changed account (its listener reconnected). Each
// credential is asked about once. A credential that cannot be checked
// now (the database unreachable) keeps its sockets: an outage is not a
// sign-out, and 4401 would tell the page to give up.
func (r *Sockets) Revalidate(role func(userID, credential string) (string, error)) {
	r.mu.Lock()
	owners := map[string]string{} // credential → user
	for sk := range r.open {
		if sk.ended == nil {
			owners[sk.credential] = sk.userID
		}
	}
	r.mu.Unlock()
	roles := map[string]string{} // credential → its user's role now
	ended := map[string]bool{}
	for cred, userID := range owners {
		switch now, err := role(userID, cred); {
		case errors.Is(err, auth.ErrCredentialGone):
			ended[cred] = true
		case err == nil:
			roles[cred] = now
		}
	}
	if len(ended) > 0 {
		r.closeWhere(CloseSessionEnded, func(sk *socket) bool { return ended[sk.credential] })
	}
	r.closeWhere(CloseAccountChanged, func(sk *socket) bool {
		now, ok := roles[sk.credential]
		return ok && now != sk.role
	})
}

// Apply closes this instance's sockets that sc names: a user's, or those
// of the credentials.
func (r *Sockets) Apply(sc SocketClose) {
	reason := CloseReason{sc.Code, sc.Text}
	if sc.UserID != "" {
		r.closeWhere(reason, func(sk *socket) bool { return sk.userID == sc.UserID })
		return
	}
	want := map[string]bool{}
	for _, c := range sc.Creds {
		want[c] = true
	}
	r.closeWhere(reason, func(sk *socket) bool { return want[sk.credential] })
}

func (r *Sockets) closeWhere(reason CloseReason, match func(*socket) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for sk := range r.open {
		if !match(sk) || sk.ended != nil {
			continue
		}
		sk.ended = &reason
		if sk.conn != nil {
			sayClose(sk.conn, reason)
		}
		sk.cancel() // the hub closes the connection (Hub.Serve)
	}
}

// sayClose sends the close frame. gorilla allows WriteControl beside the
// hub's writer; each is one whole Write on the socket.
func sayClose(conn *websocket.Conn, reason CloseReason) {
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(reason.code, reason.text), time.Now().Add(time.Second))
}
