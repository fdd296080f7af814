package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"herd/internal/pgtest"
)

// auditPage is GET /api/admin/audit, as much as these tests read.
type auditPage struct {
	Entries []struct {
		Action   string
		Instance string
		Target   struct{ ID string }
		After    map[string]any
	}
}

// TestClusterAudit: two instances on one PostgreSQL database keep one
// audit log. An action on either is on record with the instance that took
// it, readable on both; and when both start with a retention, the old
// entries go once, recorded once, whichever instance purged them.
func TestClusterAudit(t *testing.T) {
	t.Parallel() // its own data directories, schema and ports
	dsn := pgtest.DSN(t)
	env := clusterEnv(dsn, "HERD_AUDIT_RETENTION_DAYS=30")
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca, cb := a.signIn(), b.signIn()
	var u struct{ ID string }
	ca.call("POST", "/api/admin/users", map[string]string{"email": "ann@example.com", "password": "long enough pw"}, &u)
	cb.call("PATCH", "/api/admin/users/"+u.ID, map[string]string{"role": "admin"}, nil)

	var log auditPage
	ca.call("GET", "/api/admin/audit?target="+u.ID, nil, &log)
	if len(log.Entries) != 2 || log.Entries[0].Action != "user.role" || log.Entries[1].Action != "user.create" {
		t.Fatalf("entries of ann on A: %+v", log.Entries)
	}
	role, create := log.Entries[0].Instance, log.Entries[1].Instance
	if role == "" || create == "" || role == create {
		t.Errorf("instances: role change on %q, creation on %q; want two instances named", role, create)
	}

	// Old entries, then both instances started again: each purges at
	// start.
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for i := range 3 {
		if _, err := conn.Exec(context.Background(), `INSERT INTO audit_entries (at, action, target_kind, target_id) VALUES ($1, 'user.delete', 'user', $2)`,
			time.Now().AddDate(0, 0, -40-i), fmt.Sprintf("old%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	stopHerd(t, a)
	stopHerd(t, b)
	a, b = a.startAgain(), b.startAgain()
	cb = b.signIn()
	var purges auditPage
	cb.call("GET", "/api/admin/audit?action=audit.purge", nil, &purges)
	if len(purges.Entries) != 1 || fmt.Sprint(purges.Entries[0].After["removed"]) != "3" {
		t.Errorf("purges on record: %+v, want one of 3 entries", purges.Entries)
	}
	var old auditPage
	cb.call("GET", "/api/admin/audit?action=user.delete", nil, &old)
	if len(old.Entries) != 0 {
		t.Errorf("old entries left: %+v", old.Entries)
	}
	stopHerd(t, a)
	stopHerd(t, b)
}
