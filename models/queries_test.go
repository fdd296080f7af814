package models

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestEveryQuery runs the store's queries not covered by the other tests
// on every driver, checking each answer: users, sessions, API tokens,
// settings, threads, message pages, event filters, cards, runs, and the
// deletions that cascade by hand.
func TestEveryQuery(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		ctx := context.Background()
		now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		s := d.openStore(t, Options{Now: func() time.Time { return now }})
		check := func(what string, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		admin, err := s.CreateUser(ctx, "a@example.com", "h", RoleAdmin, false)
		check("create admin", err)
		u, err := s.CreateUser(ctx, "U@Example.com", "h", RoleUser, false)
		check("create user", err)
		if _, err := s.CreateUser(ctx, "u@example.com", "h", RoleUser, false); !errors.Is(err, ErrConflict) {
			t.Errorf("duplicate email: %v, want ErrConflict", err)
		}
		if n, err := s.CountUsers(ctx); err != nil || n != 2 {
			t.Errorf("count users %d, %v", n, err)
		}
		if us, err := s.Users(ctx); err != nil || len(us) != 2 || us[0].ID != admin.ID {
			t.Errorf("users %v, %v", us, err)
		}
		if got, err := s.User(ctx, u.ID); err != nil || got.Email != "u@example.com" {
			t.Errorf("user %v, %v", got, err)
		}
		theme, model := ThemeDark, "demo-deep"
		if got, err := s.UpdateUser(ctx, u.ID, UserUpdate{Theme: &theme, DefaultModel: &model}); err != nil || got.Theme != ThemeDark || got.DefaultModel != model {
			t.Errorf("update preferences %v, %v", got, err)
		}
		if got, err := s.UserByEmail(ctx, "u@example.com"); err != nil || got.Theme != ThemeDark || got.DefaultModel != model {
			t.Errorf("preferences read back %v, %v", got, err)
		}

		// Sessions: one expired, two live; touch; delete all but one.
		for i, id := range []string{"s1", "s2", "s3"} {
			exp := now.Add(time.Hour)
			if i == 0 {
				exp = now.Add(-time.Hour)
			}
			check("create session", s.CreateSession(ctx, &Session{ID: id, UserID: u.ID, CSRFToken: "c", CreatedAt: now.Add(time.Duration(i) * time.Second), ExpiresAt: exp}))
		}
		if _, _, err := s.SessionUser(ctx, "s1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("expired session: %v", err)
		}
		sess, su, err := s.SessionUser(ctx, "s2")
		check("session user", err)
		if su.ID != u.ID {
			t.Errorf("session user %s", su.ID)
		}
		check("touch", s.TouchSession(ctx, sess, "10.0.0.1", "test agent"))
		if ss, err := s.Sessions(ctx, u.ID); err != nil || len(ss) != 2 || ss[0].ID != "s3" {
			t.Errorf("sessions %v, %v", ss, err)
		}
		gone, err := s.DeleteUserSessions(ctx, u.ID, "s3")
		check("delete sessions", err)
		if len(gone) != 2 {
			t.Errorf("deleted sessions %v, want s1 and s2", gone)
		}
		check("delete expired", s.DeleteExpiredSessions(ctx))
		check("delete session", s.DeleteSession(ctx, "s3"))
		if ss, _ := s.Sessions(ctx, u.ID); len(ss) != 0 {
			t.Errorf("sessions left: %v", ss)
		}

		// API tokens.
		check("create token", s.CreateAPIToken(ctx, &APIToken{ID: "t1", UserID: u.ID, Name: "ci", Hash: "hash1", Prefix: "hd_"}))
		if tu, err := s.TokenUser(ctx, "hash1"); err != nil || tu.ID != u.ID {
			t.Errorf("token user %v, %v", tu, err)
		}
		if ts, err := s.APITokens(ctx, u.ID); err != nil || len(ts) != 1 {
			t.Errorf("tokens %v, %v", ts, err)
		}
		if h, err := s.DeleteAPIToken(ctx, u.ID, "t1"); err != nil || h != "hash1" {
			t.Errorf("delete token %q, %v", h, err)
		}

		// Settings: set, overwrite, missing.
		check("set", s.SetSetting(ctx, "token_usage", "on"))
		check("overwrite", s.SetSetting(ctx, "token_usage", "off"))
		if v, err := s.Setting(ctx, "token_usage"); err != nil || v != "off" {
			t.Errorf("setting %q, %v", v, err)
		}
		if _, err := s.Setting(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("missing setting: %v", err)
		}

		// A thread with a run, messages, events and usage.
		th, err := s.CreateThread(ctx, u.ID, "first")
		check("create thread", err)
		if _, err := s.RenameThread(ctx, u.ID, th.ID, "renamed"); err != nil {
			t.Error(err)
		}
		if _, err := s.RenameThread(ctx, admin.ID, th.ID, "x"); !errors.Is(err, ErrNotFound) {
			t.Errorf("rename another's thread: %v", err)
		}
		w := s.NewWriter(WriterOptions{})
		defer w.Close()
		run := &Run{ID: "r1", ThreadID: th.ID, UserID: u.ID, Status: RunRunning, ModelName: "m1", StartedAt: now}
		recs := []Record{{Run: run},
			{Message: &Message{ID: "h1", ThreadID: th.ID, RunID: "r1", Type: "human", Content: "hi"}},
			{Event: &RunEvent{ThreadID: th.ID, RunID: "r1", EventType: "subagent.queued", Category: CategorySubagent, TaskID: "c1"}},
			{Event: &RunEvent{ThreadID: th.ID, RunID: "r1", EventType: "subagent.step", Category: CategorySubagent, TaskID: "c1"}},
			{Event: &RunEvent{ThreadID: th.ID, RunID: "r1", EventType: "subagent.step", Category: CategorySubagent, TaskID: "c1"}},
			{Message: &Message{ID: "a1", ThreadID: th.ID, RunID: "r1", Type: "ai", Content: "ok"}},
			{Message: &Message{ID: "t1", ThreadID: th.ID, RunID: "r1", Type: "tool", Content: "done"}},
			{Message: &Message{ID: "h2", ThreadID: th.ID, RunID: "r1", Type: "human", Content: "again"}},
			{Usage: &UsageEntry{CallID: "k1", ThreadID: th.ID, RunID: "r1", ModelName: "m1", InputTokens: 1, OutputTokens: 2, TotalTokens: 3}},
		}
		check("write", w.Write(ctx, recs...))
		if ar, err := s.ActiveRun(ctx, th.ID); err != nil || ar.ID != "r1" {
			t.Errorf("active run %v, %v", ar, err)
		}
		if rr, err := s.RunningRuns(ctx); err != nil || len(rr) != 1 {
			t.Errorf("running runs %v, %v", rr, err)
		}
		if cards, err := s.CardEventsBetween(ctx, th.ID, "r1", 0, 0); err != nil || len(cards) != 2 || cards[1].Seq != 4 {
			t.Errorf("card events %v, %v: want the queued row and the latest step", cards, err)
		}
		if es, more, err := s.Events(ctx, th.ID, EventFilter{TaskID: "c1", RunID: "r1", EventTypes: []string{"subagent.step"}, Category: CategorySubagent, Limit: 1}); err != nil || len(es) != 1 || !more {
			t.Errorf("events %v, %v, %v", es, more, err)
		}
		// A page of one human/AI message: the newest, h2; before it a1 with its tool result.
		page, older, err := s.MessagesBefore(ctx, th.ID, 0, 1)
		if err != nil || len(page) != 1 || page[0].ID != "h2" || !older {
			t.Errorf("newest page %v, %v, %v", page, older, err)
		}
		page, _, err = s.MessagesBefore(ctx, th.ID, page[0].Seq, 1)
		if err != nil || len(page) != 2 || page[0].ID != "a1" || page[1].ID != "t1" {
			t.Errorf("second page %v, %v: want a1 with its tool result", page, err)
		}
		run.Status, run.EndedAt = RunCompleted, &now
		check("end run", w.Write(ctx, Record{Run: run}))
		if _, err := s.ActiveRun(ctx, th.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("active run after its end: %v", err)
		}
		if r, err := s.Run(ctx, th.ID, "r1"); err != nil || r.Status != RunCompleted || r.EndedAt == nil {
			t.Errorf("run %v, %v", r, err)
		}
		if m, err := s.LastModel(ctx, th.ID); err != nil || m != "m1" {
			t.Errorf("last model %q, %v", m, err)
		}
		if rs, err := s.Runs(ctx, th.ID); err != nil || len(rs) != 1 {
			t.Errorf("runs %v, %v", rs, err)
		}
		if rep, err := s.Usage(ctx, th.ID, "r1"); err != nil || rep.Lead.TotalTokens != 3 {
			t.Errorf("usage %+v, %v", rep, err)
		}

		// A scheduled delete hides the thread, an undo brings it back, and
		// a due purge removes a second thread for good.
		other, err := s.CreateThread(ctx, u.ID, "other")
		check("create thread", err)
		check("schedule", s.ScheduleThreadDelete(ctx, u.ID, th.ID, now.Add(time.Minute)))
		if _, err := s.Thread(ctx, u.ID, th.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("a thread scheduled for deletion is visible: %v", err)
		}
		if ts, _, err := s.ThreadsPage(ctx, u.ID, nil, 10); err != nil || len(ts) != 1 || ts[0].ID != other.ID {
			t.Errorf("threads page %v, %v: want only the other thread", ts, err)
		}
		if _, err := s.RestoreThread(ctx, u.ID, th.ID); err != nil {
			t.Errorf("restore: %v", err)
		}
		check("schedule other", s.ScheduleThreadDelete(ctx, u.ID, other.ID, now))
		if ds, err := s.ScheduledDeletes(ctx); err != nil || len(ds) != 1 || ds[0].ID != other.ID {
			t.Errorf("scheduled deletes %v, %v", ds, err)
		}
		if err := s.PurgeThread(ctx, other.ID, now.Add(-time.Second)); !errors.As(err, new(*NotDueError)) {
			t.Errorf("a purge before it is due: %v, want NotDueError", err)
		}
		check("purge", s.PurgeThread(ctx, other.ID, now))
		if ds, _ := s.ScheduledDeletes(ctx); len(ds) != 0 {
			t.Errorf("scheduled deletes after the purge: %v", ds)
		}

		// Deleting the user deletes their threads and everything in them.
		check("delete user", s.DeleteUser(ctx, u.ID))
		if _, err := s.Thread(ctx, u.ID, th.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("thread of a deleted user: %v", err)
		}
		if es, _, _ := s.Events(ctx, th.ID, EventFilter{}); len(es) != 0 {
			t.Errorf("%d events left", len(es))
		}
		if ms, _ := s.Messages(ctx, th.ID); len(ms) != 0 {
			t.Errorf("%d messages left", len(ms))
		}
	})
}
