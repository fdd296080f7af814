package server

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd/agent/tools"
	"herd/server/files"
)

// multipartBody is a multipart/form-data body for user.do.
type multipartBody struct {
	data        []byte
	contentType string
}

// upload is one part of a multipart body: a file named name, or a part
// of field field when set.
type upload struct {
	name, field string
	data        []byte
}

// uploadBody builds a multipart body of ups. Names go through
// mime.FormatMediaType, as a careful client sends them: a name with a
// control character or beyond ASCII as filename*.
func uploadBody(t testing.TB, ups ...upload) multipartBody {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, u := range ups {
		field := u.field
		if field == "" {
			field = "file"
		}
		params := map[string]string{"name": field}
		if u.name != "" {
			params["filename"] = u.name
		}
		cd := mime.FormatMediaType("form-data", params)
		if cd == "" {
			t.Fatalf("no Content-Disposition for %q", u.name)
		}
		w, err := mw.CreatePart(textproto.MIMEHeader{"Content-Disposition": {cd}, "Content-Type": {"application/octet-stream"}})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(u.data)
	}
	mw.Close()
	return multipartBody{data: b.Bytes(), contentType: mw.FormDataContentType()}
}

type savedFiles struct {
	Files []files.Saved `json:"files"`
}

type listedFiles struct {
	Files     []files.Entry `json:"files"`
	Truncated bool          `json:"truncated"`
}

// upload posts ups to thread th and wants 201.
func (u *user) upload(th string, ups ...upload) []files.Saved {
	u.a.t.Helper()
	var out savedFiles
	u.mustJSON("POST", "/api/threads/"+th+"/files", uploadBody(u.a.t, ups...), http.StatusCreated, &out)
	return out.Files
}

// workspace is thread th's workspace directory.
func (a *testApp) workspace(th string) string { return filepath.Join(a.dir, "workspaces", th) }

// tree lists every entry below dir (relative, slash-separated, "/" after
// a directory), nil when dir does not exist.
func tree(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if info.IsDir() {
			rel += "/"
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

// unzip reads a zip answer into its entries' contents by name.
func unzip(t testing.TB, body []byte) map[string]string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatalf("not a zip (%d bytes): %v", len(body), err)
	}
	out := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		out[f.Name] = string(b)
	}
	return out
}

