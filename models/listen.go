package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// LISTEN and NOTIFY (docs/DESIGN.md §14): the instances on one
// PostgreSQL database tell each other what they commit and stream on a
// channel. Each side is a dedicated connection of its own, outside the
// pools: a LISTEN holds its session, and the sender's statements must not
// queue behind the Writer's batches or the readers' pages.

// ListenerName is the listener connection's application_name, so an
// operator (or a test) can tell it from the pools in pg_stat_activity.
const ListenerName = "herd listener"

// Schema is the database's current schema, read on a connection of its
// own.
func (s *Store) Schema(ctx context.Context) (string, error) {
	if !s.pg {
		return "", errInstancesSQLite
	}
	conn, err := pgx.ConnectConfig(ctx, s.cc)
	if err != nil {
		return "", fmt.Errorf("store: connect: %w", err)
	}
	defer conn.Close(context.Background())
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return "", fmt.Errorf("store: current schema: %w", err)
	}
	return schema, nil
}

// Listener is a dedicated connection LISTENing on one channel. Its
// methods are for one goroutine.
type Listener struct{ conn *pgx.Conn }

// Listen connects, named ListenerName, and LISTENs on channel.
func (s *Store) Listen(ctx context.Context, channel string) (*Listener, error) {
	if !s.pg {
		return nil, errInstancesSQLite
	}
	cc := s.cc.Copy()
	cc.RuntimeParams["application_name"] = ListenerName
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	return &Listener{conn: conn}, nil
}

// Wait returns the payload of the next notification, or ctx's error
// (context.DeadlineExceeded when its deadline passed first), or the
// connection's.
func (l *Listener) Wait(ctx context.Context) (string, error) {
	n, err := l.conn.WaitForNotification(ctx)
	if err != nil {
		return "", err
	}
	return n.Payload, nil
}

// Ping checks that the connection still answers.
func (l *Listener) Ping(ctx context.Context) error { return l.conn.Ping(ctx) }

// Close closes the connection.
func (l *Listener) Close() { _ = l.conn.Close(context.Background()) }

// Notifier sends payloads on a channel from a dedicated connection,
// opened on first use and again after a failure. Its methods are for one
// goroutine.
type Notifier struct {
	cc      *pgx.ConnConfig
	channel string
	conn    *pgx.Conn
}

// errNotifierSQLite: NOTIFY is PostgreSQL's.
var errNotifierSQLite = errors.New("store: notify needs PostgreSQL")

// NewNotifier prepares a notifier on channel; nothing connects before
// its first Send.
func (s *Store) NewNotifier(channel string) *Notifier {
	return &Notifier{cc: s.cc, channel: channel}
}

// notifyTimeout bounds connecting, and then sending, in Send.
const notifyTimeout = 5 * time.Second

// Send sends payloads in one statement, in order, connecting first if
// need be; connecting and sending each get notifyTimeout. A failed send
// closes the connection: the next Send connects anew.
func (n *Notifier) Send(ctx context.Context, payloads []string) error {
	if n.cc == nil {
		return errNotifierSQLite
	}
	if n.conn == nil {
		cctx, cancel := context.WithTimeout(ctx, notifyTimeout)
		conn, err := pgx.ConnectConfig(cctx, n.cc)
		cancel()
		if err != nil {
			return fmt.Errorf("store: connect to notify: %w", err)
		}
		n.conn = conn
	}
	sctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	if _, err := n.conn.Exec(sctx, "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", n.channel, payloads); err != nil {
		n.Close()
		return fmt.Errorf("store: notify: %w", err)
	}
	return nil
}

// Close closes the connection, if open.
func (n *Notifier) Close() {
	if n.conn != nil {
		_ = n.conn.Close(context.Background())
		n.conn = nil
	}
}
