package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// checkToolLeaks fails t if goroutines started during t outlive it.
func checkToolLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// workspaceTool returns the workspace tool named name.
func workspaceTool(t *testing.T, name string) Tool {
	t.Helper()
	tool, ok := NewSet(Workspace()...).Get(name)
	if !ok {
		t.Fatalf("Workspace has no %q", name)
	}
	return tool
}

// runWorkspaceTool runs the tool named name in ws with args marshalled
// from a map, or taken verbatim when args is a string.
func runWorkspaceTool(t *testing.T, name, ws string, args any) (string, error) {
	t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatalf("marshal args: %v", err)
		}
		raw = string(b)
	}
	return workspaceTool(t, name).Run(context.Background(), Env{Workspace: ws}, json.RawMessage(raw))
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readTestFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func makeSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// escapeFixture is a workspace with symlinks leading in and out of it,
// next to an outside directory holding a secret.
type escapeFixture struct {
	ws, outside string
}

const outsideSecret = "the-outside-secret"

func newEscapeFixture(t *testing.T) escapeFixture {
	t.Helper()
	parent := t.TempDir()
	f := escapeFixture{ws: filepath.Join(parent, "ws"), outside: filepath.Join(parent, "outside")}
	writeTestFile(t, filepath.Join(f.outside, "secret.txt"), outsideSecret+"\n")
	writeTestFile(t, filepath.Join(f.ws, "in.txt"), "inside\n")
	writeTestFile(t, filepath.Join(f.ws, "sub", "inner.txt"), "inner\n")
	makeSymlink(t, filepath.Join(f.outside, "secret.txt"), filepath.Join(f.ws, "leak"))
	makeSymlink(t, "../outside/secret.txt", filepath.Join(f.ws, "relleak"))
	makeSymlink(t, f.outside, filepath.Join(f.ws, "outdir"))
	makeSymlink(t, "../../outside", filepath.Join(f.ws, "sub", "up"))
	makeSymlink(t, filepath.Join(f.ws, "in.txt"), filepath.Join(f.ws, "absin"))
	makeSymlink(t, "in.txt", filepath.Join(f.ws, "inlink"))
	makeSymlink(t, "sub", filepath.Join(f.ws, "sublink"))
	return f
}

func TestWorkspaceEscapes(t *testing.T) {
	checkToolLeaks(t)
	f := newEscapeFixture(t)
	cases := []struct {
		name, path string
	}{
		{"dot-dot", "../outside/secret.txt"},
		{"dot-dot after a directory", "sub/../../outside/secret.txt"},
		{"bare dot-dot", ".."},
		{"absolute path outside", filepath.Join(f.outside, "secret.txt")},
		{"absolute path to a workspace file", filepath.Join(f.ws, "in.txt")},
		{"absolute system path", "/etc/passwd"},
		{"symlink to a file outside", "leak"},
		{"relative symlink out", "relleak"},
		{"symlinked directory in the middle", "outdir/secret.txt"},
		{"nested symlinked directory out", "sub/up/secret.txt"},
		{"absolute symlink even to a workspace file", "absin"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := map[string]map[string]any{
				"ls":          {"path": tc.path},
				"read_file":   {"path": tc.path},
				"write_file":  {"path": tc.path, "content": "overwritten"},
				"str_replace": {"path": tc.path, "old_str": outsideSecret, "new_str": "overwritten"},
			}
			for tool, args := range calls {
				got, err := runWorkspaceTool(t, tool, f.ws, args)
				if !errors.Is(err, ErrOutsideWorkspace) {
					t.Fatalf("%s(%q) = %q, %v; want an outside-the-workspace error", tool, tc.path, got, err)
				}
				want := fmt.Sprintf("path %q is outside the workspace", tc.path)
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s error = %q; want it to contain %q", tool, err, want)
				}
			}
			if got := readTestFile(t, filepath.Join(f.outside, "secret.txt")); got != outsideSecret+"\n" {
				t.Errorf("outside secret changed to %q", got)
			}
			if got := readTestFile(t, filepath.Join(f.ws, "in.txt")); got != "inside\n" {
				t.Errorf("in.txt changed to %q", got)
			}
		})
	}
	t.Run("write through a symlinked directory creates nothing outside", func(t *testing.T) {
		_, err := runWorkspaceTool(t, "write_file", f.ws, map[string]any{"path": "outdir/new/x.txt", "content": "x"})
		if !errors.Is(err, ErrOutsideWorkspace) {
			t.Fatalf("write_file error = %v; want outside the workspace", err)
		}
		if _, err := os.Stat(filepath.Join(f.outside, "new")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("stat outside/new: %v; want it not to exist", err)
		}
	})
}