// TestFilesRoundTrip: files uploaded in one request land in uploads/
// under their names, a clash (in the request or with a file there)
// gets a suffix and nothing is overwritten; the list, one file's bytes
// and the zip all give back exactly what is in the workspace, files the
// agents wrote included.
func TestFilesRoundTrip(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("files")
	big := bytes.Repeat([]byte("0123456789abcdef"), 300_000) // 4.8 MB: spooled, not in memory
	got := u.upload(th,
		upload{name: "report.pdf", data: []byte("%PDF-1.4 one")},
		upload{name: "notes.md", data: []byte("# notes\n")},
		upload{name: "report.pdf", data: []byte("%PDF-1.4 two")},
		upload{name: "big.bin", data: big},
	)
	want := []files.Saved{
		{Path: "uploads/report.pdf", Size: 12}, {Path: "uploads/notes.md", Size: 8},
		{Path: "uploads/report (2).pdf", Size: 12}, {Path: "uploads/big.bin", Size: int64(len(big))},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("saved %+v, want %+v", got, want)
	}
	again := u.upload(th, upload{name: "report.pdf", data: []byte("%PDF-1.4 three")})
	if again[0].Path != "uploads/report (3).pdf" {
		t.Errorf("a third report.pdf landed at %s, want uploads/report (3).pdf", again[0].Path)
	}
	u.writeFiles(th) // the demo's subagents write notes/<item>/plan.md

	contents := map[string]string{}
	for _, p := range tree(t, a.workspace(th)) {
		if !strings.HasSuffix(p, "/") {
			b, err := os.ReadFile(filepath.Join(a.workspace(th), p))
			if err != nil {
				t.Fatal(err)
			}
			contents[p] = string(b)
		}
	}
	if contents["uploads/report.pdf"] != "%PDF-1.4 one" || contents["uploads/report (2).pdf"] != "%PDF-1.4 two" {
		t.Errorf("a clash overwrote a file: %q, %q", contents["uploads/report.pdf"], contents["uploads/report (2).pdf"])
	}
	if !slices.ContainsFunc(slices.Collect(mapKeys(contents)), func(p string) bool { return strings.HasPrefix(p, "notes/") }) {
		t.Fatalf("the run wrote no notes: %v", slices.Collect(mapKeys(contents)))
	}

	var list listedFiles
	u.mustJSON("GET", "/api/threads/"+th+"/files", nil, http.StatusOK, &list)
	if len(list.Files) != len(contents) || list.Truncated {
		t.Fatalf("listed %d files (truncated %v), the workspace holds %d", len(list.Files), list.Truncated, len(contents))
	}
	for i, f := range list.Files {
		if i > 0 && list.Files[i-1].Path >= f.Path {
			t.Errorf("list not sorted: %s before %s", list.Files[i-1].Path, f.Path)
		}
		if int64(len(contents[f.Path])) != f.Size || time.Since(f.Modified) > time.Hour {
			t.Errorf("listed %+v; the file has %d bytes", f, len(contents[f.Path]))
		}
		r := u.do("GET", "/api/threads/"+th+"/files/"+(&url.URL{Path: f.Path}).EscapedPath(), nil)
		if r.status != http.StatusOK || string(r.body) != contents[f.Path] {
			t.Errorf("GET %s: %d, %d bytes, want the file's %d", f.Path, r.status, len(r.body), len(contents[f.Path]))
		}
	}
	u.mustJSON("GET", "/api/threads/"+th+"/files?prefix=uploads/", nil, http.StatusOK, &list)
	if len(list.Files) != 5 {
		t.Errorf("prefix uploads/ listed %d files, want 5", len(list.Files))
	}

	r := u.do("GET", "/api/threads/"+th+"/files.zip", nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/zip" ||
		!strings.HasPrefix(r.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("zip: %d %v", r.status, r.header)
	}
	if z := unzip(t, r.body); !mapsEqual(z, contents) {
		t.Errorf("the zip holds %v, the workspace %v", slices.Collect(mapKeys(z)), slices.Collect(mapKeys(contents)))
	}
	r = u.do("GET", "/api/threads/"+th+"/files.zip?prefix=uploads", nil)
	if z := unzip(t, r.body); len(z) != 5 || z["uploads/big.bin"] != string(big) {
		t.Errorf("the zip of uploads holds %v", slices.Collect(mapKeys(z)))
	}
	for _, p := range []string{"nope", "uploads/report.pdf"} {
		if r := u.do("GET", "/api/threads/"+th+"/files.zip?prefix="+p, nil); r.status != http.StatusNotFound || r.header.Get("Content-Disposition") != "" {
			t.Errorf("zip of %s: %d %v, want a plain 404", p, r.status, r.header)
		}
	}
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestFilesHostileNames: 40 hostile names in one upload each land as one
// safe name in uploads/, and nothing else appears anywhere.
func TestFilesHostileNames(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("names")
	var ups []upload
	for i, n := range hostileNames() {
		ups = append(ups, upload{name: n, data: fmt.Appendf(nil, "file %d", i)})
	}
	saved := u.upload(th, ups...)
	if len(saved) != len(ups) {
		t.Fatalf("saved %d of %d files", len(saved), len(ups))
	}
	seen := map[string]bool{}
	for i, s := range saved {
		name, ok := strings.CutPrefix(s.Path, "uploads/")
		if !ok || name == "" || strings.ContainsAny(name, "/\\\x00") || strings.HasPrefix(name, ".") || len(name) > 255 || seen[name] {
			t.Errorf("%q landed at %q", ups[i].name, s.Path)
		}
		seen[name] = true
		b, err := os.ReadFile(filepath.Join(a.workspace(th), s.Path))
		if err != nil || string(b) != string(ups[i].data) {
			t.Errorf("%q at %q holds %q (%v), want %q", ups[i].name, s.Path, b, err, ups[i].data)
		}
		r := u.do("GET", "/api/threads/"+th+"/files/"+(&url.URL{Path: s.Path}).EscapedPath(), nil)
		if r.status != 200 || string(r.body) != string(ups[i].data) {
			t.Errorf("GET %q: %d %q", s.Path, r.status, r.body)
		}
	}
	want := []string{"uploads/"}
	for name := range seen {
		want = append(want, "uploads/"+name)
	}
	slices.Sort(want)
	if got := tree(t, a.workspace(th)); !slices.Equal(got, want) {
		t.Errorf("the workspace holds %q, want %q", got, want)
	}
	if got := tree(t, filepath.Join(a.dir, "workspaces", ".spool")); len(got) != 0 {
		t.Errorf("the spool kept %q", got)
	}
}

// hostileNames are the names files.TestCleanName checks, as a client
// would send them (its table is the package's own).
func hostileNames() []string {
	return []string{
		"report.pdf", "../../etc/passwd", `..\..\windows\system32\cmd.exe`, "/etc/shadow", `C:\Users\me\notes.txt`,
		"a/b/", "uploads/../../../x.txt", ".bashrc", "..", ".", "...", "  .hidden ", "file\x00name.txt",
		"line\nbreak\r.txt", "tab\there.txt", "del\x7f.txt", "c1\u0085\u009b.txt", "evil\u202Etxt.exe",
		"zero\u200Bwidth\u200D.md", "bom\uFEFF.txt", "line\u2028sep\u2029.txt", "\u3164\u3164.txt",
		"nbsp\u00a0name\u3000.txt", "\xff\xfeinvalid.txt", "\ufdd0non\uffff.txt", "e\u0301te\u0301.txt", "CON",
		"con.txt", "Nul.tar.gz", "COM1", "lpt9.log", "COM\u00b9.txt", "CONIN$", "AUX .txt",
		"<script>alert(1)</script>.html", `a:b|c*d"e?.txt`, "trailing. . .", strings.Repeat("a", 300) + ".txt",
		strings.Repeat("\u00e9", 150) + ".tar.gz", "report.pdf",
	}
}

// TestFilesUploadLimits: a file over files.max_upload_mb, or one that
// would take the workspace over sandbox.limits, is refused with 413
// naming the file and the setting, and the whole upload leaves nothing:
// not the files before it in the request, not a spool file.
func TestFilesUploadLimits(t *testing.T) {
	limits := tools.SandboxLimits{WorkspaceMB: 3, WorkspaceFiles: 8}
	a := newApp(t, withFiles(func(o *files.Options) { o.Limits, o.MaxUploadMB = limits, 2 }))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("limits")
	mib := 1 << 20
	for _, c := range []struct {
		name  string
		ups   []upload
		file  string
		limit string
	}{
		{"one file over max_upload_mb", []upload{{name: "ok.txt", data: []byte("fine")}, {name: "huge.bin", data: make([]byte, 2*mib+1)}},
			"huge.bin", "files.max_upload_mb"},
		{"files over the workspace", []upload{{name: "a.bin", data: make([]byte, 2*mib)}, {name: "b.bin", data: make([]byte, 2*mib)}},
			"b.bin", "sandbox.limits.workspace_mb"},
		{"too many files", []upload{{name: "1"}, {name: "2"}, {name: "3"}, {name: "4"}, {name: "5"}, {name: "6"}, {name: "7"}, {name: "8"}, {name: "9"}},
			"8", "sandbox.limits.workspace_files"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := u.do("POST", "/api/threads/"+th+"/files", uploadBody(t, c.ups...))
			var e struct {
				Error struct{ Code, Message, File, Limit string } `json:"error"`
			}
			_ = json.Unmarshal(r.body, &e)
			if r.status != http.StatusRequestEntityTooLarge || e.Error.Code != "payload_too_large" || e.Error.File != c.file || e.Error.Limit != c.limit ||
				!strings.Contains(e.Error.Message, c.file) || !strings.Contains(e.Error.Message, c.limit) {
				t.Fatalf("got %d %s, want 413 naming %s and %s", r.status, r.body, c.file, c.limit)
			}
			if got := tree(t, a.workspace(th)); len(got) != 0 {
				t.Errorf("a refused upload left %q", got)
			}
			if got := tree(t, filepath.Join(a.dir, "workspaces", ".spool")); len(got) != 0 {
				t.Errorf("a refused upload left %q in the spool", got)
			}
		})
	}
	// What fits is taken, and counts: the same again no longer fits.
	u.upload(th, upload{name: "a.bin", data: make([]byte, 2*mib)})
	r := u.do("POST", "/api/threads/"+th+"/files", uploadBody(t, upload{name: "b.bin", data: make([]byte, 2*mib)}))
	if r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a second 2 MiB into 3 MiB: %d %s", r.status, r.body)
	}
}

