package models

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestConsoleEntries: the console's entries on both engines: created
// once per kind and name, listed oldest first, updated and deleted, with
// ErrConflict and ErrNotFound where they apply.
func TestConsoleEntries(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		ctx := context.Background()
		now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
		s := d.openStore(t, Options{Now: func() time.Time { now = now.Add(time.Second); return now }})
		b := &ConsoleEntry{Kind: EntryModel, Name: "b", Spec: JSON(`{"name":"b"}`), Sealed: "herd1:k:x"}
		a := &ConsoleEntry{Kind: EntryModel, Name: "a", Spec: JSON(`{"name":"a"}`)}
		for _, e := range []*ConsoleEntry{b, a, {Kind: EntryMCP, Name: "a", Spec: JSON(`{}`)}} {
			if err := s.CreateConsoleEntry(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreateConsoleEntry(ctx, &ConsoleEntry{Kind: EntryModel, Name: "a", Spec: JSON(`{}`)}); !errors.Is(err, ErrConflict) {
			t.Fatalf("a second model a: %v, want ErrConflict", err)
		}
		got, err := s.ConsoleEntries(ctx, EntryModel)
		if err != nil || len(got) != 2 || got[0].Name != "b" || got[1].Name != "a" || got[0].Sealed != "herd1:k:x" {
			t.Fatalf("models = %+v, %v; want b then a, b's secret kept", got, err)
		}
		a.Spec, a.Sealed = JSON(`{"name":"a","vision":true}`), "herd1:k:y"
		if err := s.UpdateConsoleEntry(ctx, a); err != nil {
			t.Fatal(err)
		}
		got, _ = s.ConsoleEntries(ctx, EntryModel)
		if string(got[1].Spec) != `{"name":"a","vision":true}` || got[1].Sealed != "herd1:k:y" {
			t.Fatalf("after the update a = %+v", got[1])
		}
		if err := s.UpdateConsoleEntry(ctx, &ConsoleEntry{Kind: EntryModel, Name: "zz", Spec: JSON(`{}`)}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("update of no entry: %v, want ErrNotFound", err)
		}
		if err := s.DeleteConsoleEntry(ctx, EntryModel, "b"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteConsoleEntry(ctx, EntryModel, "b"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a second delete: %v, want ErrNotFound", err)
		}
		if got, _ := s.ConsoleEntries(ctx, EntryMCP); len(got) != 1 {
			t.Fatalf("the mcp entry went with the model's delete: %+v", got)
		}
	})
}
