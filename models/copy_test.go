package models

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
)

// TestCopyCoversEveryModel: a copy carries every table the store
// migrates, so a model added to allModels cannot be forgotten; and the
// tables it lists are the ones a migrated database has.
func TestCopyCoversEveryModel(t *testing.T) {
	s := newStore(t)
	tables, err := migrationTables(s.w)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tb := range tables {
		got = append(got, tb.Table)
	}
	// The search index is derived: the target's triggers build it from
	// the messages copied (models/search_postgres.go).
	var want []string
	if err := s.w.Raw("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'message_search%' ORDER BY name").Scan(&want).Error; err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("a copy carries %v; the store's tables are %v", got, want)
	}
	if len(tables) != len(allModels) {
		t.Errorf("%d tables for %d models", len(tables), len(allModels))
	}
}

// fillSource writes a small instance into a fresh SQLite store: a user
// with a session, a token and preferences, a setting, threads with runs,
// messages, events and ledger rows (one unreported, one a call cut by a
// restart), one message with a NUL byte that PostgreSQL cannot store as
// is. It returns the database's path.
func fillSource(t *testing.T, threads, events int) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "herd.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	u, err := s.CreateUser(ctx, "ann@example.com", "hash", RoleAdmin, false)
	if err != nil {
		t.Fatal(err)
	}
	dark, model := ThemeDark, "claude"
	if _, err := s.UpdateUser(ctx, u.ID, UserUpdate{Theme: &dark, DefaultModel: &model}); err != nil {
		t.Fatal(err)
	}
	seen := time.Now().UTC()
	must(t, s.CreateSession(ctx, &Session{ID: "sess-hash", UserID: u.ID, CSRFToken: "csrf", ExpiresAt: seen.Add(time.Hour), LastSeenAt: &seen, UserAgent: "test", IP: "127.0.0.1"}))
	must(t, s.CreateAPIToken(ctx, &APIToken{ID: "tok1", UserID: u.ID, Name: "ci", Hash: "h1", Prefix: "herd_ab"}))
	must(t, s.SetSetting(ctx, "token_usage_enabled", "false"))
	w := s.NewWriter(WriterOptions{})
	defer w.Close()
	for i := range threads {
		th, err := s.CreateThread(ctx, u.ID, fmt.Sprintf("thread %d", i))
		if err != nil {
			t.Fatal(err)
		}
		runID := fmt.Sprintf("run-%d", i)
		recs := []Record{
			{Run: &Run{ID: runID, ThreadID: th.ID, UserID: u.ID, Status: RunRunning, ModelName: "m", StartedAt: seen}},
			{Message: &Message{ID: fmt.Sprintf("m%d-1", i), ThreadID: th.ID, RunID: runID, Type: "human", Content: "hello\x00world"}},
		}
		for j := range events {
			recs = append(recs, Record{Event: &RunEvent{ThreadID: th.ID, RunID: runID, EventType: "task_step", Category: CategorySubagent, TaskID: "call_1", Content: JSON(fmt.Sprintf(`{"n":%d}`, j))}})
		}
		recs = append(recs,
			Record{Message: &Message{ID: fmt.Sprintf("m%d-2", i), ThreadID: th.ID, RunID: runID, Type: "ai", Content: "done", Usage: JSON(`{"input_tokens":3}`)}},
			Record{Usage: &UsageEntry{CallID: fmt.Sprintf("c%d-1", i), ThreadID: th.ID, RunID: runID, ModelName: "m", InputTokens: 10, OutputTokens: 5, TotalTokens: 15, CacheReadTokens: 2}},
			Record{Usage: &UsageEntry{CallID: fmt.Sprintf("c%d-2", i), ThreadID: th.ID, RunID: runID, TaskID: "call_1", ModelName: "m", Unreported: true}},
			Record{Usage: LostCall(th.ID, th.UserID, runID, "call_1", "m", "v1.r1")},
			Record{Run: &Run{ID: runID, ThreadID: th.ID, UserID: u.ID, Status: RunCompleted, ModelName: "m", StartedAt: seen, EndedAt: &seen}},
		)
		must(t, w.Write(ctx, recs...))
	}
	return path
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func openSource(t *testing.T, path string) *Source {
	t.Helper()
	src, err := OpenSQLiteSource(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	return src
}

// TestCopyToPostgres: every table arrives whole and verified, the same
// threads, seqs, ledger and preferences read back through the store, and
// new rows numbered after the copy do not collide with copied ids.
func TestCopyToPostgres(t *testing.T) {
	ctx := context.Background()
	path := fillSource(t, 3, 40)
	dst := drivers[1].newStore(t)
	rep, err := dst.CopyToPostgres(ctx, openSource(t, path), CopyOptions{BatchRows: 7})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"users": 1, "sessions": 1, "api_tokens": 1, "threads": 3, "messages": 6, "runs": 3, "run_events": 120, "usage_entries": 9, "settings": 1}
	for _, tc := range rep.Tables {
		if tc.Source != want[tc.Table] || tc.Target != tc.Source {
			t.Errorf("%s: %d in the source, %d copied; want %d", tc.Table, tc.Source, tc.Target, want[tc.Table])
		}
	}
	if rep.Threads != 3 || rep.Usage.TotalTokens != 45 || rep.Usage.Calls != 9 || rep.Sanitized != 3 {
		t.Errorf("report %+v: want 3 threads, 45 tokens over 9 calls, 3 sanitized texts", rep)
	}
	u, err := dst.UserByEmail(ctx, "ann@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if u.Theme != ThemeDark || u.DefaultModel != "claude" || !u.IsAdmin() {
		t.Errorf("user after the copy: %+v", u)
	}
	if v, err := dst.Setting(ctx, "token_usage_enabled"); err != nil || v != "false" {
		t.Errorf("setting: %q, %v", v, err)
	}
	if _, tu, err := dst.SessionUser(ctx, "sess-hash"); err != nil || tu.ID != u.ID {
		t.Errorf("session: %v", err)
	}
	ths, err := dst.Threads(ctx, u.ID)
	if err != nil || len(ths) != 3 {
		t.Fatalf("threads: %d, %v", len(ths), err)
	}
	th := ths[0]
	if th.LastSeq != 42 {
		t.Errorf("last seq %d, want 42", th.LastSeq)
	}
	usage, err := dst.Usage(ctx, th.ID, "")
	if err != nil || usage.Total.TotalTokens != 15 || usage.Total.UnreportedCalls != 2 || usage.Total.LostCalls != 1 || usage.Lead.Calls != 1 {
		t.Errorf("usage after the copy: %+v, %v", usage, err)
	}
	// The next event PostgreSQL numbers follows the copied ids, and the
	// thread's sequence goes on from its copied last seq.
	w := dst.NewWriter(WriterOptions{})
	defer w.Close()
	ev := RunEvent{ThreadID: th.ID, RunID: "run-x", EventType: "task_step", Category: CategorySubagent, Content: JSON(`{}`)}
	if err := w.Write(ctx, Record{Event: &ev}); err != nil {
		t.Fatalf("write after the copy: %v", err)
	}
	if ev.Seq != 43 || ev.ID <= 120 {
		t.Errorf("new event: seq %d id %d; want seq 43 and an id past the copied 120", ev.Seq, ev.ID)
	}
}

