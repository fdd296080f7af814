package agent

import (
	"os"
	"testing"

	"herd/internal/pgtest"
)

// TestMain stops the PostgreSQL cluster the recovery tests on PostgreSQL
// started, if any. Goroutine leaks are checked per test (newHarness).
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}
