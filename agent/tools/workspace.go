package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// Limits of the workspace tools. They keep one tool result small enough for
// a model's context and one write small enough to be a deliberate edit.
const (
	maxListEntries = 500
	maxReadLines   = 2000
	maxReadBytes   = 50_000
	maxLineBytes   = 2000
	maxFileBytes   = 1 << 20
	// binarySniffBytes is how much of a file is checked for NUL bytes, the
	// same heuristic git uses to call a file binary.
	binarySniffBytes = 8000
)

// ErrOutsideWorkspace marks a path that resolves outside the workspace.
var ErrOutsideWorkspace = errors.New("outside the workspace")

// ErrFileType marks a path that is not the type of file a call needs: a
// directory where a file was asked for, a file where a directory was, or
// a FIFO, socket or device.
var ErrFileType = errors.New("not the type of file asked for")

// typeError is a refusal of ErrFileType, worded for the model.
type typeError struct{ msg string }

func (e *typeError) Error() string        { return e.msg }
func (e *typeError) Is(target error) bool { return target == ErrFileType }

// Workspace returns the file tools confined to Env.Workspace, with the
// default workspace size limit: see WorkspaceTools.
func Workspace() []Tool {
	return WorkspaceTools(SandboxConfig{})
}

// WorkspaceTools returns the file tools confined to Env.Workspace: ls,
// read_file, write_file and str_replace (docs/DESIGN.md §4). Every path
// is relative to the workspace root and resolved through os.Root, so no
// path, symlink included, can reach a file outside the workspace. They
// touch only regular files and directories: a FIFO, socket or device is
// refused without being opened for reading or writing, so none can block
// a call. Writes that would take the workspace over its limits
// (cfg.Limits) are refused. With cfg.RunAs set (a root herd), what
// write_file creates belongs to that account, as the workspace does, so
// that commands can change it.
func WorkspaceTools(cfg SandboxConfig) []Tool {
	q := workspaceQuota(cfg.Limits)
	return []Tool{lsTool{}, readFileTool{}, writeFileTool{quota: q, owner: cfg.RunAs}, strReplaceTool{quota: q}}
}

type lsTool struct{}

// Repeatable: listing reads only.
func (lsTool) Repeatable() bool { return true }

var lsSchema = Schema{
	Properties: map[string]Prop{
		"path": {Type: "string", Description: `Directory to list, relative to the workspace root. Default "." (the root).`},
	},
}

func (lsTool) Spec() Spec {
	return lsSchema.Spec(Ls, fmt.Sprintf(
		"List a directory of the workspace. Directories end with \"/\", files show their size in bytes, "+
			"symlinks show their target. Entries are sorted by name; at most %d are shown, with a note of how "+
			"many were omitted. Paths are relative to the workspace root.", maxListEntries))
}

func (lsTool) Run(ctx context.Context, env Env, args json.RawMessage) (string, error) {
	var p struct {
		Path string `json:"path"`
	}
	if err := lsSchema.Decode(args, &p); err != nil {
		return "", err
	}
	dir := p.Path
	if dir == "" {
		dir = "."
	}
	root, err := openWorkspace(env)
	if err != nil {
		return "", err
	}
	defer root.Close()

	f, err := openChecked(root, dir, os.O_RDONLY|syscall.O_DIRECTORY, wantDir)
	if err != nil {
		return "", err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return "", workspaceError(dir, err)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if len(entries) == 0 {
		return "(empty directory)", nil
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })

	var b strings.Builder
	for _, e := range entries[:min(len(entries), maxListEntries)] {
		b.WriteString(describeEntry(root, dir, e))
		b.WriteByte('\n')
	}
	if omitted := len(entries) - maxListEntries; omitted > 0 {
		fmt.Fprintf(&b, "[%d of %d entries shown; %d omitted: list a subdirectory to see more]\n",
			maxListEntries, len(entries), omitted)
	}
	return b.String(), nil
}

func describeEntry(root *os.Root, dir string, e fs.DirEntry) string {
	switch {
	case e.IsDir():
		return e.Name() + "/"
	case e.Type()&fs.ModeSymlink != 0:
		target, err := root.Readlink(path.Join(dir, e.Name()))
		if err != nil {
			return e.Name() + " -> ?"
		}
		return e.Name() + " -> " + target
	case e.Type().IsRegular():
		info, err := e.Info()
		if err != nil {
			return e.Name()
		}
		return fmt.Sprintf("%s (%d bytes)", e.Name(), info.Size())
	default:
		return fmt.Sprintf("%s (%s)", e.Name(), kindOf(e.Type()))
	}
}

