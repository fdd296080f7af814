package models

import (
	"context"
	"path/filepath"
	"testing"

	"herd/internal/pgtest"
)

// dbDriver opens a fresh store of one database engine for a test. The
// store's tests run on every driver (forEachDriver), so each query is
// proven on SQLite and on PostgreSQL.
type dbDriver struct {
	name string
	open func(t testing.TB, opts Options) (*Store, error)
}

var drivers = []dbDriver{
	{"sqlite", func(t testing.TB, opts Options) (*Store, error) {
		return Open(filepath.Join(t.TempDir(), "herd.db"), opts)
	}},
	// Each test gets a schema of its own (pgtest.DSN).
	{"postgres", func(t testing.TB, opts Options) (*Store, error) {
		return OpenPostgres(pgtest.DSN(t), opts)
	}},
}

// forEachDriver runs f as a subtest per driver.
func forEachDriver(t *testing.T, f func(t *testing.T, d dbDriver)) {
	t.Helper()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) { f(t, d) })
	}
}

// openStore opens a fresh store with opts; the test's end closes it.
func (d dbDriver) openStore(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := d.open(t, opts)
	if err != nil {
		t.Fatalf("open %s: %v", d.name, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (d dbDriver) newStore(t testing.TB) *Store { return d.openStore(t, Options{}) }

// newThreadWriter opens a fresh store with one thread of user u1 and a
// Writer on it, which the test's end closes.
func (d dbDriver) newThreadWriter(t testing.TB) (*Store, *Thread, *Writer) {
	t.Helper()
	s := d.newStore(t)
	th, err := s.CreateThread(context.Background(), "u1", "t")
	if err != nil {
		t.Fatal(err)
	}
	w := s.NewWriter(WriterOptions{})
	t.Cleanup(w.Close)
	return s, th, w
}