func TestWorkspaceInsidePathsAllowed(t *testing.T) {
	checkToolLeaks(t)
	f := newEscapeFixture(t)
	cases := []struct {
		name, path, want string
	}{
		{"plain", "in.txt", "     1\tinside\n"},
		{"dot slash", "./in.txt", "     1\tinside\n"},
		{"dot-dot that stays inside", "sub/../in.txt", "     1\tinside\n"},
		{"symlink to a file inside", "inlink", "     1\tinside\n"},
		{"symlinked directory inside", "sublink/inner.txt", "     1\tinner\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runWorkspaceTool(t, "read_file", f.ws, map[string]any{"path": tc.path})
			if err != nil {
				t.Fatalf("read_file(%q): %v", tc.path, err)
			}
			if got != tc.want {
				t.Errorf("read_file(%q) = %q; want %q", tc.path, got, tc.want)
			}
		})
	}
	t.Run("write through a symlink inside", func(t *testing.T) {
		if _, err := runWorkspaceTool(t, "write_file", f.ws, map[string]any{"path": "sublink/new.txt", "content": "n"}); err != nil {
			t.Fatalf("write_file: %v", err)
		}
		if got := readTestFile(t, filepath.Join(f.ws, "sub", "new.txt")); got != "n" {
			t.Errorf("sub/new.txt = %q; want %q", got, "n")
		}
	})
	t.Run("ls of a symlinked directory inside", func(t *testing.T) {
		got, err := runWorkspaceTool(t, "ls", f.ws, map[string]any{"path": "sublink"})
		if err != nil {
			t.Fatalf("ls: %v", err)
		}
		if !strings.Contains(got, "inner.txt (6 bytes)") {
			t.Errorf("ls sublink = %q; want inner.txt listed", got)
		}
	})
}

func TestWorkspaceSymlinkMadeByBash(t *testing.T) {
	checkToolLeaks(t)
	ws := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.txt")
	writeTestFile(t, outside, outsideSecret)
	bash, err := NewBash(SandboxConfig{Mode: SandboxHost, BashTimeoutSeconds: 5})
	if err != nil {
		t.Fatal(err)
	}
	cmd := fmt.Sprintf("ln -s %q leak && ln -s / root && mkdir d && ln -s ../../ d/up", outside)
	if out, err := bash.Run(context.Background(), Env{Workspace: ws}, argsJSON(t, map[string]any{"command": cmd})); err != nil || out != "(no output)" {
		t.Fatalf("bash = %q, %v", out, err)
	}
	for _, p := range []string{"leak", "root/etc/passwd", "d/up/etc/passwd"} {
		got, err := runWorkspaceTool(t, "read_file", ws, map[string]any{"path": p})
		if !errors.Is(err, ErrOutsideWorkspace) {
			t.Errorf("read_file(%q) = %q, %v; want outside the workspace", p, got, err)
		}
	}
}