type readFileTool struct{}

// Repeatable: reading a file changes nothing.
func (readFileTool) Repeatable() bool { return true }

var readFileSchema = Schema{
	Properties: map[string]Prop{
		"path":   {Type: "string", Description: "File to read, relative to the workspace root."},
		"offset": {Type: "integer", Minimum: 1, Description: "First line to show, 1-based. Default 1."},
		"limit":  {Type: "integer", Minimum: 1, Description: fmt.Sprintf("Most lines to show. Default and maximum %d.", maxReadLines)},
	},
	Required: []string{"path"},
}

func (readFileTool) Spec() Spec {
	return readFileSchema.Spec(ReadFile, fmt.Sprintf(
		"Read a text file of the workspace. Each line is shown prefixed with its line number and a tab; "+
			"the prefix is not part of the file (leave it out of str_replace's old_str). At most %d lines "+
			"and %d bytes are shown per call, and lines longer than %d bytes are cut; a note at the end says "+
			"which offset to pass to read on. Binary files are refused.",
		maxReadLines, maxReadBytes, maxLineBytes))
}

func (readFileTool) Run(ctx context.Context, env Env, args json.RawMessage) (string, error) {
	var p struct {
		Path   string `json:"path"`
		Offset *int   `json:"offset"`
		Limit  *int   `json:"limit"`
	}
	if err := readFileSchema.Decode(args, &p); err != nil {
		return "", err
	}
	if err := requirePath(p.Path); err != nil {
		return "", err
	}
	offset, limit := 1, maxReadLines
	if p.Offset != nil {
		offset = *p.Offset
	}
	if p.Limit != nil {
		limit = min(*p.Limit, maxReadLines)
	}
	root, f, err := openWorkspaceFile(env, p.Path)
	if err != nil {
		return "", err
	}
	defer root.Close()
	defer f.Close()

	br := readBuffers.Get().(*bufio.Reader)
	br.Reset(f)
	defer func() { br.Reset(nil); readBuffers.Put(br) }()
	sniff, err := br.Peek(binarySniffBytes)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", workspaceError(p.Path, err)
	}
	if len(sniff) == 0 {
		return "(empty file)", nil
	}
	if bytes.IndexByte(sniff, 0) >= 0 {
		return "", fmt.Errorf("path %q looks like a binary file (it contains NUL bytes); read_file shows text only", p.Path)
	}
	return readLines(ctx, br, p.Path, offset, limit)
}

// readBuffers holds read_file's 64 KB readers: a thousand subagents
// reading files at once allocated one per call, an eighth of what a
// burst of make load-cluster allocated.
var readBuffers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// readLines renders lines offset.. of br, numbered, within the line and
// byte limits, and ends with a note when something is left to read.
func readLines(ctx context.Context, br *bufio.Reader, name string, offset, limit int) (string, error) {
	var b strings.Builder
	lineNo, shown := 0, 0
	for {
		// A file of millions of short lines is skipped line by line to
		// reach offset; a stopped run must not wait for that.
		if lineNo%1024 == 0 && ctx.Err() != nil {
			return "", ctx.Err()
		}
		line, dropped, err := readCappedLine(br)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", workspaceError(name, err)
		}
		lineNo++
		if lineNo < offset {
			continue
		}
		if shown == limit {
			fmt.Fprintf(&b, "[lines %d-%d shown; more follow: call read_file with offset=%d]\n", offset, lineNo-1, lineNo)
			return b.String(), nil
		}
		rendered := fmt.Sprintf("%6d\t%s", lineNo, line)
		if dropped > 0 {
			rendered += fmt.Sprintf(" [line cut: %d more bytes]", dropped)
		}
		if shown > 0 && b.Len()+len(rendered)+1 > maxReadBytes {
			fmt.Fprintf(&b, "[output capped at %d bytes: lines %d-%d shown; call read_file with offset=%d to continue]\n",
				maxReadBytes, offset, lineNo-1, lineNo)
			return b.String(), nil
		}
		b.WriteString(rendered)
		b.WriteByte('\n')
		shown++
	}
	if shown == 0 {
		return "", fmt.Errorf("offset %d is past the end of %q, which has %d lines", offset, name, lineNo)
	}
	return b.String(), nil
}