// TestFilesBadRequests: what is not an upload, or names no file of the
// workspace, is refused with a 4xx that says why, and changes nothing.
func TestFilesBadRequests(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("bad")
	u.upload(th, upload{name: "x.txt", data: []byte("x")})
	base := "/api/threads/" + th
	for _, c := range []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"JSON body", "POST", base + "/files", map[string]string{"file": "x"}, 415, "unsupported_media_type"},
		{"no file", "POST", base + "/files", uploadBody(t), 400, "bad_request"},
		{"other field", "POST", base + "/files", uploadBody(t, upload{field: "doc", name: "y.txt"}), 400, "bad_request"},
		{"no filename", "POST", base + "/files", uploadBody(t, upload{data: []byte("y")}), 400, "bad_request"},
		{"cut body", "POST", base + "/files", multipartBody{data: uploadBody(t, upload{name: "y.txt", data: []byte("yyyy")}).data[:150], contentType: uploadBody(t).contentType}, 400, "bad_request"},
		{"prefix with ..", "GET", base + "/files?prefix=../x", nil, 400, "bad_request"},
		{"absolute prefix", "GET", base + "/files?prefix=/etc", nil, 400, "bad_request"},
		{"missing prefix", "GET", base + "/files?prefix=nope", nil, 404, "not_found"},
		{"a file as prefix", "GET", base + "/files?prefix=uploads/x.txt", nil, 404, "not_found"},
		{"escaped ..", "GET", base + "/files/uploads/%2e%2e/%2e%2e/x", nil, 400, "bad_request"},
		{"a folder", "GET", base + "/files/uploads", nil, 404, "not_found"},
		{"missing file", "GET", base + "/files/uploads/nope.txt", nil, 404, "not_found"},
		{"zip prefix with ..", "GET", base + "/files.zip?prefix=a/../..", nil, 400, "bad_request"},
	} {
		r := u.do(c.method, c.path, c.body)
		if r.status != c.status || r.errorCode() != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, r.status, r.body, c.status, c.code)
		}
	}
	if got := tree(t, a.workspace(th)); !slices.Equal(got, []string{"uploads/", "uploads/x.txt"}) {
		t.Errorf("the workspace holds %q", got)
	}
}

