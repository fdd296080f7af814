package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestDataDirNameTakenLiterally: a data directory whose name holds what a
// URI reads otherwise (#, ?, %, a space) keeps the database in that
// directory, private (0600): herd serves from it, answers ready, backs
// it up, and puts nothing beside the directory. Before, "#" cut the
// path short: the database went to a file named after the directory's
// prefix, with the umask's mode, and "?" lost the pragmas.
func TestDataDirNameTakenLiterally(t *testing.T) {
	for _, name := range []string{"data#1", "data?mode=memory", "data%2Fx", "my data", "a #?%41 b"} {
		t.Run(name, func(t *testing.T) {
			// Not t.TempDir: its name would hold the subtest's name, and
			// a path cut short there would leave the test's own directory.
			parent, err := os.MkdirTemp("", "herd-datadir-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(parent) })
			dir := filepath.Join(parent, name)
			p := startHerd(t, dir)
			c := p.signIn()
			var th struct{ ID string }
			c.call("POST", "/api/threads", map[string]string{"title": "kept"}, &th)
			if resp, err := http.Get(p.url + "/readyz"); err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("/readyz: %v %v", resp, err)
			} else {
				resp.Body.Close()
			}
			for _, f := range []string{"herd.db", "herd.db-wal", "herd.db-shm"} {
				fi, err := os.Stat(filepath.Join(dir, f))
				if err != nil {
					t.Errorf("%s in the data directory: %v", f, err)
				} else if fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %#o, want 0600", f, fi.Mode().Perm())
				}
			}
			stopHerd(t, p)
			entries, _ := os.ReadDir(parent)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if !slices.Equal(names, []string{name}) {
				t.Errorf("beside the data directory: %q, want only %q", names, name)
			}
			backup := parent + ".copy.db"
			t.Cleanup(func() { os.Remove(backup) })
			if code, out := herdCmd(t, parent, "backup", "--data-dir", dir, backup); code != 0 {
				t.Fatalf("backup: exit %d\n%s", code, out)
			}
			// The copy holds the thread: the database herd wrote is the one in dir.
			restored := parent + ".restored"
			t.Cleanup(func() { os.RemoveAll(restored) })
			if err := os.MkdirAll(restored, 0o700); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(backup)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(restored, "herd.db"), b, 0o600); err != nil {
				t.Fatal(err)
			}
			p = startHerd(t, restored)
			if code, body := p.signIn().status("GET", "/api/threads/"+th.ID, nil); code != http.StatusOK {
				t.Errorf("the thread in the backup of %q: %d %s", name, code, body)
			}
			stopHerd(t, p)
		})
	}
}
