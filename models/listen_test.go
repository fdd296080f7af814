package models

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestListenNotify: a Notifier's batch reaches a Listener on the channel
// in order, the listener's connection carries ListenerName, a quiet wait
// ends at its deadline and the connection still answers; a SQLite store
// has neither side.
func TestListenNotify(t *testing.T) {
	s := drivers[1].newStore(t)
	ctx := context.Background()
	schema, err := s.Schema(ctx)
	if err != nil || schema == "" {
		t.Fatalf("schema %q, %v", schema, err)
	}
	channel := "herd_" + schema
	l, err := s.Listen(ctx, channel)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var named int
	if err := s.r.Raw("SELECT count(*) FROM pg_stat_activity WHERE application_name = ? AND pid <> pg_backend_pid() AND datname = current_database() AND query LIKE 'LISTEN %'", ListenerName).Scan(&named).Error; err != nil || named < 1 {
		t.Errorf("listeners named %q: %d, %v", ListenerName, named, err)
	}
	n := s.NewNotifier(channel)
	defer n.Close()
	if err := n.Send(ctx, []string{"one", "two"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"one", "two"} {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		got, err := l.Wait(wctx)
		cancel()
		if err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = l.Wait(wctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a quiet wait: %v, want the deadline", err)
	}
	if err := l.Ping(ctx); err != nil {
		t.Errorf("ping after a quiet wait: %v", err)
	}

	lite := drivers[0].newStore(t)
	if _, err := lite.Listen(ctx, channel); err == nil {
		t.Error("a SQLite store listens")
	}
	if err := lite.NewNotifier(channel).Send(ctx, []string{"x"}); err == nil {
		t.Error("a SQLite store notifies")
	}
}
