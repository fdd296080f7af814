package models

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestWriterWritesEveryField writes one row of each model the Writer
// inserts by hand with every field set, reads it back through GORM and
// compares field by field: a field the Writer's INSERTs leave out reads
// back as its zero value and fails here. The fields are filled by
// reflection, so a field added to a model is covered without editing
// this test.
func TestWriterWritesEveryField(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		s, th, w := d.newThreadWriter(t)
		ctx := context.Background()
		at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		var msg Message
		var ev RunEvent
		var use UsageEntry
		var run Run
		for _, m := range []any{&msg, &ev, &use, &run} {
			fill(t, m, at)
			reflect.ValueOf(m).Elem().FieldByName("ThreadID").SetString(th.ID)
		}
		if err := w.Write(ctx, Record{Run: &run}, Record{Message: &msg}, Record{Event: &ev}, Record{Usage: &use}); err != nil {
			t.Fatal(err)
		}
		// The writer assigns seq and the event's id; the rest is the caller's.
		for _, c := range []struct {
			name      string
			want, got any
			key       string
		}{
			{"message", &msg, &Message{}, "id = ?"},
			{"event", &ev, &RunEvent{}, "id = ?"},
			{"usage", &use, &UsageEntry{}, "call_id = ?"},
			{"run", &run, &Run{}, "id = ?"},
		} {
			key := reflect.ValueOf(c.want).Elem().Field(0).Interface()
			if err := s.r.Where(c.key, key).Take(c.got).Error; err != nil {
				t.Errorf("%s: read back: %v", c.name, err)
				continue
			}
			want, got := reflect.ValueOf(c.want).Elem(), reflect.ValueOf(c.got).Elem()
			for i := range want.NumField() {
				f := want.Type().Field(i)
				if !reflect.DeepEqual(got.Field(i).Interface(), want.Field(i).Interface()) {
					t.Errorf("%s.%s reads back %v, want %v", c.name, f.Name, got.Field(i).Interface(), want.Field(i).Interface())
				}
			}
		}
	})
}

// fill sets every exported field of the struct m points to a non-zero
// value of its kind.
func fill(t *testing.T, m any, at time.Time) {
	t.Helper()
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		if !f.CanSet() {
			continue
		}
		switch p := f.Addr().Interface().(type) {
		case *string:
			*p = strings.ToLower(name) + "-value"
		case *int64:
			*p = int64(1000 + i)
		case *bool:
			*p = true
		case *time.Time:
			*p = at.Add(time.Duration(i) * time.Second)
		case **time.Time:
			ti := at.Add(time.Duration(i) * time.Second)
			*p = &ti
		case *JSON:
			*p = JSON(`{"field":"` + name + `"}`)
		case *any:
			// An in-memory value (gorm:"-"), not a column.
		default:
			t.Fatalf("fill %T.%s: no value for %s; teach fill this type", m, name, f.Type())
		}
	}
}

// TestWriterStoresWhatGormStores writes the same rows through the Writer
// and through GORM and compares the stored SQLite values, type and text:
// the Writer hands the driver a time as the text the driver would make of
// it and a JSON document as its bytes (insertTable.value), which must
// store exactly what GORM's path stores.
func TestWriterStoresWhatGormStores(t *testing.T) {
	s, th, w := newThreadWriter(t)
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 1, 2, 3, 456789000, time.FixedZone("X", 5400))
	kwargs := JSON(`{"subagent_status":"completed","é":"<b>"}`)
	event := func(id int64) *RunEvent {
		return &RunEvent{ID: id, ThreadID: th.ID, Seq: id, RunID: "r", EventType: "subagent.end", Category: "subagent", TaskID: "t", Content: kwargs, CreatedAt: at}
	}
	message := func(id string) *Message {
		return &Message{ID: id, ThreadID: th.ID, Seq: 1000, RunID: "r", Type: "tool", Content: "c", AdditionalKwargs: kwargs, CreatedAt: at}
	}
	if err := w.Write(ctx, Record{Event: event(0)}, Record{Message: message("by-writer")}); err != nil {
		t.Fatal(err)
	}
	if err := s.w.Create(event(9999)).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.w.Create(message("by-gorm")).Error; err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"SELECT typeof(created_at) || ':' || created_at || '|' || typeof(content) || ':' || content || '|' || typeof(metadata) FROM run_events ORDER BY id",
		"SELECT typeof(created_at) || ':' || created_at || '|' || typeof(additional_kwargs) || ':' || additional_kwargs || '|' || typeof(tool_calls) FROM messages ORDER BY id DESC",
	} {
		var got []string
		if err := s.w.Raw(q).Scan(&got).Error; err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0] != got[1] {
			t.Errorf("%s:\nwriter %q\ngorm   %q", q, got[0], got[len(got)-1])
		}
	}
}

// TestWriterRowsAcrossCommits writes rows whose values repeat and change
// from row to row and from commit to commit (the Writer reuses a value
// of the row above when it is equal, that row being the last of an
// earlier commit for the first row of one) and reads each back.
func TestWriterRowsAcrossCommits(t *testing.T) {
	s, th, w := newThreadWriter(t)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var want []RunEvent
	for commit, runs := range [][]string{{"r1", "r1", "r2"}, {"r2", "r1"}, {"r1"}, {"r3", "r3"}} {
		var recs []Record
		for i, run := range runs {
			e := &RunEvent{ThreadID: th.ID, RunID: run, EventType: "subagent.step", Category: "subagent", TaskID: run + "-task",
				Content: JSON(`{"n":` + strings.Repeat("1", i+1) + `}`), CreatedAt: t0.Add(time.Duration(commit/2) * time.Second)}
			recs = append(recs, Record{Event: e})
		}
		if err := w.Write(ctx, recs...); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			want = append(want, *r.Event)
		}
	}
	var got []RunEvent
	if err := s.r.Order("seq").Find(&got).Error; err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d events read back, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Seq != w.Seq || g.RunID != w.RunID || g.TaskID != w.TaskID || string(g.Content) != string(w.Content) || !g.CreatedAt.Equal(w.CreatedAt) {
			t.Errorf("event %d reads back %+v, want %+v", i, g, w)
		}
	}
}