// TestCopyRefusesNonEmptyTarget: a target with herd data is refused and
// left as it was; with Replace it is emptied first and the copy
// verifies.
func TestCopyRefusesNonEmptyTarget(t *testing.T) {
	ctx := context.Background()
	path := fillSource(t, 1, 2)
	dst := drivers[1].newStore(t)
	if _, err := dst.CreateUser(ctx, "other@example.com", "h", RoleAdmin, false); err != nil {
		t.Fatal(err)
	}
	_, err := dst.CopyToPostgres(ctx, openSource(t, path), CopyOptions{})
	var full *ErrTargetNotEmpty
	if !errors.As(err, &full) || full.Error() != "the target database already holds herd data (1 users)" {
		t.Fatalf("copy into a non-empty target: %v", err)
	}
	if n, _ := dst.CountUsers(ctx); n != 1 {
		t.Errorf("the refused copy changed the target: %d users", n)
	}
	rep, err := dst.CopyToPostgres(ctx, openSource(t, path), CopyOptions{Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Replaced != 1 {
		t.Errorf("replaced %d rows, want 1", rep.Replaced)
	}
	if _, err := dst.UserByEmail(ctx, "other@example.com"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the target's own user survived Replace: %v", err)
	}
}

// TestCopyFailureLeavesTargetEmpty: a copy that fails halfway (here a
// source row the target refuses) commits nothing, so it can simply be run
// again.
func TestCopyFailureLeavesTargetEmpty(t *testing.T) {
	ctx := context.Background()
	path := fillSource(t, 2, 3)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A ledger row whose thread id is longer than its column: SQLite
	// ignores the size, PostgreSQL's varchar(36) refuses it, once the
	// tables before the ledger were copied.
	must(t, s.w.Exec("INSERT INTO usage_entries (call_id, thread_id, run_id, task_id, model_name, input_tokens, output_tokens, total_tokens, cache_read_tokens, unreported, created_at) VALUES ('bad', ?, 'r', '', 'm', 1, 1, 2, 0, 0, ?)",
		strings.Repeat("x", 40), time.Now()).Error)
	must(t, s.Close())
	dst := drivers[1].newStore(t)
	_, err = dst.CopyToPostgres(ctx, openSource(t, path), CopyOptions{})
	if err == nil || !strings.Contains(err.Error(), "copy usage_entries") {
		t.Fatalf("the copy of a ledger row the target refuses: %v", err)
	}
	for _, m := range []any{&User{}, &Thread{}, &Message{}, &RunEvent{}} {
		var n int64
		must(t, dst.r.Model(m).Count(&n).Error)
		if n != 0 {
			t.Errorf("%T: %d rows left by the failed copy", m, n)
		}
	}
}

// TestCopySourceChecks: a missing file, a directory and a file that is
// not a herd database are refused before anything is read.
func TestCopySourceChecks(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other.db")
	o, err := gorm.Open(sqlite.Open(other), &gorm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	must(t, o.Exec("CREATE TABLE notes (id integer)").Error)
	closeGorm(o)
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.db"), "no database at " + filepath.Join(dir, "missing.db")},
		{dir, dir + " is not a database file"},
		{other, other + " is not a herd database"},
	} {
		if _, err := OpenSQLiteSource(tc.path); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.path, err, tc.want)
		}
	}
}

// TestCompareSeqs: a thread missing from the target or with other seqs
// is named; equal ones are not.
func TestCompareSeqs(t *testing.T) {
	src := map[string]seqs{"a": {3, 3}, "b": {5, 5}, "c": {2, 2}}
	dst := map[string]seqs{"a": {3, 3}, "b": {5, 4}}
	got := compareSeqs(src, dst)
	want := []string{
		"thread b: last seq 5 (records to 5) in the source, 5 (records to 4) in the target",
		"thread c is missing",
	}
	if !slices.Equal(got, want) {
		t.Errorf("compareSeqs = %q, want %q", got, want)
	}
}
