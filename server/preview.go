package server

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"herd/server/render"
	"herd/views"
)

// A file's preview for the Files panel (docs/API.md "Files"): an HTML
// fragment of the page, rendered as messages are (sanitized Markdown,
// chroma's classes), so nothing of a file runs or styles herd; an image
// is shown from the files route, which serves it inline and sandboxed.

// previewBytes is the most a preview reads of a text-like file: a big
// log is shown by its head, never read whole.
const previewBytes = render.MaxHighlightFile

// Limits of a CSV preview's table.
const (
	previewRows    = 100
	previewColumns = 50
	previewCell    = 200 // characters
)

// filePreviewFragment answers the preview of one file of the thread's
// workspace, reached as its download is.
func (s *Server) filePreviewFragment(c echo.Context) error {
	thread, name, err := s.ownFile(c)
	if err != nil {
		return err
	}
	f, info, err := s.files.Open(thread, name)
	if err != nil {
		return err
	}
	defer f.Close()
	v, err := s.preview(f, info.Size(), name)
	if err != nil {
		return err
	}
	v.ThreadID, v.Path = thread, name
	return s.render(c, http.StatusOK, views.FilePreview(v))
}

// preview chooses how to show the file by its bytes first (an image a
// browser shows, a PDF, text or not), then by its name's extension.
func (s *Server) preview(f io.ReaderAt, size int64, name string) (views.FilePreviewView, error) {
	v := views.FilePreviewView{Size: size}
	if _, inline := previewable(f); inline {
		v.Kind = views.PreviewImage
		return v, nil
	}
	head := make([]byte, min(size, previewBytes))
	n, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return v, err
	}
	head = head[:n]
	v.Truncated = size > int64(n)
	if bytes.HasPrefix(head, []byte("%PDF-")) {
		v.Kind, v.Truncated = views.PreviewPDF, false
		return v, nil
	}
	text, ok := textOf(head, v.Truncated)
	if !ok {
		v.Kind, v.Truncated = views.PreviewBinary, false
		return v, nil
	}
	v.Shown = int64(len(head))
	switch ext := strings.ToLower(path.Ext(name)); {
	case ext == ".md" || ext == ".markdown":
		v.Kind, v.HTML = views.PreviewMarkdown, s.md.Render(text)
	case ext == ".csv" || ext == ".tsv":
		if table, ok := csvTable(text, ext == ".tsv", v.Truncated); ok {
			v.Kind, v.Table = views.PreviewCSV, table
			break
		}
		v.Kind, v.Text = views.PreviewText, text
	case render.FileLexer(path.Base(name)) != nil:
		v.Kind, v.HTML = views.PreviewCode, render.CodeFile(path.Base(name), text)
	default:
		v.Kind, v.Text = views.PreviewText, text
	}
	return v, nil
}

// textOf is head as text when it is valid UTF-8 without NUL bytes; a
// head cut from a longer file may end inside a character, which is left
// off.
func textOf(head []byte, cut bool) (string, bool) {
	if cut {
		for i := 0; i < utf8.UTFMax-1 && len(head) > 0; i++ {
			if r, size := utf8.DecodeLastRune(head); r != utf8.RuneError || size > 1 {
				break
			}
			head = head[:len(head)-1]
		}
	}
	if !utf8.Valid(head) || bytes.IndexByte(head, 0) >= 0 {
		return "", false
	}
	return string(head), true
}

// csvTable is the first rows of a CSV (or, with tab, TSV) text as a
// table, its first row the header; false when the text is not CSV. The
// last line of a cut text is left off, as it may be cut too.
func csvTable(text string, tab, cut bool) (*views.PreviewTable, bool) {
	if cut {
		if i := strings.LastIndexByte(text, '\n'); i >= 0 {
			text = text[:i+1]
		}
	}
	r := csv.NewReader(strings.NewReader(text))
	r.FieldsPerRecord = -1
	r.ReuseRecord = false
	if tab {
		r.Comma = '\t'
	}
	t := &views.PreviewTable{}
	for rows := 0; ; rows++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false
		}
		t.Columns = max(t.Columns, len(rec))
		switch {
		case rows == 0:
			t.Header = cells(rec)
		case rows <= previewRows:
			t.Rows = append(t.Rows, cells(rec))
		}
		t.Total = rows // rows after the header
	}
	if t.Header == nil {
		return nil, false
	}
	t.AtLeast = cut
	return t, true
}

// cells are a row's first previewColumns cells, each cut to previewCell
// characters.
func cells(rec []string) []string {
	rec = rec[:min(len(rec), previewColumns)]
	out := make([]string, len(rec))
	for i, c := range rec {
		if utf8.RuneCountInString(c) > previewCell {
			c = string([]rune(c)[:previewCell]) + "…"
		}
		out[i] = c
	}
	return out
}
