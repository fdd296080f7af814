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