// readCappedLine reads one line without its line ending, keeping at most
// maxLineBytes of it and counting the bytes it dropped, so a file with
// one enormous line cannot exhaust memory.
func readCappedLine(br *bufio.Reader) (line []byte, dropped int, err error) {
	for {
		chunk, isPrefix, err := br.ReadLine()
		if errors.Is(err, io.EOF) && (len(line) > 0 || dropped > 0) {
			return line, dropped, nil
		}
		if err != nil {
			return nil, 0, err
		}
		keep := min(len(chunk), maxLineBytes-len(line))
		line = append(line, chunk[:keep]...)
		dropped += len(chunk) - keep
		if !isPrefix {
			return line, dropped, nil
		}
	}
}

type writeFileTool struct {
	quota quota
	owner *Account // nil: what it creates stays the server's
}

var writeFileSchema = Schema{
	Properties: map[string]Prop{
		"path":    {Type: "string", Description: "File to write, relative to the workspace root."},
		"content": {Type: "string", Description: "The file's complete new content."},
	},
	Required: []string{"path", "content"},
}

func (writeFileTool) Spec() Spec {
	return writeFileSchema.Spec(WriteFile, fmt.Sprintf(
		"Create or overwrite a file of the workspace with the given content. Missing parent directories "+
			"are created. Content is limited to %d bytes. To change part of an existing file, prefer str_replace.",
		maxFileBytes))
}

func (t writeFileTool) Run(ctx context.Context, env Env, args json.RawMessage) (string, error) {
	var p struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if err := writeFileSchema.Decode(args, &p); err != nil {
		return "", err
	}
	if err := requirePath(p.Path); err != nil {
		return "", err
	}
	if len(p.Content) > maxFileBytes {
		return "", fmt.Errorf("content is %d bytes; write_file accepts at most %d", len(p.Content), maxFileBytes)
	}
	root, err := openWorkspace(env)
	if err != nil {
		return "", err
	}
	defer root.Close()

	// Checked before the parents are made, so a refused write leaves nothing.
	verb, grow, create := "created", int64(len(p.Content)), true
	if info, err := root.Stat(p.Path); err == nil {
		if err := checkKind(p.Path, info, wantFile); err != nil {
			return "", err
		}
		verb, grow, create = "overwrote", grow-info.Size(), false
	}
	if err := t.quota.refuseGrowth(ctx, env.Workspace, grow, create); err != nil {
		return "", err
	}
	if err := t.makeParents(root, p.Path); err != nil {
		return "", err
	}
	if err := writeRegular(root, p.Path, os.O_CREATE, p.Content, t.owner); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %q (%d bytes)", verb, p.Path, len(p.Content)), nil
}

type strReplaceTool struct{ quota quota }

var strReplaceSchema = Schema{
	Properties: map[string]Prop{
		"path":    {Type: "string", Description: "File to edit, relative to the workspace root."},
		"old_str": {Type: "string", Description: "Exact text to replace, including whitespace and indentation. It must occur exactly once in the file."},
		"new_str": {Type: "string", Description: "Text to put in its place (may be empty to delete old_str)."},
	},
	Required: []string{"path", "old_str", "new_str"},
}

func (strReplaceTool) Spec() Spec {
	return strReplaceSchema.Spec(StrReplace, fmt.Sprintf(
		"Edit a text file of the workspace by replacing one exact occurrence of old_str with new_str. "+
			"old_str must match the file byte for byte and occur exactly once: if it occurs 0 or several "+
			"times nothing is changed and the error says how many times it was found; add surrounding "+
			"lines to make it unique. Files up to %d bytes.", maxFileBytes))
}

