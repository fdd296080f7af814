package models

import (
	"os/exec"
	"strings"
	"testing"
)

// databasePackages are the imports that open or speak to a database.
var databasePackages = []string{"github.com/jackc/pgx", "gorm.io/", "github.com/mattn/go-sqlite3", "database/sql", "github.com/lib/pq"}

// TestOnlyModelsOpensTheDatabase: no production package of server/ or
// agent/ imports a database driver, pgx or GORM, so that models, whose
// package comment says it is the only code that touches the database,
// stays so (LISTEN and NOTIFY included: listen.go). Tests and the load
// driver (internal/loadtest) may.
func TestOnlyModelsOpensTheDatabase(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "herd/server/...", "herd/agent/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	pkgs := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(pkgs) < 2 {
		t.Fatalf("go list named %d packages; want server's and agent's", len(pkgs))
	}
	for _, line := range pkgs {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			for _, db := range databasePackages {
				if strings.HasPrefix(imp, db) {
					t.Errorf("%s imports %s: ask models for it", f[0], imp)
				}
			}
		}
	}
}