// TestFilesCSRF: an upload with the session cookie but no CSRF token is
// refused before it is read, like every cookie write.
func TestFilesCSRF(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("csrf")
	tok := u.csrf
	u.csrf = ""
	for _, hdr := range [][]string{nil, {"X-CSRF-Token", "nope"}} {
		r := u.do("POST", "/api/threads/"+th+"/files", uploadBody(t, upload{name: "x.txt", data: []byte("x")}), hdr...)
		if r.status != http.StatusForbidden || r.errorCode() != "csrf" {
			t.Errorf("upload with CSRF header %v: %d %s, want 403 csrf", hdr, r.status, r.body)
		}
	}
	if got := tree(t, a.workspace(th)); got != nil {
		t.Errorf("refused uploads left %q", got)
	}
	u.csrf = tok
	u.upload(th, upload{name: "x.txt", data: []byte("x")})
}

// TestFilesDownloadHeaders: a raster image is inline with its type;
// everything else, SVG and HTML first, an attachment of no type a
// browser renders; every answer sandboxed and unsniffed; ranges work.
func TestFilesDownloadHeaders(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("headers")
	png := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), make([]byte, 64)...)
	u.upload(th,
		upload{name: "pic.png", data: png},
		upload{name: "drawing.svg", data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)},
		upload{name: "page.html", data: []byte(`<html><script>alert(1)</script></html>`)},
		upload{name: "fake.png", data: []byte(`<html><script>alert(1)</script></html>`)},
		upload{name: "r\u00e9sum\u00e9 \"final\".txt", data: []byte("0123456789")},
	)
	for _, c := range []struct{ path, typ, disposition string }{
		{"uploads/pic.png", "image/png", `inline; filename=pic.png`},
		{"uploads/drawing.svg", "application/octet-stream", `attachment; filename=drawing.svg`},
		{"uploads/page.html", "application/octet-stream", `attachment; filename=page.html`},
		{"uploads/fake.png", "application/octet-stream", `attachment; filename=fake.png`},
		{"uploads/r\u00e9sum\u00e9 _final_.txt", "application/octet-stream", `attachment; filename*=utf-8''r%C3%A9sum%C3%A9%20_final_.txt`},
	} {
		r := u.do("GET", "/api/threads/"+th+"/files/"+(&url.URL{Path: c.path}).EscapedPath(), nil)
		h := r.header
		if r.status != 200 || h.Get("Content-Type") != c.typ || h.Get("Content-Disposition") != c.disposition ||
			h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Security-Policy") != "default-src 'none'; sandbox" ||
			h.Get("Cross-Origin-Resource-Policy") != "same-origin" || h.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: %d %v", c.path, r.status, h)
		}
	}
	r := u.do("GET", "/api/threads/"+th+"/files/uploads/r%C3%A9sum%C3%A9%20_final_.txt", nil, "Range", "bytes=2-5")
	if r.status != http.StatusPartialContent || string(r.body) != "2345" {
		t.Errorf("a range: %d %q", r.status, r.body)
	}
	r = u.do("GET", "/api/threads/"+th+"/files.zip", nil)
	if h := r.header; h.Get("Content-Security-Policy") != "default-src 'none'; sandbox" || h.Get("Content-Disposition") != "attachment; filename=headers.zip" {
		t.Errorf("zip headers: %v", h)
	}
}

