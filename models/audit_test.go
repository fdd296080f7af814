package models

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestAuditAddListPurge(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		ctx := context.Background()
		s := d.newStore(t)
		t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
		add := func(at time.Time, actor, email, action, target string) *AuditEntry {
			t.Helper()
			e := &AuditEntry{At: at, ActorID: actor, ActorEmail: email, ActorIP: "192.0.2.1", Action: action, TargetID: target,
				Before: MustJSON(map[string]string{"role": "user"}), After: MustJSON(map[string]string{"role": "admin"})}
			if err := s.AddAudit(ctx, e); err != nil {
				t.Fatal(err)
			}
			return e
		}
		// In a non-UTC zone: the store keeps UTC.
		zone := time.FixedZone("x", 5*3600)
		e1 := add(t0.In(zone), "a1", "Ann@example.com", AuditUserCreate, "u1")
		add(t0.Add(time.Hour), "a1", "ann@example.com", AuditUserRole, "u1")
		add(t0.Add(2*time.Hour), "a2", "bob@example.com", AuditSettingsTokenUsage, "token_usage_enabled")
		add(t0.Add(3*time.Hour), "a2", "bob@example.com", AuditUserDelete, "u1")

		if err := s.AddAudit(ctx, &AuditEntry{Action: "user.explode"}); !errors.Is(err, ErrAuditAction) {
			t.Fatalf("unknown action: %v, want ErrAuditAction", err)
		}
		if e1.TargetKind != "user" || e1.ID == 0 {
			t.Fatalf("entry: kind %q id %d, want user and an id", e1.TargetKind, e1.ID)
		}

		actions := func(f AuditFilter, limit int) (got []string, more bool) {
			t.Helper()
			es, more, err := s.Audit(ctx, f, limit)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				got = append(got, e.Action)
			}
			return got, more
		}
		for _, tc := range []struct {
			name string
			f    AuditFilter
			want string
		}{
			{"all newest first", AuditFilter{}, "user.delete settings.token_usage user.role user.create"},
			{"actor by id", AuditFilter{Actor: "a1"}, "user.role user.create"},
			{"actor by email any case", AuditFilter{Actor: "ANN@example.com"}, "user.role user.create"},
			{"action prefix", AuditFilter{Action: "user."}, "user.delete user.role user.create"},
			{"action exact", AuditFilter{Action: "user.role"}, "user.role"},
			{"wildcards are literal", AuditFilter{Action: "user_%"}, ""},
			{"target", AuditFilter{TargetKind: "user", TargetID: "u1"}, "user.delete user.role user.create"},
			{"time range", AuditFilter{Since: t0.Add(time.Hour), Until: t0.Add(3 * time.Hour)}, "settings.token_usage user.role"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, _ := actions(tc.f, 10)
				if g := strings.Join(got, " "); g != tc.want {
					t.Fatalf("got %q, want %q", g, tc.want)
				}
			})
		}

		// Keyset paging: two pages of two, an entry added meanwhile
		// shifts nothing.
		es, more, err := s.Audit(ctx, AuditFilter{}, 2)
		if err != nil || !more || len(es) != 2 {
			t.Fatalf("page 1: %d entries, more %v, %v", len(es), more, err)
		}
		add(t0.Add(4*time.Hour), "a1", "ann@example.com", AuditUserUpdate, "u2")
		got, more := actions(AuditFilter{Before: es[1].ID}, 2)
		if g := strings.Join(got, " "); g != "user.role user.create" || more {
			t.Fatalf("page 2: %q more %v, want user.role user.create and no more", g, more)
		}

		var each []string
		if err := s.EachAudit(ctx, AuditFilter{Action: "user"}, func(e *AuditEntry) error { each = append(each, e.Action); return nil }); err != nil {
			t.Fatal(err)
		}
		if g := strings.Join(each, " "); g != "user.update user.delete user.role user.create" {
			t.Fatalf("each: %q", g)
		}

		stored, _, _ := s.Audit(ctx, AuditFilter{Action: "user.create"}, 1)
		if len(stored) != 1 || !stored[0].At.Equal(t0) || stored[0].ActorIP != "192.0.2.1" || string(stored[0].After) != `{"role":"admin"}` {
			t.Fatalf("stored entry: %+v", stored)
		}

		n, err := s.PurgeAudit(ctx, t0.Add(2*time.Hour))
		if err != nil || n != 2 {
			t.Fatalf("purge: %d, %v; want 2", n, err)
		}
		if n, err := s.PurgeAudit(ctx, t0.Add(2*time.Hour)); err != nil || n != 0 {
			t.Fatalf("purge again: %d, %v; want 0", n, err)
		}
		got, _ = actions(AuditFilter{}, 10)
		if g := strings.Join(got, " "); g != "user.update user.delete settings.token_usage" {
			t.Fatalf("after purge: %q", g)
		}
	})
}

