package server

import (
	"database/sql"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// holdWriteLock takes the database's write lock from outside herd, as an
// external `BEGIN IMMEDIATE` does, until release is called.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback(); _ = db.Close() }
}

// With the write lock held elsewhere, readiness says so within its
// deadline, health and metrics answer at once, a request that must write
// gets 503 with Retry-After, and readiness recovers by itself.
func TestReadinessUnderAHeldLock(t *testing.T) {
	a := newApp(t)
	admin := a.newUser("root@example.com", true)
	anon := a.anonymous()
	release := holdWriteLock(t, a.dbPath)
	defer release()

	start := time.Now()
	r := anon.do("GET", "/readyz", nil)
	if d := time.Since(start); r.status != http.StatusServiceUnavailable || d > 2*time.Second {
		t.Errorf("readyz under a held lock: %d after %v, want 503 within 2 s: %s", r.status, d, r.body)
	}
	if !strings.Contains(string(r.body), "the database is locked by another process") || r.header.Get("Retry-After") == "" {
		t.Errorf("readyz: %s (Retry-After %q), want the reason and Retry-After", r.body, r.header.Get("Retry-After"))
	}
	// Waiting on the lock would take the busy timeout (5 s); the bound is
	// loose only for -race on a loaded 2-core machine (typically < 5 ms).
	// /metrics is served on its own listener, so through its handler.
	get := func(path string) int {
		if path == "/metrics" {
			rec := httptest.NewRecorder()
			a.metrics.Handler("").ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9180"+path, nil))
			return rec.Code
		}
		return admin.do("GET", path, nil).status
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		start := time.Now()
		if status := get(path); status != 200 || time.Since(start) > time.Second {
			t.Errorf("%s under a held lock: %d after %v, want 200 at once", path, status, time.Since(start))
		}
	}
	r = admin.do("POST", "/api/threads", map[string]string{"title": "t"})
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), "storage_unavailable") {
		t.Errorf("thread creation under a held lock: %d %s (Retry-After %q), want 503 storage_unavailable", r.status, r.body, r.header.Get("Retry-After"))
	}

	release()
	if r := anon.do("GET", "/readyz", nil); r.status != 200 {
		t.Errorf("readyz after the lock was released: %d %s", r.status, r.body)
	}
	admin.mustJSON("POST", "/api/threads", map[string]string{"title": "t"}, http.StatusCreated, nil)
}

// Metrics never wait on a database write: with the write lock held while
// subagents finish (each end waits on the journal), a scrape answers at
// once, and the run completes once the lock is released.
func TestMetricsDuringAHeldLockMidRun(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 150, 1), demoModel("demo-deep", 150, 1)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	u.startRun(th, "Check:\n- alpha\n- beta\n- gamma")
	for a.rt.Stats().ByStatus["running"] == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	release := holdWriteLock(t, a.dbPath)
	deadline := time.Now().Add(3 * time.Second)
	var worst time.Duration
	for time.Now().Before(deadline) {
		start := time.Now()
		rec := httptest.NewRecorder()
		a.metrics.Handler("").ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9180/metrics", nil))
		worst = max(worst, time.Since(start))
		if rec.Code != 200 {
			t.Fatalf("metrics: %d", rec.Code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	release()
	if worst > 500*time.Millisecond {
		t.Errorf("a metrics scrape took %v while the database was locked; it must not wait on a write", worst)
	}
	a.waitIdle(th)
}
