package models

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"herd/internal/pgtest"
)

// TestOpenPostgresWaiting: a server's start waits for a PostgreSQL that
// cannot be reached yet, saying so once, and reports that it waited; it
// gives up after its timeout saying for how long and why; a database
// that answers with a refusal (here: no such database) fails at once; and
// its context's end stops the wait at once.
func TestOpenPostgresWaiting(t *testing.T) {
	c := pgtest.Private(t)
	if err := c.Halt(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var log strings.Builder
	logger := slog.New(slog.NewTextHandler(&log, nil))

	t.Run("comes up", func(t *testing.T) {
		resumed := make(chan error, 1)
		time.AfterFunc(time.Second, func() { resumed <- c.Resume() })
		s, waited, err := OpenPostgresWaiting(ctx, c.DSN, Options{Logger: logger}, time.Minute)
		if err := <-resumed; err != nil {
			t.Fatal(err)
		}
		if err != nil {
			t.Fatalf("open once the server is up: %v\n%s", err, log.String())
		}
		defer s.Close()
		if waited < time.Second {
			t.Errorf("waited %v; want at least the second the server was down", waited)
		}
		want := `level=WARN msg="waiting for the database at herd@` + c.DSN[len("host="):strings.Index(c.DSN, " ")] + `:5432/postgres: the database cannot be reached; retrying for up to 60 s"`
		if got := log.String(); strings.Count(got, "waiting for the database") != 1 || !strings.Contains(got, want) {
			t.Errorf("log:\n%s\nwant one line starting %s", got, want)
		}
		if _, err := s.Users(ctx); err != nil {
			t.Errorf("the store after the wait: %v", err)
		}
	})

	t.Run("up at once", func(t *testing.T) {
		s, waited, err := OpenPostgresWaiting(ctx, c.DSN, Options{}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if waited != 0 {
			t.Errorf("waited %v for a server that was up", waited)
		}
	})

	t.Run("no such database", func(t *testing.T) {
		start := time.Now()
		_, _, err := OpenPostgresWaiting(ctx, c.DSN+" dbname=herd_no_such_db", Options{}, time.Minute)
		if err == nil || !strings.Contains(err.Error(), `database "herd_no_such_db" does not exist`) || time.Since(start) > 2*time.Second {
			t.Errorf("a missing database: %v after %v; want its error at once", err, time.Since(start))
		}
	})

	nowhere := "host=" + t.TempDir() + " user=herd dbname=herd sslmode=disable"
	t.Run("never up", func(t *testing.T) {
		start := time.Now()
		_, _, err := OpenPostgresWaiting(ctx, nowhere, Options{}, 2*time.Second)
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "could not be reached for 2 s: store: open PostgreSQL database herd@") {
			t.Errorf("a server never up: %v", err)
		}
		if took < 2*time.Second || took > 4*time.Second {
			t.Errorf("gave up after %v; want 2 s and a little", took)
		}
	})

	t.Run("stopped while waiting", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, _, err := OpenPostgresWaiting(ctx, nowhere, Options{}, time.Minute)
		if err == nil || !strings.Contains(err.Error(), "stopped while waiting for the database") || time.Since(start) > 2*time.Second {
			t.Errorf("stopped after %v: %v; want the stop at once", time.Since(start), err)
		}
	})
}
