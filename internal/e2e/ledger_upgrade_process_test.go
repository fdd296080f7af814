package e2e

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
)

// TestUpgradeGivesTheLedgerOwners: the binary started on a database from
// before the ledger named its owners (no usage_entries.user_id, budgets
// read through idx_usage_thread_created) gives each call its thread's
// owner: the budget's spend and the admin's usage per user are what they
// were before the upgrade, and deleting the thread after it gives no
// budget back (docs/DESIGN.md §6).
func TestUpgradeGivesTheLedgerOwners(t *testing.T) {
	t.Parallel() // its own data directories, schema and ports
	dir := t.TempDir()
	p := startHerdWith(t, dir, "HERD_BUDGETS_DEFAULT_TOKENS=1000000", "HERD_BUDGETS_DEFAULT_PERIOD=month")
	c := p.signIn()
	var th struct{ ID string }
	c.call("POST", "/api/threads", map[string]string{"title": "old"}, &th)
	c.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": "Compare:\n- alpha\n- beta"}, nil)
	waitRunEnd(t, c, th.ID, 60*time.Second)
	_, used := budgetOf(c)
	byUser := usageByUser(c)
	if used == 0 {
		t.Fatal("the run used no tokens")
	}
	stopHerd(t, p)

	toLedgerWithoutOwners(t, filepath.Join(dir, "herd.db"))
	p = p.startAgain()
	c = p.signIn()
	if _, after := budgetOf(c); after != used {
		t.Errorf("after the upgrade the budget's spend is %d, want %d as before", after, used)
	}
	if after := usageByUser(c); after != byUser {
		t.Errorf("after the upgrade the admin's usage per user is %s, want %s", after, byUser)
	}
	c.call("DELETE", "/api/threads/"+th.ID, nil, nil)
	if _, after := budgetOf(c); after != used {
		t.Errorf("after the delete the budget's spend is %d, want %d", after, used)
	}
	stopHerd(t, p)
}

// usageByUser is the admin usage history's users, as JSON.
func usageByUser(c *client) string {
	var h struct {
		ByUser json.RawMessage `json:"by_user"`
	}
	c.call("GET", "/api/admin/usage?days=7", nil, &h)
	return string(h.ByUser)
}

// toLedgerWithoutOwners turns the stopped instance's SQLite database into
// the ledger's shape before owners.
func toLedgerWithoutOwners(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		"DROP INDEX idx_usage_user_created",
		"ALTER TABLE usage_entries DROP COLUMN user_id",
		"CREATE INDEX idx_usage_thread_created ON usage_entries (thread_id, created_at)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