func TestLs(t *testing.T) {
	checkToolLeaks(t)
	ws := t.TempDir()
	writeTestFile(t, filepath.Join(ws, "b.txt"), "abc")
	writeTestFile(t, filepath.Join(ws, "a", "nested.txt"), "n")
	if err := os.Mkdir(filepath.Join(ws, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	makeSymlink(t, "b.txt", filepath.Join(ws, "link"))
	many := filepath.Join(ws, "many")
	for i := range maxListEntries + 5 {
		writeTestFile(t, filepath.Join(many, fmt.Sprintf("f%04d", i)), "")
	}

	cases := []struct {
		name    string
		args    string
		want    string
		wantErr string
	}{
		{name: "root by default", args: `{}`, want: "a/\nb.txt (3 bytes)\nempty/\nlink -> b.txt\nmany/\n"},
		{name: "empty arguments", args: ``, want: "a/\nb.txt (3 bytes)\nempty/\nlink -> b.txt\nmany/\n"},
		{name: "dot", args: `{"path":"."}`, want: "a/\nb.txt (3 bytes)\nempty/\nlink -> b.txt\nmany/\n"},
		{name: "subdirectory", args: `{"path":"a"}`, want: "nested.txt (1 bytes)\n"},
		{name: "empty directory", args: `{"path":"empty"}`, want: "(empty directory)"},
		{name: "a file", args: `{"path":"b.txt"}`, wantErr: `path "b.txt" is a file, not a directory`},
		{name: "missing", args: `{"path":"nope"}`, wantErr: `path "nope": no such file or directory`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runWorkspaceTool(t, "ls", ws, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ls = %q, %v; want error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ls = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	t.Run("entry count is bounded", func(t *testing.T) {
		got, err := runWorkspaceTool(t, "ls", ws, `{"path":"many"}`)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		if len(lines) != maxListEntries+1 {
			t.Fatalf("got %d lines; want %d entries and a note", len(lines), maxListEntries)
		}
		if lines[0] != "f0000 (0 bytes)" || lines[maxListEntries-1] != fmt.Sprintf("f%04d (0 bytes)", maxListEntries-1) {
			t.Errorf("first/last shown = %q, %q; want the first %d by name", lines[0], lines[maxListEntries-1], maxListEntries)
		}
		wantNote := fmt.Sprintf("[%d of %d entries shown; 5 omitted", maxListEntries, maxListEntries+5)
		if !strings.HasPrefix(lines[maxListEntries], wantNote) {
			t.Errorf("note = %q; want prefix %q", lines[maxListEntries], wantNote)
		}
	})
}

// numberedLines renders lines from..to of a file whose line i is "line i", as
// read_file shows them.
func numberedLines(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%6d\tline %d\n", i, i)
	}
	return b.String()
}

func TestReadFile(t *testing.T) {
	checkToolLeaks(t)
	ws := t.TempDir()
	var three, long strings.Builder
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(&three, "line %d\n", i)
	}
	for i := 1; i <= maxReadLines+10; i++ {
		fmt.Fprintf(&long, "line %d\n", i)
	}
	files := map[string]string{
		"three.txt":      three.String(),
		"no-newline.txt": "line 1\nline 2",
		"long.txt":       long.String(),
		"empty.txt":      "",
		"blank.txt":      "\n\n",
		"crlf.txt":       "line 1\r\nline 2\r\n",
		"binary.bin":     "PK\x03\x04\x00\x00data",
		"wide.txt":       strings.Repeat("x", maxLineBytes+3000) + "\nline 2\n",
	}
	for name, content := range files {
		writeTestFile(t, filepath.Join(ws, name), content)
	}
	if err := os.Mkdir(filepath.Join(ws, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name    string
		args    map[string]any
		want    string
		wantErr string
	}{
		{name: "whole file, numbered", args: map[string]any{"path": "three.txt"}, want: numberedLines(1, 3)},
		{name: "last line without newline", args: map[string]any{"path": "no-newline.txt"}, want: numberedLines(1, 2)},
		{name: "blank lines", args: map[string]any{"path": "blank.txt"}, want: "     1\t\n     2\t\n"},
		{name: "CRLF endings", args: map[string]any{"path": "crlf.txt"}, want: numberedLines(1, 2)},
		{name: "offset and limit", args: map[string]any{"path": "three.txt", "offset": 2, "limit": 1},
			want: numberedLines(2, 2) + "[lines 2-2 shown; more follow: call read_file with offset=3]\n"},
		{name: "offset to the end", args: map[string]any{"path": "three.txt", "offset": 3}, want: numberedLines(3, 3)},
		{name: "limit exactly the rest", args: map[string]any{"path": "three.txt", "offset": 2, "limit": 2}, want: numberedLines(2, 3)},
		{name: "offset past the end", args: map[string]any{"path": "three.txt", "offset": 4},
			wantErr: `offset 4 is past the end of "three.txt", which has 3 lines`},
		{name: "default limit", args: map[string]any{"path": "long.txt"},
			want: numberedLines(1, maxReadLines) + fmt.Sprintf("[lines 1-%d shown; more follow: call read_file with offset=%d]\n", maxReadLines, maxReadLines+1)},
		{name: "limit capped at the maximum", args: map[string]any{"path": "long.txt", "limit": 10 * maxReadLines},
			want: numberedLines(1, maxReadLines) + fmt.Sprintf("[lines 1-%d shown; more follow: call read_file with offset=%d]\n", maxReadLines, maxReadLines+1)},
		{name: "reading on", args: map[string]any{"path": "long.txt", "offset": maxReadLines + 1}, want: numberedLines(maxReadLines+1, maxReadLines+10)},
		{name: "empty file", args: map[string]any{"path": "empty.txt"}, want: "(empty file)"},
		{name: "long line cut", args: map[string]any{"path": "wide.txt"},
			want: "     1\t" + strings.Repeat("x", maxLineBytes) + " [line cut: 3000 more bytes]\n" + "     2\tline 2\n"},
		{name: "binary refused", args: map[string]any{"path": "binary.bin"},
			wantErr: `path "binary.bin" looks like a binary file`},
		{name: "directory refused", args: map[string]any{"path": "dir"}, wantErr: `path "dir" is a directory, not a file; use ls`},
		{name: "missing file", args: map[string]any{"path": "nope.txt"}, wantErr: `path "nope.txt": no such file or directory`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runWorkspaceTool(t, "read_file", ws, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("read_file = %q, %v; want error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("read_file: %v", err)
			}
			if got != tc.want {
				t.Errorf("read_file =\n%.300q\nwant\n%.300q", got, tc.want)
			}
		})
	}
}

func TestReadFileOutputCap(t *testing.T) {
	checkToolLeaks(t)
	ws := t.TempDir()
	// 100 lines of 1000 bytes overflow the byte cap long before the line cap.
	var b strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&b, "%04d%s\n", i, strings.Repeat("y", 996))
	}
	writeTestFile(t, filepath.Join(ws, "big.txt"), b.String())

	got, err := runWorkspaceTool(t, "read_file", ws, map[string]any{"path": "big.txt"})
	if err != nil {
		t.Fatal(err)
	}
	body, note, ok := strings.Cut(got, "[output capped")
	if !ok {
		t.Fatalf("no cap note in output ending %q", got[max(0, len(got)-200):])
	}
	if len(body) > maxReadBytes {
		t.Errorf("shown lines are %d bytes; want at most %d", len(body), maxReadBytes)
	}
	lineLen := len(fmt.Sprintf("%6d\t", 1)) + 1000 + 1
	shown := maxReadBytes / lineLen
	if want := numberedWide(1, shown); body != want {
		t.Errorf("body has %d lines; want exactly lines 1-%d", strings.Count(body, "\n"), shown)
	}
	wantNote := fmt.Sprintf(" at %d bytes: lines 1-%d shown; call read_file with offset=%d to continue]\n", maxReadBytes, shown, shown+1)
	if note != wantNote {
		t.Errorf("note = %q; want %q", note, wantNote)
	}
}

func numberedWide(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%6d\t%04d%s\n", i, i, strings.Repeat("y", 996))
	}
	return b.String()
}

func TestWriteFile(t *testing.T) {
	checkToolLeaks(t)
	cases := []struct {
		name     string
		existing map[string]string
		path     string
		content  string
		want     string
		wantErr  string
	}{
		{name: "creates a file", path: "a.txt", content: "hello", want: `created "a.txt" (5 bytes)`},
		{name: "creates parent directories", path: "d1/d2/f.txt", content: "x", want: `created "d1/d2/f.txt" (1 bytes)`},
		{name: "overwrites", existing: map[string]string{"a.txt": "old content"}, path: "a.txt", content: "new", want: `overwrote "a.txt" (3 bytes)`},
		{name: "empty content", path: "e.txt", content: "", want: `created "e.txt" (0 bytes)`},
		{name: "exactly the size cap", path: "max.txt", content: strings.Repeat("m", maxFileBytes), want: fmt.Sprintf(`created "max.txt" (%d bytes)`, maxFileBytes)},
		{name: "over the size cap", path: "big.txt", content: strings.Repeat("m", maxFileBytes+1),
			wantErr: fmt.Sprintf("content is %d bytes; write_file accepts at most %d", maxFileBytes+1, maxFileBytes)},
		{name: "onto a directory", existing: map[string]string{"d/x": ""}, path: "d", content: "x", wantErr: `path "d" is a directory, not a file`},
		{name: "under a file", existing: map[string]string{"f": ""}, path: "f/x.txt", content: "x", wantErr: `path "f/x.txt": "f" exists and is not a directory`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			for p, c := range tc.existing {
				writeTestFile(t, filepath.Join(ws, p), c)
			}
			got, err := runWorkspaceTool(t, "write_file", ws, map[string]any{"path": tc.path, "content": tc.content})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("write_file = %q, %v; want error containing %q", got, err, tc.wantErr)
				}
				if _, ok := tc.existing[tc.path]; !ok {
					if info, err := os.Stat(filepath.Join(ws, tc.path)); err == nil && !info.IsDir() {
						t.Errorf("%s was created despite the error", tc.path)
					}
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("write_file = %q, %v; want %q", got, err, tc.want)
			}
			if disk := readTestFile(t, filepath.Join(ws, tc.path)); disk != tc.content {
				t.Errorf("file holds %d bytes; want the %d written", len(disk), len(tc.content))
			}
		})
	}
}

