package models

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"herd/internal/pgtest"
)

// generationOf opens the database open opens, reads its restore
// generation and closes it again, as one start of herd would.
func generationOf(t *testing.T, open func() (*Store, error)) string {
	t.Helper()
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, err := s.RestoreGeneration(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if g == "" {
		t.Fatal("an empty restore generation")
	}
	return g
}

// TestRestoreGenerationSQLite: the generation stays across restarts, and
// every restore of a `herd backup` copy starts a new one, even the same
// copy restored twice.
func TestRestoreGenerationSQLite(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "herd.db")
	openAt := func(path string) func() (*Store, error) {
		return func() (*Store, error) { return Open(path, Options{}) }
	}
	g1 := generationOf(t, openAt(live))
	if again := generationOf(t, openAt(live)); again != g1 {
		t.Fatalf("a restart changed the generation: %s, then %s", g1, again)
	}
	backup := filepath.Join(dir, "backup.db")
	if err := Backup(context.Background(), live, backup); err != nil {
		t.Fatal(err)
	}
	restore := func(to string) string {
		b, err := os.ReadFile(backup)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return to
	}
	first := restore(filepath.Join(t.TempDir(), "herd.db"))
	g2 := generationOf(t, openAt(first))
	if g2 == g1 {
		t.Fatalf("a restored backup kept the live generation %s", g1)
	}
	if again := generationOf(t, openAt(first)); again != g2 {
		t.Errorf("a restart after the restore changed the generation: %s, then %s", g2, again)
	}
	if g3 := generationOf(t, openAt(restore(filepath.Join(t.TempDir(), "herd.db")))); g3 == g1 || g3 == g2 {
		t.Errorf("the same backup restored twice: generations %s and %s (live %s), want each its own", g2, g3, g1)
	}
}

// TestRestoreGenerationPostgres restores a pg_dump with pg_restore
// --clean, as docs/OPERATIONS.md says: the dump holds the generation's
// setting, and the restored database must still name another history.
func TestRestoreGenerationPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	dump, restore := pgTool(t, "pg_dump"), pgTool(t, "pg_restore")
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema := cc.RuntimeParams["search_path"]
	// libpq knows no search_path keyword: the tools name the schema.
	conninfo := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cc.Host, cc.Port, cc.User, cc.Database)
	if cc.Password != "" {
		conninfo += " password=" + cc.Password
	}
	open := func() (*Store, error) { return OpenPostgres(dsn, Options{}) }
	g1 := generationOf(t, open)
	if again := generationOf(t, open); again != g1 {
		t.Fatalf("a restart changed the generation: %s, then %s", g1, again)
	}
	file := filepath.Join(t.TempDir(), "herd.dump")
	run(t, dump, "--format=custom", "--schema="+schema, "--file", file, conninfo)
	run(t, restore, "--clean", "--if-exists", "--dbname", conninfo, file)
	g2 := generationOf(t, open)
	if g2 == g1 {
		t.Fatalf("pg_restore kept the live generation %s", g1)
	}
	if again := generationOf(t, open); again != g2 {
		t.Errorf("a restart after the restore changed the generation: %s, then %s", g2, again)
	}
}

// pgTool finds a PostgreSQL client tool; without it the test skips,
// except in CI, where it fails (as pgtest does without a server).
func pgTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s: %v", name, err)
		}
		t.Skipf("%s: %v", name, err)
	}
	return p
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", filepath.Base(name), err, out)
	}
}
