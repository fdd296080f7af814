package models

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"herd/internal/pgtest"
)

// TestPostgresMigratesOnceWhenStartedTogether: stores opened at the same
// moment on one empty database all migrate it without error; the advisory
// lock runs one migration after the other. They read one channel key,
// which a later start keeps.
func TestPostgresMigratesOnceWhenStartedTogether(t *testing.T) {
	dsn := pgtest.DSN(t)
	const n = 6
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		stores []*Store
	)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			s, err := OpenPostgres(dsn, Options{})
			if err != nil {
				t.Errorf("open: %v", err)
				return
			}
			mu.Lock()
			stores = append(stores, s)
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	for _, s := range stores {
		_ = s.Close()
	}
	if len(stores) != n {
		t.Fatalf("%d of %d stores opened", len(stores), n)
	}
	s, err := OpenPostgres(dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keys, err := s.ChannelKeys(context.Background())
	if err != nil || len(keys.Keys) != 1 || keys.Keys[0].ID != 1 || len(keys.Keys[0].Key) != ChannelKeyLen {
		t.Fatalf("channel keys %+v, %v; want the one made by the first start", keys, err)
	}
	if _, err := drivers[0].newStore(t).ChannelKeys(context.Background()); !errors.Is(err, errInstancesSQLite) {
		t.Errorf("SQLite's channel keys: %v, want none", err)
	}
}

// TestPostgresText: text PostgreSQL refuses (a NUL byte, invalid UTF-8),
// which a tool's output may hold, is written rather than lost.
func TestPostgresText(t *testing.T) {
	s, th, w := drivers[1].newThreadWriter(t)
	ctx := context.Background()
	raw := "out\x00put \xff\xfe end"
	if err := w.Write(ctx, Record{Message: &Message{ID: "m1", ThreadID: th.ID, Type: "tool", Content: raw}}); err != nil {
		t.Fatal(err)
	}
	ms, err := s.Messages(ctx, th.ID)
	if err != nil || len(ms) != 1 {
		t.Fatalf("messages %v, %v", ms, err)
	}
	if got := ms[0].Content; !strings.HasPrefix(got, "out") || !strings.HasSuffix(got, " end") {
		t.Errorf("content %q", got)
	}
}

// TestPostgresBadDSN: a DSN that cannot be parsed or reached fails Open
// with the database named, never the password.
func TestPostgresBadDSN(t *testing.T) {
	for _, dsn := range []string{"postgres://herd:s3cret@127.0.0.1:notaport/herd", "postgres://herd:s3cret@127.0.0.1:1/herd?connect_timeout=2", ""} {
		_, err := OpenPostgres(dsn, Options{})
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("open %q: %v", dsn, err)
		}
	}
}

// TestPostgresWriterSurvivesALostConnection: when PostgreSQL drops the
// writer's connection (a server restart, a failover, an idle timeout),
// the writer reports a storage fault, keeps the records and commits them
// on a new connection, with the sequence intact.
func TestPostgresWriterSurvivesALostConnection(t *testing.T) {
	s, th, w := drivers[1].newThreadWriter(t)
	ctx := context.Background()
	write := func() error {
		return w.Write(ctx, Record{Event: &RunEvent{ThreadID: th.ID, EventType: "run.start", Category: CategoryRun}})
	}
	if err := write(); err != nil {
		t.Fatal(err)
	}
	// The writer's one connection, and only it: other packages' tests may
	// share the server.
	var pid int
	if err := s.w.Raw("SELECT pg_backend_pid()").Row().Scan(&pid); err != nil {
		t.Fatal(err)
	}
	var killed bool
	if err := s.r.Raw("SELECT pg_terminate_backend(?)", pid).Row().Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate the writer's connection: %v, %v", killed, err)
	}
	for range 3 {
		if err := write(); err != nil {
			t.Fatalf("write after the connection was lost: %v", err)
		}
	}
	if last, err := s.LastSeq(ctx, th.ID); err != nil || last != 4 {
		t.Errorf("last_seq %d (%v), want 4", last, err)
	}
	if f := w.Fault(); f != nil {
		t.Errorf("fault still reported: %v", f)
	}
}

// TestPostgresProbeAndFaults: readiness probes a healthy server without
// error, and PostgreSQL's errors of the storage (an unreachable, full or
// read-only server) are storage faults while errors of the records are
// not.
func TestPostgresProbeAndFaults(t *testing.T) {
	s := drivers[1].newStore(t)
	if err := s.Probe(context.Background()); err != nil {
		t.Errorf("probe: %v", err)
	}
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{&pgconn.PgError{Code: "53100"}, "the disk is full"},
		{&pgconn.PgError{Code: "57P01"}, "the database cannot be reached"},
		{&pgconn.PgError{Code: "08006"}, "the database cannot be reached"},
		{&pgconn.PgError{Code: "25006"}, "the database is read-only"},
		{&pgconn.PgError{Code: "23505"}, ""}, // a unique violation: the records'
		{&pgconn.PgError{Code: "22021"}, ""}, // bad encoding: the records'
		{fmt.Errorf("begin: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused")}), "the database cannot be reached"},
	} {
		got := ""
		if f, ok := AsStorageFault(tc.err); ok {
			got = f.Reason
		}
		if got != tc.reason {
			t.Errorf("%v: fault %q, want %q", tc.err, got, tc.reason)
		}
	}
}