func TestStrReplace(t *testing.T) {
	checkToolLeaks(t)
	const src = "func a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 1\n}\n"
	cases := []struct {
		name     string
		content  string
		old, new string
		want     string
		wantFile string
		wantErr  string
	}{
		{name: "one occurrence", content: src, old: "func b() {\n\treturn 1", new: "func b() {\n\treturn 2",
			want: `replaced 1 occurrence in "f.go" at line 5`, wantFile: "func a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 2\n}\n"},
		{name: "zero occurrences", content: src, old: "return 3", new: "return 4",
			wantErr: `old_str not found in "f.go" (0 occurrences)`},
		{name: "whitespace must match", content: src, old: "    return 1", new: "x",
			wantErr: `(0 occurrences)`},
		{name: "two occurrences", content: src, old: "\treturn 1\n", new: "\treturn 2\n",
			wantErr: `old_str occurs 2 times in "f.go"; it must occur exactly once`},
		{name: "overlapping occurrences are ambiguous", content: "aaa", old: "aa", new: "b",
			wantErr: `old_str occurs 2 times`},
		{name: "delete with an empty new_str", content: "keep drop keep", old: " drop", new: "",
			want: `replaced 1 occurrence in "f.go" at line 1`, wantFile: "keep keep"},
		{name: "identical strings", content: src, old: "func a", new: "func a", wantErr: "old_str and new_str are identical"},
		{name: "empty old_str", content: src, old: "", new: "x", wantErr: `field "old_str" must not be empty`},
		{name: "binary file", content: "a\x00b", old: "a", new: "c", wantErr: "looks like a binary file"},
		{name: "file over the size cap", content: strings.Repeat("z", maxFileBytes) + "tail", old: "tail", new: "end",
			wantErr: fmt.Sprintf("larger than %d bytes", maxFileBytes)},
		{name: "result over the size cap", content: strings.Repeat("z", maxFileBytes-1) + "t", old: "t", new: "tt",
			wantErr: fmt.Sprintf("the edited file would be %d bytes", maxFileBytes+1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			path := filepath.Join(ws, "f.go")
			writeTestFile(t, path, tc.content)
			got, err := runWorkspaceTool(t, "str_replace", ws, map[string]any{"path": "f.go", "old_str": tc.old, "new_str": tc.new})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("str_replace = %q, %v; want error containing %q", got, err, tc.wantErr)
				}
				if disk := readTestFile(t, path); disk != tc.content {
					t.Errorf("file changed despite the error")
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("str_replace = %q, %v; want %q", got, err, tc.want)
			}
			if disk := readTestFile(t, path); disk != tc.wantFile {
				t.Errorf("file = %q; want %q", disk, tc.wantFile)
			}
		})
	}
	t.Run("keeps the file mode", func(t *testing.T) {
		ws := t.TempDir()
		path := filepath.Join(ws, "run.sh")
		if err := os.WriteFile(path, []byte("echo a\n"), 0o750); err != nil {
			t.Fatal(err)
		}
		if _, err := runWorkspaceTool(t, "str_replace", ws, map[string]any{"path": "run.sh", "old_str": "a", "new_str": "b"}); err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o750 {
			t.Errorf("mode = %v; want 0750", info.Mode().Perm())
		}
	})
	t.Run("directory refused", func(t *testing.T) {
		ws := t.TempDir()
		_, err := runWorkspaceTool(t, "str_replace", ws, map[string]any{"path": ".", "old_str": "a", "new_str": "b"})
		if err == nil || !strings.Contains(err.Error(), `path "." is a directory`) {
			t.Errorf("err = %v; want a directory error", err)
		}
	})
}

