package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
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