// TestFilesSymlinksAndSpecialFiles: a link out of the workspace is
// neither listed, served nor zipped, and a link to a folder outside is no
// prefix; a FIFO is not listed, is refused without blocking, and does
// not hang a zip; a link inside the workspace is served as read_file
// would read it.
func TestFilesSymlinksAndSpecialFiles(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("links")
	u.upload(th, upload{name: "real.txt", data: []byte("inside")})
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := a.workspace(th)
	for link, target := range map[string]string{"secret.txt": secret, "out": outside, "inside.txt": "uploads/real.txt", "up": "../.."} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := "/api/threads/" + th
	var list listedFiles
	u.mustJSON("GET", base+"/files", nil, 200, &list)
	if len(list.Files) != 1 || list.Files[0].Path != "uploads/real.txt" {
		t.Errorf("listed %+v, want uploads/real.txt alone", list.Files)
	}
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/files/secret.txt", 403},
		{"/files/out/secret.txt", 403},
		{"/files/up/etc/passwd", 403},
		{"/files/pipe", 404},
		{"/files?prefix=out", 404},
		{"/files.zip?prefix=out", 404},
		{"/files/inside.txt", 200},
	} {
		done := make(chan response, 1)
		go func() { done <- u.do("GET", base+c.path, nil) }()
		select {
		case r := <-done:
			if r.status != c.status || strings.Contains(string(r.body), "SECRET") {
				t.Errorf("GET %s: %d %s, want %d", c.path, r.status, r.body, c.status)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("GET %s hangs", c.path)
		}
	}
	r := u.do("GET", base+"/files.zip", nil)
	if z := unzip(t, r.body); len(z) != 1 || z["uploads/real.txt"] != "inside" {
		t.Errorf("the zip holds %v", slices.Collect(mapKeys(z)))
	}
}

// TestFilesGoWithTheThread: deleting a thread removes what was uploaded
// into it with its workspace, and an upload into a deleted thread is
// refused.
func TestFilesGoWithTheThread(t *testing.T) {
	purged := make(chan string, 1)
	a := newApp(t, withServer(func(o *Options) {
		o.UndoWindow = 20 * time.Millisecond
		o.OnThreadPurged = func(id string) { purged <- id }
	}))
	u := a.newUser("ann@example.com", false)
	th, kept := u.newThread("gone"), u.newThread("kept")
	u.upload(th, upload{name: "a.txt", data: []byte("a")})
	u.upload(kept, upload{name: "b.txt", data: []byte("b")})
	u.mustJSON("DELETE", "/api/threads/"+th, nil, http.StatusNoContent, nil)
	if r := u.do("POST", "/api/threads/"+th+"/files", uploadBody(t, upload{name: "c.txt"})); r.status != 404 {
		t.Errorf("upload into a deleted thread: %d %s", r.status, r.body)
	}
	select {
	case <-purged:
	case <-time.After(10 * time.Second):
		t.Fatal("the deleted thread was not purged")
	}
	if _, err := os.Stat(a.workspace(th)); !os.IsNotExist(err) {
		t.Errorf("the deleted thread's uploads are still there: %v", tree(t, a.workspace(th)))
	}
	if got := tree(t, a.workspace(kept)); !slices.Equal(got, []string{"uploads/", "uploads/b.txt"}) {
		t.Errorf("another thread's uploads: %q", got)
	}
}