// TestAuditPurgeTogether: instances purging at once (PostgreSQL) remove
// each entry once between them, and fail nothing.
func TestAuditPurgeTogether(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		ctx := context.Background()
		s := d.newStore(t)
		t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		for i := range 200 {
			if err := s.AddAudit(ctx, &AuditEntry{At: t0.Add(time.Duration(i) * time.Minute), Action: AuditUserCreate}); err != nil {
				t.Fatal(err)
			}
		}
		const purgers = 4
		removed := make(chan int64, purgers)
		errs := make(chan error, purgers)
		for range purgers {
			go func() {
				n, err := s.PurgeAudit(ctx, t0.Add(150*time.Minute))
				removed <- n
				errs <- err
			}()
		}
		var total int64
		for range purgers {
			total += <-removed
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if total != 150 {
			t.Fatalf("removed %d in all, want 150", total)
		}
	})
}

// TestEachAuditBatches: an export reads batch after batch, each entry
// once, newest first, within the filter.
func TestEachAuditBatches(t *testing.T) {
	forEachDriver(t, func(t *testing.T, d dbDriver) {
		ctx := context.Background()
		s := d.newStore(t)
		t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		n := 2*auditBatch + 7
		es := make([]AuditEntry, n)
		for i := range es {
			es[i] = AuditEntry{At: t0.Add(time.Duration(i) * time.Second), Action: AuditUserCreate, TargetKind: "user"}
		}
		if err := s.w.CreateInBatches(es, 200).Error; err != nil {
			t.Fatal(err)
		}
		var ids []int64
		err := s.EachAudit(ctx, AuditFilter{Since: t0.Add(5 * time.Second)}, func(e *AuditEntry) error { ids = append(ids, e.ID); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != n-5 {
			t.Fatalf("%d entries, want %d", len(ids), n-5)
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] >= ids[i-1] {
				t.Fatalf("entry %d: id %d after %d, want newest first, each once", i, ids[i], ids[i-1])
			}
		}
	})
}

func TestMaskAudit(t *testing.T) {
	type model struct {
		Name    string            `json:"name"`
		APIKey  string            `json:"api_key"`
		Headers map[string]string `json:"headers"`
		Env     []string          `json:"env"`
		Tokens  int               `json:"max_tokens"`
	}
	before := model{Name: "m", APIKey: "sk-old", Headers: map[string]string{"Authorization": "Bearer x", "X-Team": "t1"}, Env: []string{"A=1"}, Tokens: 5}
	after := before
	after.APIKey = "sk-new"
	after.Headers = map[string]string{"Authorization": "Bearer x", "X-Team": "t2"}
	for _, tc := range []struct {
		name       string
		before     any
		after      any
		wantBefore string
		wantAfter  string
	}{
		{"changed and kept secrets", before, after,
			`{"api_key":"********","env":["********"],"headers":{"Authorization":"********","X-Team":"********"},"max_tokens":5,"name":"m"}`,
			`{"api_key":"******** (changed)","env":["********"],"headers":{"Authorization":"********","X-Team":"******** (changed)"},"max_tokens":5,"name":"m"}`},
		{"a create has no before", nil, map[string]any{"email": "a@b.c", "password": "hunter22", "client_secret": ""}, "",
			`{"client_secret":"","email":"a@b.c","password":"******** (changed)"}`},
		{"switches and counts are no secrets", map[string]bool{"token_usage_enabled": false}, map[string]bool{"token_usage_enabled": true},
			`{"token_usage_enabled":false}`, `{"token_usage_enabled":true}`},
		{"a URL shows its host", map[string]any{"url": "https://mcp.example.com/t/abc123?key=zz", "base_url": "https://api.example.com"},
			map[string]any{"url": "https://mcp.example.com/t/abc123?key=zz", "base_url": "http://user:hunter22@10.0.0.1:8000/v1"},
			`{"base_url":"https://api.example.com","url":"https://mcp.example.com/********"}`,
			`{"base_url":"http://10.0.0.1:8000/******** (changed)","url":"https://mcp.example.com/********"}`},
		{"a nested secret", map[string]any{"oidc": map[string]any{"ClientSecret": "s"}}, nil, `{"oidc":{"ClientSecret":"********"}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, a, err := MaskAudit(tc.before, tc.after)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.wantBefore || string(a) != tc.wantAfter {
				t.Fatalf("got\n before %s\n after  %s\nwant\n before %s\n after  %s", b, a, tc.wantBefore, tc.wantAfter)
			}
			for _, secret := range []string{"sk-old", "sk-new", "Bearer", "hunter22", "A=1", "abc123", "zz"} {
				if strings.Contains(string(b)+string(a), secret) {
					t.Fatalf("%q shown: %s %s", secret, b, a)
				}
			}
			if len(b) > 0 && !json.Valid(b) || len(a) > 0 && !json.Valid(a) {
				t.Fatal("invalid JSON")
			}
		})
	}
}