func TestWorkspaceBadArgs(t *testing.T) {
	checkToolLeaks(t)
	ws := t.TempDir()
	writeTestFile(t, filepath.Join(ws, "f.txt"), "x\n")
	cases := []struct {
		name, tool, args, want string
	}{
		{"invalid JSON", "read_file", `{"path":`, "arguments must be a JSON object"},
		{"not an object", "write_file", `["f.txt","x"]`, "arguments must be a JSON object"},
		{"a string", "ls", `"f.txt"`, "arguments must be a JSON object"},
		{"missing required field", "read_file", `{}`, `missing required field "path"`},
		{"null required field", "read_file", `{"path":null}`, `missing required field "path"`},
		{"missing content", "write_file", `{"path":"f.txt"}`, `missing required field "content"`},
		{"missing new_str", "str_replace", `{"path":"f.txt","old_str":"x"}`, `missing required field "new_str"`},
		{"number for a string", "read_file", `{"path":5}`, `field "path" must be a string, got a number`},
		{"object for a string", "ls", `{"path":{}}`, `field "path" must be a string, got an object`},
		{"boolean for a string", "write_file", `{"path":"f.txt","content":true}`, `field "content" must be a string, got a boolean`},
		{"string for an integer", "read_file", `{"path":"f.txt","offset":"2"}`, `field "offset" must be an integer, got "2"`},
		{"fraction for an integer", "read_file", `{"path":"f.txt","limit":1.5}`, `field "limit" must be an integer, got 1.5`},
		{"below the minimum", "read_file", `{"path":"f.txt","offset":0}`, `field "offset" must be at least 1, got 0`},
		{"unknown field", "read_file", `{"path":"f.txt","lines":3}`, `unknown field "lines" (allowed: limit, offset, path)`},
		{"empty path", "write_file", `{"path":"","content":"x"}`, `field "path" must not be empty`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runWorkspaceTool(t, tc.tool, ws, tc.args)
			if !errors.Is(err, ErrBadArgs) {
				t.Fatalf("%s(%s) = %q, %v; want ErrBadArgs", tc.tool, tc.args, got, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q; want it to contain %q", err, tc.want)
			}
		})
	}
	t.Run("no workspace", func(t *testing.T) {
		_, err := runWorkspaceTool(t, "ls", "", `{}`)
		if err == nil || !strings.Contains(err.Error(), "no workspace") {
			t.Errorf("err = %v; want a no-workspace error", err)
		}
	})
}

