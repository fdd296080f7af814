package models

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm/clause"
)

// Backup writes a consistent copy of the database at dbPath to out, safe
// while herd serves (VACUUM INTO reads one snapshot; WAL lets writers go
// on meanwhile). It opens the database read-only and never creates one:
// a dbPath with no database is an error, so a mistyped data directory
// cannot yield an empty backup. out must not exist yet.
func Backup(ctx context.Context, dbPath, out string) error {
	info, err := os.Stat(dbPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("backup: no database at %s (is the data directory right?)", dbPath)
	case err != nil:
		return fmt.Errorf("backup: %w", err)
	case !info.Mode().IsRegular():
		return fmt.Errorf("backup: %s is not a database file", dbPath)
	}
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("backup: %s already exists", out)
	}
	db, err := sql.Open("sqlite3", readOnlyDSN(dbPath))
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer db.Close()
	// A file that is not a database fails here rather than in VACUUM.
	var tables int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE name = 'messages'").Scan(&tables); err != nil {
		return fmt.Errorf("backup: read %s: %w", dbPath, err)
	}
	if tables == 0 {
		return fmt.Errorf("backup: %s is not a herd database", dbPath)
	}
	return vacuumPrivately(ctx, db, out)
}

// vacuumPrivately writes the copy 0600 whatever the umask: VACUUM INTO
// creates its file with the umask's mode, so it writes into a 0700
// directory beside out, is made private there, then linked into place,
// which also refuses an out created meanwhile.
func vacuumPrivately(ctx context.Context, db *sql.DB, out string) error {
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".herd-backup-")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer os.RemoveAll(tmp)
	copyPath := filepath.Join(tmp, "herd.db")
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", copyPath); err != nil {
		return fmt.Errorf("backup to %s: %w", out, err)
	}
	if err := forgetGeneration(ctx, copyPath); err != nil {
		return fmt.Errorf("backup to %s: %w", out, err)
	}
	if err := os.Chmod(copyPath, 0o600); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := os.Link(copyPath, out); errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("backup: %s already exists", out)
	} else if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

// readOnlyDSN opens path read-only (mode=ro): no write, no creation. WAL
// readers still need the -shm file, which a running herd keeps.
func readOnlyDSN(path string) string {
	return fileDSN(path, busyTimeout, url.Values{"mode": {"ro"}})
}

// restoreGenerationKey is the setting RestoreGeneration keeps.
const restoreGenerationKey = "restore_generation"

// forgetGeneration deletes the restore generation from a backup's copy,
// so that whenever it is restored the herd that opens it mints a new one
// (RestoreGeneration): restored twice, it is two generations. A copy from
// a herd older than the setting has no settings table and nothing to
// forget.
func forgetGeneration(ctx context.Context, copyPath string) error {
	db, err := sql.Open("sqlite3", fileDSN(copyPath, busyTimeout, url.Values{"mode": {"rw"}}))
	if err != nil {
		return err
	}
	defer db.Close()
	var tables int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'settings'").Scan(&tables); err != nil || tables == 0 {
		return err
	}
	_, err = db.ExecContext(ctx, "DELETE FROM settings WHERE key = ?", restoreGenerationKey)
	return err
}

// RestoreGeneration names the history this database holds, so that a
// page whose records came from another history — the database before a
// backup was restored — can be told to reload rather than be sent
// records whose seqs it holds different ones under (docs/DESIGN.md §11).
// It is the same for every instance and every start on one database, and
// changes with every documented restore:
//
//   - SQLite: `herd backup` leaves the generation out of its copy
//     (forgetGeneration), and the first start on a database without one
//     mints one at random.
//   - PostgreSQL: pg_dump copies the setting, but a restore writes its
//     row anew, so the row's xmin (the transaction that wrote it) differs
//     from the live row's, and a restore into another cluster changes the
//     cluster's system identifier; both go into the generation. Neither is
//     in a dump, so no restore can bring them back.
func (s *Store) RestoreGeneration(ctx context.Context) (string, error) {
	minted := Setting{Key: restoreGenerationKey, Value: rand.Text(), UpdatedAt: s.now().UTC()}
	// Instances starting together each offer one; the first stays.
	if err := s.w.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&minted).Error; err != nil {
		return "", fmt.Errorf("store: restore generation: %w", err)
	}
	var row struct{ Value, Xmin string }
	q := "SELECT value, '' AS xmin FROM settings WHERE key = ?"
	if s.pg {
		q = "SELECT value, xmin::text AS xmin FROM settings WHERE key = ?"
	}
	if err := s.w.WithContext(ctx).Raw(q, restoreGenerationKey).Scan(&row).Error; err != nil {
		return "", fmt.Errorf("store: restore generation: %w", err)
	}
	cluster, err := s.clusterID(ctx)
	if err != nil {
		return "", fmt.Errorf("store: restore generation: %w", err)
	}
	sum := sha256.Sum256([]byte(row.Value + "/" + row.Xmin + "/" + cluster))
	return hex.EncodeToString(sum[:12]), nil
}

// clusterID is PostgreSQL's system identifier, which initdb draws once per
// cluster; "" on SQLite, and where a provider has revoked the function
// (the row's xmin still changes with every restore; the identifier only
// keeps two fresh clusters from agreeing on it by chance).
func (s *Store) clusterID(ctx context.Context) (string, error) {
	if !s.pg {
		return "", nil
	}
	var id string
	err := s.w.WithContext(ctx).Raw("SELECT system_identifier::text FROM pg_control_system()").Scan(&id).Error
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "42501" { // insufficient_privilege
		return "", nil
	}
	return id, err
}
