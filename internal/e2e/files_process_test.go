package e2e

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"herd/internal/pgtest"
)

// A thread's workspace files through the real binary (docs/API.md
// "Files"): uploads, lists, downloads and zips, on one instance and on
// two sharing workspaces.dir, with the server's own timeouts and memory.

// filePart is one file of an upload.
type filePart struct {
	name string
	data []byte
}

// multipartOf is a multipart body of parts, each a part named "file".
func multipartOf(t *testing.T, parts ...filePart) (string, []byte) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		w, err := mw.CreateFormFile("file", p.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(p.data)
	}
	mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

// raw sends a request with the client's cookies and CSRF token, and no
// time limit of the client's own (the server's are under test).
func (c *client) raw(method, path, contentType string, body io.Reader) *http.Response {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("X-CSRF-Token", c.csrf)
	resp, err := (&http.Client{Jar: c.http.Jar}).Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// readAll reads and closes an answer.
func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type uploaded struct {
	Files []struct {
		Path string
		Size int64
	}
}

// uploadFiles uploads parts into thread th and wants 201.
func (c *client) uploadFiles(th string, parts ...filePart) uploaded {
	c.t.Helper()
	ct, body := multipartOf(c.t, parts...)
	resp := c.raw("POST", "/api/threads/"+th+"/files", ct, bytes.NewReader(body))
	b := readAll(c.t, resp)
	if resp.StatusCode != http.StatusCreated {
		c.t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	var out uploaded
	if err := json.Unmarshal(b, &out); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// zipEntries reads a zip into its entries' contents.
func zipEntries(t *testing.T, b []byte) map[string]string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	out := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[f.Name] = string(data)
	}
	return out
}

// TestFilesThroughTheBinary: files uploaded through the real binary land
// in the workspace, are listed, served and zipped as they are, beside what
// the run's subagents wrote; one over files.max_upload_mb is refused
// naming it; and an upload or a download slower than the server's read
// or write timeout that keeps moving is not cut.
func TestFilesThroughTheBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startHerdWith(t, dir, "HERD_FILES_MAX_UPLOAD_MB=1",
		"HERD_SERVER_READ_HEADER_TIMEOUT_SECONDS=2", "HERD_SERVER_READ_TIMEOUT_SECONDS=2", "HERD_SERVER_WRITE_TIMEOUT_SECONDS=2",
		"HERD_MODELS_0_LATENCY_MS=5", "HERD_MODELS_1_LATENCY_MS=5", "HERD_MODELS_0_CHUNK_MS=1", "HERD_MODELS_1_CHUNK_MS=1")
	c := p.signIn()
	var th struct{ ID string }
	c.call("POST", "/api/threads", map[string]string{"title": "files"}, &th)
	up := c.uploadFiles(th.ID, filePart{"brief.md", []byte("# Brief\n")}, filePart{"data.csv", []byte("a,b\n1,2\n")}, filePart{"brief.md", []byte("again")})
	if len(up.Files) != 3 || up.Files[0].Path != "uploads/brief.md" || up.Files[2].Path != "uploads/brief (2).md" {
		t.Fatalf("uploaded %+v", up.Files)
	}
	c.send(th.ID, "Compare:\n- apples\n- pears")

	ws := filepath.Join(dir, "workspaces", th.ID)
	want := map[string]string{}
	err := filepath.Walk(ws, func(path string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			rel, _ := filepath.Rel(ws, path)
			b, _ := os.ReadFile(path)
			want[filepath.ToSlash(rel)] = string(b)
		}
		return err
	})
	if err != nil || want["uploads/brief (2).md"] != "again" || len(want) < 5 {
		t.Fatalf("the workspace holds %d files (%v)", len(want), err)
	}
	var list struct {
		Files []struct {
			Path string
			Size int64
		}
	}
	c.call("GET", "/api/threads/"+th.ID+"/files", nil, &list)
	if len(list.Files) != len(want) {
		t.Errorf("listed %d files, the workspace holds %d", len(list.Files), len(want))
	}
	for _, f := range list.Files {
		resp := c.raw("GET", "/api/threads/"+th.ID+"/files/"+strings.ReplaceAll(f.Path, " ", "%20"), "", nil)
		if b := readAll(t, resp); resp.StatusCode != 200 || string(b) != want[f.Path] || int64(len(b)) != f.Size {
			t.Errorf("GET %s: %d, %d bytes", f.Path, resp.StatusCode, len(b))
		}
	}
	resp := c.raw("GET", "/api/threads/"+th.ID+"/files.zip", "", nil)
	if got := zipEntries(t, readAll(t, resp)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the zip holds %d files, the workspace %d", len(got), len(want))
	}

	ct, body := multipartOf(t, filePart{"ok.txt", []byte("ok")}, filePart{"big.bin", make([]byte, 1<<20+1)})
	resp = c.raw("POST", "/api/threads/"+th.ID+"/files", ct, bytes.NewReader(body))
	var refused struct {
		Error struct{ Code, File, Limit string }
	}
	_ = json.Unmarshal(readAll(t, resp), &refused)
	if resp.StatusCode != 413 || refused.Error.File != "big.bin" || refused.Error.Limit != "files.max_upload_mb" {
		t.Errorf("a file over the limit: %d %+v", resp.StatusCode, refused)
	}
	if _, err := os.Stat(filepath.Join(ws, "uploads", "ok.txt")); !os.IsNotExist(err) {
		t.Errorf("a refused upload kept a file before the refused one: %v", err)
	}

	// The first megabyte of a body must come within the read timeout,
	// as for any request (server/limits reads it before the request
	// counts as started); the rest comes in 40 pieces 100 ms apart: two
	// read timeouts long, never still for one. (Timeouts of 2 s, not 1:
	// under -race on a busy machine an ordinary request took over 1 s.)
	ct, body = multipartOf(t, filePart{"first.bin", make([]byte, 1<<20-1024)}, filePart{"slow.bin", bytes.Repeat([]byte("s"), 400_000)})
	pr, pw := io.Pipe()
	go func() {
		first, piece := 1<<20+4096, (len(body)-(1<<20+4096))/40+1
		if _, err := pw.Write(body[:first]); err != nil {
			return
		}
		for i := first; i < len(body); i += piece {
			time.Sleep(100 * time.Millisecond)
			if _, err := pw.Write(body[i:min(i+piece, len(body))]); err != nil {
				return
			}
		}
		pw.Close()
	}()
	start := time.Now()
	resp = c.raw("POST", "/api/threads/"+th.ID+"/files", ct, pr)
	if b := readAll(t, resp); resp.StatusCode != 201 || time.Since(start) < 3*time.Second {
		t.Errorf("a slow upload: %d %s after %v", resp.StatusCode, b, time.Since(start))
	}

	// A download read slower than the write timeout allows, past what
	// the sockets' buffers hold, is not cut either.
	large := bytes.Repeat([]byte("0123456789abcdef"), 24<<20/16)
	if err := os.WriteFile(filepath.Join(ws, "large.bin"), large, 0o644); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	resp = c.raw("GET", "/api/threads/"+th.ID+"/files/large.bin", "", nil)
	var got bytes.Buffer
	for {
		n, err := io.CopyN(&got, resp.Body, 1<<20)
		if err != nil || n == 0 {
			break
		}
		time.Sleep(125 * time.Millisecond)
	}
	resp.Body.Close()
	if !bytes.Equal(got.Bytes(), large) || time.Since(start) < 5*time.Second/2 {
		t.Errorf("a slow download: %d of %d bytes after %v", got.Len(), len(large), time.Since(start))
	}
	stopHerd(t, p)
}

