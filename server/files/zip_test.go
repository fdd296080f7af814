package files

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

const testThread = "6f1f6b1e-8a52-4c1e-9d4e-3b0a2f9c7d10"

// newWorkspaces is Workspaces on a fresh root, with thread testThread's
// workspace made.
func newWorkspaces(t testing.TB) (*Workspaces, string) {
	t.Helper()
	root := t.TempDir()
	ws := filepath.Join(root, testThread)
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	return New(Options{Root: root, Logger: slog.New(slog.DiscardHandler)}), ws
}

// readZip reads every entry of a zip.
func readZip(t testing.TB, b []byte) map[string][]byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		out[f.Name], err = io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// versions is how many versions the writers of TestZipConsistentPerFile
// cycle through: enough to tell which of two is the newer.
const versions = 4

// version is version v of a file of size bytes: one byte repeated,
// 'A' for version 0, then 'B', 'C', 'D' and 'A' again.
func version(v, size int) []byte { return bytes.Repeat([]byte{byte('A' + v%versions)}, size) }

// heldState reports whether b is a state a file rewritten in place with
// version after version held at some moment: one version whole, or the
// next written over it from the start up to some point (a write in
// progress, which the kernel may leave half done for milliseconds while
// it throttles the writer). A copy that read part of the file before a
// write and part after a later one is neither.
func heldState(b []byte) bool {
	newer := b[0]
	rest := bytes.TrimLeft(b, string(newer))
	if len(rest) == 0 {
		return true
	}
	older := rest[0]
	return newer == 'A'+(older-'A'+1)%versions && len(bytes.TrimLeft(rest, string(older))) == 0
}

// TestZipConsistentPerFile: files rewritten in place version after
// version while they are zipped are in every zip as a state each held at
// one moment, never stitched from reads on either side of a write: one
// copied through memory, one through the spool. Both go through the same
// checks (snapshot); a spooled copy is where tearing shows (a
// copy_file_range is overtaken by the writer, one pread of 600 KiB seldom
// is): without the checks this fails at once.
func TestZipConsistentPerFile(t *testing.T) {
	w, ws := newWorkspaces(t)
	sizes := map[string]int{"small.txt": 600 << 10, "large.bin": 3 << 20}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for name, size := range sizes {
		f, err := os.Create(filepath.Join(ws, name))
		if err != nil {
			t.Fatal(err)
		}
		all := make([][]byte, versions)
		for v := range all {
			all[v] = version(v, size)
		}
		if _, err := f.Write(all[0]); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer f.Close()
			for v := 1; ctx.Err() == nil; v++ {
				if _, err := f.WriteAt(all[v%versions], 0); err != nil {
					t.Error(err)
					return
				}
				// Quiet moments, for copies to settle in (a zip under
				// the race detector copies slowly).
				time.Sleep(time.Duration(v%3) * 20 * time.Millisecond)
			}
		})
	}
	taken := map[string]int{}
	const zips = 30
	for range zips {
		var b bytes.Buffer
		if err := w.Zip(context.Background(), testThread, "", &b); err != nil {
			t.Fatal(err)
		}
		for name, data := range readZip(t, b.Bytes()) {
			if len(data) != sizes[name] || !heldState(data) {
				t.Fatalf("%s in a zip: %d bytes, not a state the file held", name, len(data))
			}
			taken[name]++
		}
	}
	cancel()
	wg.Wait()
	t.Logf("taken %v", taken)
	for name := range sizes {
		if taken[name] < zips/4 {
			t.Errorf("%s was in %d of %d zips: too few to tell", name, taken[name], zips)
		}
	}
}

// TestZipHotFile: a file rewritten without a pause is left out of a zip
// (it never holds still for three tries) or in it as a state it held,
// never torn.
func TestZipHotFile(t *testing.T) {
	w, ws := newWorkspaces(t)
	const size = 3 << 20
	f, err := os.Create(filepath.Join(ws, "hot.bin"))
	if err != nil {
		t.Fatal(err)
	}
	all := make([][]byte, versions)
	for v := range all {
		all[v] = version(v, size)
	}
	if _, err := f.Write(all[0]); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		defer f.Close()
		for v := 1; ctx.Err() == nil; v++ {
			if _, err := f.WriteAt(all[v%versions], 0); err != nil {
				t.Error(err)
				return
			}
		}
	})
	defer func() { cancel(); wg.Wait() }()
	for range 30 {
		var b bytes.Buffer
		if err := w.Zip(context.Background(), testThread, "", &b); err != nil {
			t.Fatal(err)
		}
		if data, ok := readZip(t, b.Bytes())["hot.bin"]; ok && (len(data) != size || !heldState(data)) {
			t.Fatalf("hot.bin in a zip: %d bytes, not a state the file held", len(data))
		}
	}
}

// TestZipAppendedFile: a file that grows on every copy (a log being
// written) is in the zip as a beginning of it, not left out.
func TestZipAppendedFile(t *testing.T) {
	w, ws := newWorkspaces(t)
	f, err := os.Create(filepath.Join(ws, "run.log"))
	if err != nil {
		t.Fatal(err)
	}
	line := []byte("a line of the log\n")
	for range 1000 {
		f.Write(line)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		defer f.Close()
		for ctx.Err() == nil {
			f.Write(line)
		}
	})
	var b bytes.Buffer
	err = w.Zip(context.Background(), testThread, "", &b)
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	got := readZip(t, b.Bytes())["run.log"]
	if len(got) < 1000*len(line) || len(got)%len(line) != 0 || bytes.Count(got, line) != len(got)/len(line) {
		t.Errorf("run.log in the zip: %d bytes, want whole lines, at least 1000", len(got))
	}
}

// TestZipSkipsSpecialFiles: a FIFO with no writer does not hang a zip,
// and a link out of the workspace is not followed.
func TestZipSkipsSpecialFiles(t *testing.T) {
	w, ws := newWorkspaces(t)
	if err := syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(ws, "passwd")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var b bytes.Buffer
	go func() { done <- w.Zip(context.Background(), testThread, "", &b) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a FIFO hangs the zip")
	}
	if got := readZip(t, b.Bytes()); len(got) != 1 || string(got["a.txt"]) != "a" {
		t.Errorf("the zip holds %d entries", len(got))
	}
}
