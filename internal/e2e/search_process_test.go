package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRefusesToStartWithoutFTS5: a herd built without the sqlite_fts5 tag
// (plain `go build`) has no SQLite full-text search, so search could not
// work: it exits at once saying how to build it, rather than serve.
func TestRefusesToStartWithoutFTS5(t *testing.T) {
	t.Parallel() // its own data directories, schema and ports
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "herd-without-fts5")
	build := exec.Command("go", "build", "-o", bin, "herd")
	build.Dir = root
	// Without any tag, whatever GOFLAGS the caller runs the tests with.
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	// No metrics listener: a busy 9180 must not be what stops it.
	cmd.Env = append(os.Environ(), "HERD_METRICS_ADDR=")
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("herd without FTS5: %v (context %v), want it to exit with an error\n%s", err, ctx.Err(), out)
	}
	for _, want := range []string{"FTS5", "make build", "-tags sqlite_fts5"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("its message does not say %q:\n%s", want, out)
		}
	}
}