// TestUploadsBelongToTheWorkspace: a command can change and add to what
// was uploaded, in host and bwrap mode: herd as root gives uploads and
// uploads/ to the account commands run as (sandbox.user), as it gives
// the rest of the workspace.
func TestUploadsBelongToTheWorkspace(t *testing.T) {
	t.Parallel()
	for _, mode := range sandboxModes {
		t.Run(mode, func(t *testing.T) {
			skipBwrap(t, mode)
			dir := t.TempDir()
			p := startHerdWith(t, dir, "HERD_SANDBOX_MODE="+mode)
			c := p.signIn()
			var th struct{ ID string }
			c.call("POST", "/api/threads", map[string]string{"title": "own"}, &th)
			c.uploadFiles(th.ID, filePart{"notes.txt", []byte("uploaded\n")})
			c.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{
				"content": "Run `echo changed >> uploads/notes.txt && echo new > uploads/made.txt && echo ok-$((40+2))`"}, nil)
			if result := taskResult(t, c, th.ID); !strings.Contains(result, "ok-42") {
				t.Fatalf("the command could not change the upload: %q", result)
			}
			got, err := os.ReadFile(filepath.Join(dir, "workspaces", th.ID, "uploads", "notes.txt"))
			if err != nil || string(got) != "uploaded\nchanged\n" {
				t.Errorf("notes.txt holds %q (%v)", got, err)
			}
			stopHerd(t, p)
		})
	}
}