// schemaDoc is the part of a tool's JSON schema the tests check.
type schemaDoc struct {
	Type                 string `json:"type"`
	AdditionalProperties *bool  `json:"additionalProperties"`
	Properties           map[string]struct {
		Type        string `json:"type"`
		Description string `json:"description"`
	} `json:"properties"`
	Required []string `json:"required"`
}

// checkToolSpec fails t unless spec is a usable tool schema with exactly
// the required fields wantRequired.
func checkToolSpec(t *testing.T, spec Spec, wantRequired []string) {
	t.Helper()
	if len(spec.Description) < 40 {
		t.Errorf("%s: description %q is too thin for a model to act on", spec.Name, spec.Description)
	}
	var doc schemaDoc
	if err := json.Unmarshal(spec.Parameters, &doc); err != nil {
		t.Fatalf("%s: parameters are not JSON: %v", spec.Name, err)
	}
	if doc.Type != "object" || doc.AdditionalProperties == nil || *doc.AdditionalProperties {
		t.Errorf("%s: schema type %q additionalProperties %v; want object, false", spec.Name, doc.Type, doc.AdditionalProperties)
	}
	for name, p := range doc.Properties {
		if p.Type == "" || p.Description == "" {
			t.Errorf("%s: property %q lacks a type or description", spec.Name, name)
		}
	}
	if doc.Required == nil || !slices.Equal(doc.Required, wantRequired) {
		t.Errorf("%s: required = %v; want %v", spec.Name, doc.Required, wantRequired)
	}
	for _, r := range doc.Required {
		if _, ok := doc.Properties[r]; !ok {
			t.Errorf("%s: required %q is not a property", spec.Name, r)
		}
	}
}