func (t strReplaceTool) Run(ctx context.Context, env Env, args json.RawMessage) (string, error) {
	var p struct {
		Path   string `json:"path"`
		OldStr string `json:"old_str"`
		NewStr string `json:"new_str"`
	}
	if err := strReplaceSchema.Decode(args, &p); err != nil {
		return "", err
	}
	if err := requirePath(p.Path); err != nil {
		return "", err
	}
	if p.OldStr == "" {
		return "", fmt.Errorf("%w: field \"old_str\" must not be empty", ErrBadArgs)
	}
	if p.OldStr == p.NewStr {
		return "", fmt.Errorf("%w: old_str and new_str are identical, so nothing would change", ErrBadArgs)
	}
	root, f, err := openWorkspaceFile(env, p.Path)
	if err != nil {
		return "", err
	}
	defer root.Close()
	text, err := readEditable(f, p.Path)
	if err != nil {
		return "", err
	}
	updated, at, err := replaceOnce(text, p.OldStr, p.NewStr, p.Path)
	if err != nil {
		return "", err
	}
	if err := t.quota.refuseGrowth(ctx, env.Workspace, int64(len(updated)-len(text)), false); err != nil {
		return "", err
	}
	// O_TRUNC without O_CREATE keeps the file's mode and fails rather than
	// recreate a file removed since it was read.
	if err := writeRegular(root, p.Path, 0, updated, nil); err != nil {
		return "", err
	}
	line := strings.Count(text[:at], "\n") + 1
	return fmt.Sprintf("replaced 1 occurrence in %q at line %d", p.Path, line), nil
}

// readEditable reads the file str_replace edits and closes it, refusing a
// file too large or too binary to edit as text.
func readEditable(f *os.File, name string) (string, error) {
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	f.Close()
	if err != nil {
		return "", workspaceError(name, err)
	}
	if len(data) > maxFileBytes {
		return "", fmt.Errorf("path %q is larger than %d bytes; str_replace edits smaller files only", name, maxFileBytes)
	}
	if bytes.IndexByte(data[:min(len(data), binarySniffBytes)], 0) >= 0 {
		return "", fmt.Errorf("path %q looks like a binary file (it contains NUL bytes); str_replace edits text only", name)
	}
	return string(data), nil
}

// replaceOnce replaces oldStr in text with newStr and returns the edited
// text and the offset of the replacement. An oldStr that does not occur
// exactly once is refused rather than guessed at.
func replaceOnce(text, oldStr, newStr, name string) (string, int, error) {
	switch n := countOverlapping(text, oldStr); n {
	case 0:
		return "", 0, fmt.Errorf("old_str not found in %q (0 occurrences); it must match the file exactly, whitespace and indentation included; nothing was changed", name)
	case 1:
	default:
		return "", 0, fmt.Errorf("old_str occurs %d times in %q; it must occur exactly once: include more surrounding lines; nothing was changed", n, name)
	}
	at := strings.Index(text, oldStr)
	updated := text[:at] + newStr + text[at+len(oldStr):]
	if len(updated) > maxFileBytes {
		return "", 0, fmt.Errorf("the edited file would be %d bytes; at most %d are allowed; nothing was changed", len(updated), maxFileBytes)
	}
	return updated, at, nil
}

// makeParents makes the missing parent directories of name, and gives
// those it made to the tool's owner.
func (t writeFileTool) makeParents(root *os.Root, name string) error {
	dir := filepath.Dir(name)
	if dir == "." {
		return nil
	}
	// Which parents are new matters only when they are given away.
	parts := strings.Split(filepath.ToSlash(filepath.Clean(dir)), "/")
	missing := len(parts)
	for i := range parts {
		if t.owner == nil {
			break
		}
		if _, err := root.Lstat(path.Join(parts[:i+1]...)); errors.Is(err, fs.ErrNotExist) {
			missing = i
			break
		}
	}
	err := root.MkdirAll(dir, 0o755)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("path %q: %q exists and is not a directory", name, dir)
	}
	if err != nil {
		return workspaceError(name, err)
	}
	for i := missing; t.owner != nil && i < len(parts); i++ {
		if err := root.Lchown(path.Join(parts[:i+1]...), t.owner.UID, t.owner.GID); err != nil {
			return workspaceError(name, err)
		}
	}
	return nil
}

// writeRegular replaces the content of the regular file name, creating
// it when flag has os.O_CREATE; a file it creates is given to owner
// (when set) through the open file.
func writeRegular(root *os.Root, name string, flag int, content string, owner *Account) error {
	out, err := openChecked(root, name, os.O_WRONLY|os.O_TRUNC|flag, wantFile)
	if err != nil {
		return err
	}
	if owner != nil {
		if err := out.Chown(owner.UID, owner.GID); err != nil {
			out.Close()
			return workspaceError(name, err)
		}
	}
	if _, err := io.WriteString(out, content); err != nil {
		out.Close()
		return workspaceError(name, err)
	}
	if err := out.Close(); err != nil {
		return workspaceError(name, err)
	}
	return nil
}

