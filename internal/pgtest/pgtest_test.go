package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestHaltResume: a private cluster refuses connections while halted and
// keeps its data across Resume.
func TestHaltResume(t *testing.T) {
	c := Private(t)
	ctx := context.Background()
	exec := func() error {
		conn, err := pgx.Connect(ctx, c.DSN)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS kept (n int); INSERT INTO kept VALUES (1)")
		return err
	}
	if err := exec(); err != nil {
		t.Fatal(err)
	}
	if err := c.Halt(); err != nil {
		t.Fatal(err)
	}
	if err := exec(); err == nil {
		t.Fatal("a halted server took a connection")
	}
	if err := c.Resume(); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n); err != nil || n != 1 {
		t.Fatalf("after Resume: %d rows, %v", n, err)
	}
}
