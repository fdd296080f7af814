package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"herd/models"
)

// envDatabaseDSN is the variable herd serve reads database.dsn from; herd
// migrate reads its target there too when --to is not given.
const envDatabaseDSN = "HERD_DATABASE_DSN"

// migrateUsage is herd migrate's usage line.
const migrateUsage = "usage: herd migrate --from SQLITE_FILE [--to POSTGRES_DSN] [--replace]"

// runMigrate is `herd migrate`: it copies a SQLite instance's database
// into an empty PostgreSQL database and verifies the copy. It returns 0
// once the copy is committed and verified, 1 when it refuses or fails
// (nothing is then written to the target), 2 on bad usage.
func runMigrate(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("herd migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the SQLite database `FILE` to copy: a data directory's herd.db, or the directory")
	to := fs.String("to", "", "the PostgreSQL `DSN` to copy into (default $"+envDatabaseDSN+", which keeps a password out of the process list)")
	replace := fs.Bool("replace", false, "delete the target's herd data first (by default a target that holds any is refused)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, migrateUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	dsn := *to
	if dsn == "" {
		dsn = lookup(environ, envDatabaseDSN)
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "herd migrate: unexpected argument %q\n%s\n", fs.Arg(0), migrateUsage)
		return 2
	case *from == "":
		fmt.Fprintf(stderr, "herd migrate: --from is required: the SQLite database to copy (DATA_DIR/herd.db)\n%s\n", migrateUsage)
		return 2
	case dsn == "":
		fmt.Fprintf(stderr, "herd migrate: give the target as --to DSN or in %s\n%s\n", envDatabaseDSN, migrateUsage)
		return 2
	}
	if err := migrate(ctx, *from, dsn, *replace, stdout); err != nil {
		fmt.Fprintf(stderr, "herd migrate: %v\n", err)
		return 1
	}
	return 0
}

// migrate copies from into dsn, holding the source's data directory lock
// (no herd can start on it meanwhile) and the target's instance lock.
func migrate(ctx context.Context, from, dsn string, replace bool, out io.Writer) error {
	// A data directory names its database.
	if fi, err := os.Stat(from); err == nil && fi.IsDir() {
		from = filepath.Join(from, "herd.db")
	}
	unlock, err := lockSource(from)
	if err != nil {
		return err
	}
	defer unlock()
	src, err := models.OpenSQLiteSource(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := models.OpenPostgres(dsn, models.Options{})
	if err != nil {
		return err
	}
	defer dst.Close()
	// A herd serving the target holds a live lease (docs/DESIGN.md §14).
	if live, err := dst.LiveInstances(ctx); err != nil {
		return err
	} else if len(live) > 0 {
		return fmt.Errorf("a herd is serving the target database %s (instance at %s); stop it before migrating into it", dst.Name(), live[0].Addr)
	}
	fmt.Fprintf(out, "Copying %s into %s …\n", from, dst.Name())
	rep, err := dst.CopyToPostgres(ctx, src, models.CopyOptions{Replace: replace, Progress: progress(out)})
	var full *models.ErrTargetNotEmpty
	switch {
	case errors.As(err, &full):
		return fmt.Errorf("%v.\nNothing was copied. herd migrate copies into an empty database: point --to at a new one, or run again with --replace to delete what the target holds first (a migration that failed before left nothing to delete)", full)
	case errors.Is(err, models.ErrVerify):
		return fmt.Errorf("%w.\nNothing was committed: the target is as it was", err)
	case err != nil:
		return fmt.Errorf("%w.\nNothing was committed: the target is as it was, and the migration can be run again", err)
	}
	printReport(out, rep)
	return nil
}

// progressEvery is how many rows of a table pass between progress lines,
// so a large copy shows it is moving.
const progressEvery = 100_000

func progress(out io.Writer) func(table string, copied int64) {
	last := map[string]int64{}
	return func(table string, copied int64) {
		if copied/progressEvery > last[table]/progressEvery {
			fmt.Fprintf(out, "  %s: %d rows…\n", table, copied)
		}
		last[table] = copied
	}
}

// printReport is the summary a successful migration prints.
func printReport(out io.Writer, rep models.CopyReport) {
	if rep.Replaced > 0 {
		fmt.Fprintf(out, "Deleted the %d rows the target held (--replace).\n", rep.Replaced)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "table\tsource\tcopied\t")
	for _, t := range rep.Tables {
		if t.Absent {
			fmt.Fprintf(tw, "%s\t(none)\t0\t\n", t.Table)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", t.Table, t.Source, t.Target)
	}
	_ = tw.Flush()
	fmt.Fprintf(out, "Verified: the rows of every table, the last seq of all %d threads, and the usage ledger (%d calls, %d tokens).\n",
		rep.Threads, rep.Usage.Calls, rep.Usage.TotalTokens)
	if rep.Sanitized > 0 {
		fmt.Fprintf(out, "%d texts held NUL bytes or invalid UTF-8, which PostgreSQL cannot store: they were copied with U+FFFD in their place.\n", rep.Sanitized)
	}
	secs := max(rep.Elapsed.Seconds(), 0.001)
	fmt.Fprintf(out, "Copied %d rows in %s (%.0f rows/s).\n", rep.Rows(), rep.Elapsed.Round(time.Millisecond), float64(rep.Rows())/secs)
	fmt.Fprintln(out, "Done. Start herd with database.driver: postgres and database.dsn naming the target (docs/OPERATIONS.md).")
}

// lockSource takes the owner lock of the data directory holding the
// SQLite file path, as herd serve does (datadir.go), and holds it until
// unlock: a copy taken while a herd writes would miss what it writes
// next, and no herd can start on the source while it is copied. The lock
// file is created beside a herd.db (a data directory, where serve would
// create it), never beside another file, such as a backup: no herd serves
// that.
func lockSource(path string) (unlock func(), err error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no database at %s", path)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	flags := os.O_RDWR
	if filepath.Base(path) == "herd.db" {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), flags, 0o600)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return func() {}, nil
	case err != nil:
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	if err := lockOwner(f, dir); err != nil {
		var inUse *errDataDirInUse
		if errors.As(err, &inUse) {
			return nil, fmt.Errorf("%v; herd migrate copies a database at rest", err)
		}
		return nil, err
	}
	return func() { _ = f.Close() }, nil
}
