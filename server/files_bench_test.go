package server

import (
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The files API's throughput, each beside the command-line tool that does
// the same on the same files in the same run (docs/PERFORMANCE.md "Files
// in and out"): a 100 MB upload through HTTP on loopback beside cp of the
// file, and a zip of a workspace of some 64 MiB beside zip -1 and zip's default
// level, into a pipe.

const uploadBenchBytes = 100 << 20

// BenchmarkUpload100MB: one 100 MiB file uploaded (multipart, streamed
// from the client, never whole in its memory) beside cp of a file that
// size on the same disk.
func BenchmarkUpload100MB(b *testing.B) {
	block := make([]byte, 1<<20)
	for i := range block {
		block[i] = byte(rand.UintN(256))
	}
	b.Run("herd", func(b *testing.B) {
		a := newApp(b)
		u := a.newUser("bench@example.com", false)
		th := u.newThread("upload")
		b.SetBytes(uploadBenchBytes)
		for b.Loop() {
			pr, pw := io.Pipe()
			mw := multipart.NewWriter(pw)
			go func() {
				w, _ := mw.CreateFormFile("file", "big.bin")
				for range uploadBenchBytes / len(block) {
					if _, err := w.Write(block); err != nil {
						return
					}
				}
				pw.CloseWithError(mw.Close())
			}()
			req, _ := http.NewRequest("POST", a.http.URL+"/api/threads/"+th+"/files", pr)
			req.Header.Set("Content-Type", mw.FormDataContentType())
			req.Header.Set("X-CSRF-Token", u.csrf)
			r := u.send(req)
			if r.status != http.StatusCreated {
				b.Fatalf("upload: %d %s", r.status, r.body)
			}
			b.StopTimer()
			if err := os.RemoveAll(filepath.Join(a.workspace(th), "uploads")); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("cp", func(b *testing.B) {
		cp, err := exec.LookPath("cp")
		if err != nil {
			b.Skip("no cp")
		}
		dir := b.TempDir()
		src := filepath.Join(dir, "big.bin")
		f, err := os.Create(src)
		if err != nil {
			b.Fatal(err)
		}
		for range uploadBenchBytes / len(block) {
			f.Write(block)
		}
		f.Close()
		b.SetBytes(uploadBenchBytes)
		for b.Loop() {
			dst := filepath.Join(dir, "copy.bin")
			if out, err := exec.Command(cp, src, dst).CombinedOutput(); err != nil {
				b.Fatalf("cp: %v %s", err, out)
			}
			b.StopTimer()
			os.Remove(dst)
			b.StartTimer()
		}
	})
}

// BenchmarkZipWorkspace: a workspace of some 64 MiB of text-like files (1 MiB
// ones zipped through memory, 4 MiB ones through the spool) zipped by
// herd to a client on loopback, beside zip -1 (herd's level) and zip's
// default level writing to a pipe.
func BenchmarkZipWorkspace(b *testing.B) {
	a := newApp(b)
	u := a.newUser("bench@example.com", false)
	th := u.newThread("zip")
	ws := a.workspace(th)
	size := writeTextWorkspace(b, ws, 64<<20)
	b.Run("herd", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			req, _ := http.NewRequest("GET", a.http.URL+"/api/threads/"+th+"/files.zip", nil)
			resp, err := u.c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("zip: %d, %d bytes, %v", resp.StatusCode, n, err)
			}
			b.ReportMetric(float64(n)/float64(size), "zip/workspace")
		}
	})
	for _, level := range []string{"-1", "-6"} {
		b.Run("zip"+level, func(b *testing.B) {
			zip, err := exec.LookPath("zip")
			if err != nil {
				b.Skip("no zip")
			}
			b.SetBytes(size)
			for b.Loop() {
				cmd := exec.Command(zip, "-q", "-r", level, "-", ".")
				cmd.Dir = ws
				out, err := cmd.StdoutPipe()
				if err != nil {
					b.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, out)
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(n)/float64(size), "zip/workspace")
			}
		})
	}
}

// writeTextWorkspace fills ws with about size bytes of text made of
// random words, which deflate shrinks about as it does notes and code,
// and returns how many bytes it wrote.
func writeTextWorkspace(b *testing.B, ws string, size int) int64 {
	b.Helper()
	words := strings.Fields("the a workspace agent file note plan apples pears compare result task " +
		"subagent herd report data value summary first second because which where 0 1 2 3 42 1024")
	rng := rand.New(rand.NewPCG(3, 4))
	var total int64
	for i := 0; total < int64(size); i++ {
		n := 1 << 20
		if i%3 == 2 {
			n = 4 << 20
		}
		var sb strings.Builder
		sb.Grow(n + 16)
		for sb.Len() < n {
			sb.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(12) == 0 {
				sb.WriteByte('\n')
			} else {
				sb.WriteByte(' ')
			}
		}
		path := filepath.Join(ws, fmt.Sprintf("dir%d", i%5), fmt.Sprintf("file%03d.txt", i))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(sb.String()[:n]), 0o644); err != nil {
			b.Fatal(err)
		}
		total += int64(n)
	}
	return total
}