// countOverlapping counts every position where sub starts, so "aa" in
// "aaa" is ambiguous (2) rather than unique as strings.Count would say.
func countOverlapping(s, sub string) int {
	n := 0
	for {
		i := strings.Index(s, sub)
		if i < 0 {
			return n
		}
		n++
		s = s[i+1:]
	}
}

func openWorkspace(env Env) (*os.Root, error) {
	if env.Workspace == "" {
		return nil, errNoWorkspace
	}
	root, err := os.OpenRoot(env.Workspace)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	return root, nil
}

// openWorkspaceFile opens env's workspace and the regular file name in it.
// The caller closes both: the root stays open so a tool can write the file
// back through it.
func openWorkspaceFile(env Env, name string) (*os.Root, *os.File, error) {
	root, err := openWorkspace(env)
	if err != nil {
		return nil, nil, err
	}
	f, err := openChecked(root, name, os.O_RDONLY, wantFile)
	if err != nil {
		root.Close()
		return nil, nil, err
	}
	return root, f, nil
}

// What openChecked expects to find.
const (
	wantFile = false
	wantDir  = true
)

// openChecked opens name with flag only if it is a regular file (or a
// directory, with wantDir), so that no tool call can block on a FIFO or
// touch a device or socket. The type is checked before opening, and again
// on the open file: O_NONBLOCK makes the open itself return at once even
// if a FIFO was swapped in between, and the second check refuses it.
func openChecked(root *os.Root, name string, flag int, dir bool) (*os.File, error) {
	info, err := root.Stat(name)
	if err != nil && !(errors.Is(err, fs.ErrNotExist) && flag&os.O_CREATE != 0) {
		return nil, workspaceError(name, err)
	}
	if err == nil {
		if err := checkKind(name, info, dir); err != nil {
			return nil, err
		}
	}
	f, err := root.OpenFile(name, flag|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, workspaceError(name, err)
	}
	if info, err = f.Stat(); err != nil {
		f.Close()
		return nil, workspaceError(name, err)
	}
	if err := checkKind(name, info, dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkKind refuses anything but a regular file (or a directory, with
// dir), with an error that tells the model what it found and which tool
// fits instead.
func checkKind(name string, info fs.FileInfo, dir bool) error {
	switch {
	case info.IsDir() && dir, info.Mode().IsRegular() && !dir:
		return nil
	case info.IsDir():
		return &typeError{fmt.Sprintf("path %q is a directory, not a file; use ls to list it", name)}
	case info.Mode().IsRegular():
		return &typeError{fmt.Sprintf("path %q is a file, not a directory; use read_file to read it", name)}
	default:
		return &typeError{fmt.Sprintf("path %q is %s, not a regular file or directory; the workspace tools refuse it", name, kindOf(info.Mode().Type()))}
	}
}

// kindOf names a file type that is neither a regular file nor a directory.
func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	default:
		return "a special file"
	}
}

func requirePath(p string) error {
	if p == "" {
		return fmt.Errorf("%w: field \"path\" must not be empty", ErrBadArgs)
	}
	return nil
}

// workspaceError rewrites an os.Root error into what the model needs:
// the path it passed and the innermost reason, without the syscall noise.
func workspaceError(name string, err error) error {
	cause := err
	for inner := errors.Unwrap(cause); inner != nil; inner = errors.Unwrap(cause) {
		cause = inner
	}
	if escapesRoot(cause) {
		if !filepath.IsLocal(name) {
			return fmt.Errorf("path %q is %w; use a path relative to the workspace root", name, ErrOutsideWorkspace)
		}
		return fmt.Errorf("path %q is %w: a symlink on it points outside the workspace or is absolute", name, ErrOutsideWorkspace)
	}
	return fmt.Errorf("path %q: %w", name, cause)
}

// escapesRoot reports os.Root's refusal of a path leading outside the root.
// The os package does not export that sentinel, so its text is matched;
// TestWorkspaceEscapes fails if a Go release changes it.
func escapesRoot(err error) bool {
	return err != nil && err.Error() == "path escapes from parent"
}