func TestWorkspaceToolSpecs(t *testing.T) {
	want := map[string][]string{
		"ls":          {},
		"read_file":   {"path"},
		"write_file":  {"path", "content"},
		"str_replace": {"path", "old_str", "new_str"},
	}
	set := NewSet(Workspace()...)
	if got := set.Names(); !slices.Equal(got, []string{"ls", "read_file", "write_file", "str_replace"}) {
		t.Fatalf("names = %v", got)
	}
	for _, spec := range set.Specs() {
		checkToolSpec(t, spec, want[spec.Name])
	}
}

func argsJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type specialFile struct{ name, kind string }

// specialFiles makes a FIFO, a symlink to it, a socket and (as root) a
// device in ws.
func specialFiles(t *testing.T, ws string) []specialFile {
	t.Helper()
	const fifo = "a named pipe (FIFO)"
	files := []specialFile{{"fifo", fifo}, {"link-to-fifo", fifo}, {"sock", "a socket"}}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	makeSymlink(t, "fifo", filepath.Join(ws, "link-to-fifo"))
	ln, err := net.Listen("unix", filepath.Join(ws, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	// /dev/null's numbers: a device that is harmless if the check failed.
	err = syscall.Mknod(filepath.Join(ws, "null"), syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3)))
	switch {
	case err == nil:
		files = append(files, specialFile{"null", "a character device"})
	case os.Geteuid() != 0:
		t.Logf("not root: no device node case (%v)", err)
	default:
		t.Fatal(err)
	}
	return files
}

// TestWorkspaceSpecialFiles: a FIFO, a socket or a device is refused by
// every file tool at once, with an error naming what it is; nothing
// blocks on the FIFO, which has no writer.
func TestWorkspaceSpecialFiles(t *testing.T) {
	checkToolLeaks(t)
	ws := t.TempDir()
	for _, f := range specialFiles(t, ws) {
		name, kind := f.name, f.kind
		for _, tc := range []struct {
			tool string
			args map[string]any
		}{
			{ReadFile, map[string]any{"path": name}},
			{WriteFile, map[string]any{"path": name, "content": "x"}},
			{StrReplace, map[string]any{"path": name, "old_str": "a", "new_str": "b"}},
			{Ls, map[string]any{"path": name}},
		} {
			t.Run(tc.tool+" "+name, func(t *testing.T) {
				done := make(chan error, 1)
				go func() {
					_, err := runWorkspaceTool(t, tc.tool, ws, tc.args)
					done <- err
				}()
				select {
				case err := <-done:
					want := fmt.Sprintf("path %q is %s, not a regular file or directory", name, kind)
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("err = %v; want %q", err, want)
					}
				case <-time.After(2 * time.Second):
					t.Fatalf("%s on %s did not return: it blocked", tc.tool, kind)
				}
			})
		}
	}
	t.Run("ls names them", func(t *testing.T) {
		got, err := runWorkspaceTool(t, Ls, ws, map[string]any{})
		if err != nil || !strings.Contains(got, "fifo (a named pipe (FIFO))\n") || !strings.Contains(got, "sock (a socket)\n") {
			t.Errorf("ls = %q, %v", got, err)
		}
	})
}

// TestOpenCheckedRace: a FIFO swapped in after the type check is still
// refused without blocking: the open does not wait for a writer and the
// open file is checked again.
func TestOpenCheckedRace(t *testing.T) {
	ws := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	f, err := root.OpenFile("fifo", os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatalf("a non-blocking open of a FIFO must return at once: %v", err)
	}
	info, _ := f.Stat()
	f.Close()
	if err := checkKind("fifo", info, wantFile); err == nil || !strings.Contains(err.Error(), "named pipe") {
		t.Errorf("checkKind on the open FIFO = %v; want a refusal", err)
	}
}

// TestReadFileCancelled: a read of a long file stops when its context does.
func TestReadFileCancelled(t *testing.T) {
	ws := t.TempDir()
	writeTestFile(t, filepath.Join(ws, "long.txt"), strings.Repeat("line\n", 200_000))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := workspaceTool(t, ReadFile).Run(ctx, Env{Workspace: ws}, argsJSON(t, map[string]any{"path": "long.txt", "offset": 150_000}))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("read_file with a cancelled context = %.80q, %v; want context.Canceled", got, err)
	}
}
