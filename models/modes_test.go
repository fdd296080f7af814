package models

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// mode returns path's permission bits.
func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestFreshDataDirIsPrivate runs with a umask that masks nothing, so only
// Open's own modes and chmods decide.
func TestFreshDataDirIsPrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "var", "herd")
	path := filepath.Join(dir, "herd.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateThread(context.Background(), "u1", "t"); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "copy.db")
	if err := Backup(context.Background(), path, backup); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want fs.FileMode
	}{
		{filepath.Dir(dir), 0o700},
		{dir, 0o700},
		{path, 0o600},
		{path + "-wal", 0o600},
		{path + "-shm", 0o600},
		{backup, 0o600},
	} {
		if got := mode(t, c.path); got != c.want {
			t.Errorf("%s: mode %#o, want %#o", c.path, got, c.want)
		}
	}
}

func TestExistingLooseFilesAreTightenedAndTheDirWarned(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "herd.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.WriteFile(f, nil, 0o644); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		if err := os.Chmod(f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var log bytes.Buffer
	s, err = Open(path, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if got := mode(t, f); got != 0o600 {
			t.Errorf("%s: mode %#o after Open, want 0600", f, got)
		}
	}
	if got := mode(t, dir); got != 0o755 {
		t.Errorf("the operator's dir: mode %#o, want it left at 0755", got)
	}
	if !strings.Contains(log.String(), "the data directory is open to other users") || !strings.Contains(log.String(), "mode=0755") {
		t.Errorf("no warning about the open data directory: %q", log.String())
	}
}

// TestDataDirNameTakenLiterally: the database goes to the path Open is
// given, whatever URI syntax its directory's name holds, private, with
// its pragmas, readable by the probe and by a backup; nothing is created
// beside the directory.
func TestDataDirNameTakenLiterally(t *testing.T) {
	for _, name := range []string{"data#1", "data?mode=memory", "data%2Fx", "my data", "a #?%41 b"} {
		t.Run(name, func(t *testing.T) {
			// Not t.TempDir: its name holds the subtest's, and a path cut
			// short there would leave the test's directory.
			parent, err := os.MkdirTemp("", "herd-datadir-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(parent) })
			path := filepath.Join(parent, name, "herd.db")
			s, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			if _, err := s.CreateThread(ctx, "u1", "t"); err != nil {
				t.Fatal(err)
			}
			if got, err := s.pragma(ctx, "journal_mode"); err != nil || got != "wal" {
				t.Errorf("journal_mode %q, %v: the DSN's parameters were lost", got, err)
			}
			if err := s.Probe(ctx); err != nil {
				t.Errorf("probe: %v", err)
			}
			for _, f := range []string{path, path + "-wal", path + "-shm"} {
				if got := mode(t, f); got != 0o600 {
					t.Errorf("%s: mode %#o, want 0600", f, got)
				}
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 1 {
				t.Errorf("%d entries beside the data directory, want none", len(entries)-1)
			}
			backup := filepath.Join(parent, name, "copy.db")
			if err := Backup(ctx, path, backup); err != nil {
				t.Errorf("backup: %v", err)
			}
		})
	}
}