// TestClusterFilesOnEveryInstance: a file uploaded through instance A is
// listed, served and zipped by instance B, which shares workspaces.dir;
// another user gets 404 on B as on A.
func TestClusterFilesOnEveryInstance(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	shared := t.TempDir()
	env := clusterEnv(dsn, "HERD_WORKSPACES_DIR="+shared)
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca := a.signIn()
	var th struct{ ID string }
	ca.call("POST", "/api/threads", map[string]string{"title": "shared"}, &th)
	ca.uploadFiles(th.ID, filePart{"report.txt", []byte("from A")})
	ca.call("POST", "/api/admin/users", map[string]string{"email": "bob@example.com", "password": "tall ocean lantern"}, nil)

	cb := b.signIn()
	var list struct{ Files []struct{ Path string } }
	cb.call("GET", "/api/threads/"+th.ID+"/files", nil, &list)
	if len(list.Files) != 1 || list.Files[0].Path != "uploads/report.txt" {
		t.Errorf("B lists %+v", list.Files)
	}
	resp := cb.raw("GET", "/api/threads/"+th.ID+"/files/uploads/report.txt", "", nil)
	if body := readAll(t, resp); resp.StatusCode != 200 || string(body) != "from A" {
		t.Errorf("B serves %d %q", resp.StatusCode, body)
	}
	resp = cb.raw("GET", "/api/threads/"+th.ID+"/files.zip", "", nil)
	if z := zipEntries(t, readAll(t, resp)); z["uploads/report.txt"] != "from A" {
		t.Errorf("B's zip holds %v", z)
	}
	bob := b.signInAs("bob@example.com", "tall ocean lantern")
	for _, path := range []string{"/files", "/files/uploads/report.txt", "/files.zip"} {
		resp := bob.raw("GET", "/api/threads/"+th.ID+path, "", nil)
		if body := readAll(t, resp); resp.StatusCode != 404 || !strings.Contains(string(body), "thread not found") {
			t.Errorf("another user on B, %s: %d %s", path, resp.StatusCode, body)
		}
	}
	stopHerd(t, a)
	stopHerd(t, b)
}

// TestZipOfALargeWorkspaceInConstantMemory: a 1 GiB workspace (files
// copied through memory and through the spool) zips through the real
// binary with its resident memory growing under 32 MB, and the zip holds
// every file exactly.
func TestZipOfALargeWorkspaceInConstantMemory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startHerd(t, dir)
	c := p.signIn()
	var th struct{ ID string }
	c.call("POST", "/api/threads", map[string]string{"title": "large"}, &th)
	ws := filepath.Join(dir, "workspaces", th.ID)
	const size = 1 << 30
	want := writeWorkspace(t, ws, size)

	before := rss(t, p, "VmRSS")
	// Peak resident memory from now on (clear_refs 5 resets VmHWM).
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.cmd.Process.Pid), []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "workspace.zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	start := time.Now()
	resp := c.raw("GET", "/api/threads/"+th.ID+"/files.zip", "", nil)
	n, err := io.Copy(out, resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("zip: %d, %d bytes, %v", resp.StatusCode, n, err)
	}
	peak := rss(t, p, "VmHWM")
	t.Logf("zip of %d MiB: %d bytes in %v; RSS %d MB before, peak %d MB", size>>20, n, took.Round(time.Millisecond), before>>20, peak>>20)
	if grew := peak - before; grew >= 32<<20 {
		t.Errorf("resident memory grew %d MB zipping, want under 32", grew>>20)
	}
	zr, err := zip.NewReader(out, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != len(want) {
		t.Fatalf("the zip holds %d files, the workspace %d", len(zr.File), len(want))
	}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		_, err = io.Copy(h, rc)
		rc.Close()
		if err != nil || [32]byte(h.Sum(nil)) != want[f.Name] {
			t.Errorf("%s differs in the zip (%v)", f.Name, err)
		}
	}
	stopHerd(t, p)
}

// writeWorkspace fills ws with about size bytes: files of 1 MiB (zipped
// through memory) and of 4 MiB (through the spool) in a few folders, of
// pseudo-random bytes, and returns each file's hash by path.
func writeWorkspace(t *testing.T, ws string, size int) map[string][32]byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	block := make([]byte, 64<<10)
	for i := range block {
		block[i] = byte(rng.UintN(256))
	}
	hashes := map[string][32]byte{}
	for i, total := 0, 0; total < size; i++ {
		n := 1 << 20
		if i%2 == 1 {
			n = 4 << 20
		}
		rel := fmt.Sprintf("part%d/file%03d.bin", i%4, i)
		path := filepath.Join(ws, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		data := bytes.Repeat(block, n/len(block))
		data[0] = byte(i) // no two files alike
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		hashes[rel] = sha256.Sum256(data)
		total += n
	}
	return hashes
}

// rss is a /proc/<pid>/status memory figure of p, in bytes.
func rss(t *testing.T, p *proc, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, p.cmd.Process.Pid)
	return 0
}
