package server

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestDeletesKeepTheLedger: deleting a thread, through the routes and
// past the undo window, gives its owner no budget back (/api/auth/me's
// used is unchanged, the next run is still refused), and neither the
// purge nor an admin's delete of the user changes the admin's usage
// totals (she still has a thread with calls then); the deleted user's
// calls stay under their id, labelled as a deleted user (docs/DESIGN.md
// §6).
func TestDeletesKeepTheLedger(t *testing.T) {
	purged := make(chan string, 1)
	a := newApp(t, withServer(func(o *Options) {
		o.UndoWindow = 100 * time.Millisecond
		o.OnThreadPurged = func(id string) { purged <- id }
	}))
	admin, ann := a.newUser("admin@example.com", true), a.newUser("ann@example.com", false)
	th, kept := ann.newThread(""), ann.newThread("")
	for _, id := range []string{th, kept} {
		ann.startRun(id, "Compare:\n- alpha\n- beta")
		a.waitIdle(id)
	}
	// A budget of exactly what her two threads used: spent, and spent no
	// more if the deleted thread's calls were given back.
	budget := func(tokens int64) *budgetJSON {
		admin.mustJSON("PUT", "/api/admin/budgets", map[string]any{"users": map[string]any{ann.id: map[string]any{"tokens": tokens, "period": "day"}}}, http.StatusOK, nil)
		return ann.budgetOf()
	}
	before := budget(budget(1 << 40).Used)
	if before == nil || before.Used == 0 || before.Used != before.Limit {
		t.Fatalf("ann's budget after her runs: %+v, want it just spent", before)
	}
	totals := func() usageHistoryReply {
		var h usageHistoryReply
		admin.mustJSON("GET", "/api/admin/usage?days=7", nil, http.StatusOK, &h)
		return h
	}
	history := totals()
	refused := func(when string) {
		t.Helper()
		other := ann.newThread("")
		if r := ann.do("POST", "/api/threads/"+other+"/runs", map[string]string{"content": "more"}); r.status != http.StatusTooManyRequests || r.errorCode() != "budget_exhausted" {
			t.Errorf("%s, a run: %d %s, want 429 budget_exhausted", when, r.status, r.body)
		}
	}
	refused("before the delete")

	ann.mustJSON("DELETE", "/api/threads/"+th, nil, http.StatusNoContent, nil)
	if got := <-purged; got != th {
		t.Fatalf("purged %s, want %s", got, th)
	}
	if r := ann.do("POST", "/api/threads/"+th+"/restore", nil); r.status != http.StatusNotFound {
		t.Fatalf("the thread is not purged: restore %d", r.status)
	}
	if after := ann.budgetOf(); after == nil || after.Used != before.Used {
		t.Errorf("after the purge /api/auth/me says %+v, want used %d as before", after, before.Used)
	}
	refused("after the purge")
	if after := totals(); !reflect.DeepEqual(after, history) {
		t.Errorf("the purge changed the admin's usage:\n%+v\nwant\n%+v", after, history)
	}

	admin.mustJSON("DELETE", "/api/admin/users/"+ann.id, nil, http.StatusNoContent, nil)
	after := totals()
	if !reflect.DeepEqual(after.Totals, history.Totals) || !reflect.DeepEqual(after.ByModel, history.ByModel) || len(after.ByUser) != 1 {
		t.Fatalf("deleting the user changed the admin's usage:\n%+v\nwant\n%+v", after, history)
	}
	if u := after.ByUser[0]; u.UserID != ann.id || u.Email != "" || u.Total != history.ByUser[0].Total {
		t.Errorf("the deleted user's usage is %+v, want ann's id, no email, her totals %+v", u, history.ByUser[0].Total)
	}
	page := string(admin.do("GET", "/admin/usage?days=7", nil).body)
	if !strings.Contains(page, "(deleted user)") {
		t.Error("the usage page does not label the deleted user's calls")
	}
}
