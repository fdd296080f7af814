package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretKeyFileOthersMayRead: herd refuses to start on a data
// directory whose key file others may read, says which chmod to run, and
// opens no database.
func TestSecretKeyFileOthersMayRead(t *testing.T) {
	t.Parallel() // its own data directories, schema and ports
	cwd := t.TempDir()
	data := filepath.Join(cwd, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(data, "secret.key")
	if err := os.WriteFile(key, []byte("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := herdCmd(t, cwd, "--data-dir", data, "--addr", "127.0.0.1:0")
	if code == 0 || !strings.Contains(out, "chmod 600 "+key) {
		t.Fatalf("exit %d, want a refusal naming chmod 600 %s:\n%s", code, key, out)
	}
	if _, err := os.Stat(filepath.Join(data, "herd.db")); err == nil {
		t.Error("herd opened a database before refusing the key file")
	}
}
