package server

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/labstack/echo/v4"

	"herd/agent"
	"herd/server/files"
)

// A thread's workspace files (docs/API.md "Files"): server/files does
// the work and the confinement; these check the owner, move the bytes
// and set the headers that keep a file from acting as a page of herd.

// apiFilesUpload puts the files of a multipart body into the thread's
// uploads/: 201 with where each landed.
func (s *Server) apiFilesUpload(c echo.Context) error {
	t, err := s.ownThread(c)
	if err != nil {
		return err
	}
	req := c.Request()
	saved, err := s.files.Upload(req.Context(), t.ID, req.Header.Get(echo.HeaderContentType), s.transfer(c).body(req.Body))
	if err != nil {
		return err
	}
	changes := make([]agent.FileChange, len(saved))
	for i, f := range saved {
		changes[i] = agent.FileChange{Path: f.Path, Size: f.Size}
	}
	// The files are in: a lost event costs the live panel, not the upload.
	if err := s.rt.Uploaded(req.Context(), t.ID, changes); err != nil {
		s.log.Warn("record an upload", "thread", t.ID, "err", err)
	}
	return c.JSON(http.StatusCreated, map[string]any{"files": saved})
}

// apiFileDelete deletes one file of the thread's workspace and the
// folders it leaves empty: 204, and a workspace frame to every page.
func (s *Server) apiFileDelete(c echo.Context) error {
	thread, name, err := s.ownFile(c)
	if err != nil {
		return err
	}
	if err := s.files.Delete(thread, name); err != nil {
		return err
	}
	// The file is gone: a lost event costs the live panel, not the delete.
	if err := s.rt.Deleted(c.Request().Context(), thread, name); err != nil {
		s.log.Warn("record a delete", "thread", thread, "err", err)
	}
	return c.NoContent(http.StatusNoContent)
}

// ownFile is the thread (the user's own) and the workspace path a files
// route names.
func (s *Server) ownFile(c echo.Context) (thread, name string, err error) {
	t, err := s.ownThread(c)
	if err != nil {
		return "", "", err
	}
	name, err = filePathParam(c)
	return t.ID, name, err
}

// filePathParam is the file a files route names after its prefix.
func filePathParam(c echo.Context) (string, error) {
	name := c.Param("*")
	if c.Request().URL.RawPath != "" {
		// Echo routes on the escaped path when there is one.
		var err error
		if name, err = url.PathUnescape(name); err != nil {
			return "", errBadRequest("the path is not validly escaped")
		}
	}
	return name, nil
}

// fileJSON is a listed file with the task that last wrote it, if a
// subagent did (docs/API.md "Files").
type fileJSON struct {
	files.Entry
	TaskID string `json:"task_id,omitempty"`
}

// apiFiles lists the regular files of the thread's workspace, or of the
// folder ?prefix= names; with ?depth=1 the folder's direct children
// alone, its folders summed up, for a tree opened a folder at a time.
func (s *Server) apiFiles(c echo.Context) error {
	t, err := s.ownThread(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	prefix := c.QueryParam("prefix")
	var lv files.Level
	switch depth := c.QueryParam("depth"); depth {
	case "":
		lv.Files, lv.Cut, err = s.files.List(ctx, t.ID, prefix)
	case "1":
		lv, err = s.files.ListLevel(ctx, t.ID, prefix)
	default:
		return errBadRequest("depth %q is not one herd lists; leave it out for every file below the prefix, or give 1 for its direct children", depth)
	}
	if err != nil {
		return err
	}
	writers, err := agent.FileWriters(ctx, s.store, t.ID)
	if err != nil {
		return err
	}
	out := make([]fileJSON, len(lv.Files))
	for i, e := range lv.Files {
		out[i] = fileJSON{Entry: e, TaskID: writers[e.Path]}
	}
	body := map[string]any{"files": out, "truncated": lv.Cut}
	if lv.Folders != nil {
		body["folders"] = lv.Folders
	}
	return c.JSON(http.StatusOK, body)
}

// apiFile answers one file's bytes, ranges and conditional requests
// included. Only an image a browser shows as an image (PNG, JPEG, GIF,
// WebP, by its bytes) is inline; anything else, SVG and HTML first, is
// an attachment of no type a browser renders, and every answer is a
// sandbox with no sources of its own, so no file runs as a page of herd.
func (s *Server) apiFile(c echo.Context) error {
	thread, name, err := s.ownFile(c)
	if err != nil {
		return err
	}
	f, info, err := s.files.Open(thread, name)
	if err != nil {
		return err
	}
	defer f.Close()
	typ, inline := previewable(f)
	h := c.Response().Header()
	h.Set("Content-Type", typ)
	h.Set("Content-Disposition", disposition(inline, path.Base(name)))
	fileHeaders(h)
	http.ServeContent(s.transfer(c).writer(c.Response()), c.Request(), "", info.ModTime(), f)
	return nil
}

// apiFilesZip answers a zip of the thread's workspace, or of the folder
// ?prefix= names, streamed as it is made.
func (s *Server) apiFilesZip(c echo.Context) error {
	t, err := s.ownThread(c)
	if err != nil {
		return err
	}
	prefix := c.QueryParam("prefix")
	base := t.Title
	if prefix != "" {
		base = path.Base(prefix)
	}
	if strings.TrimSpace(base) == "" {
		base = "workspace"
	}
	h := c.Response().Header()
	h.Set("Content-Type", "application/zip")
	h.Set("Content-Disposition", disposition(false, files.CleanName(base)+".zip"))
	fileHeaders(h)
	err = s.files.Zip(c.Request().Context(), t.ID, prefix, s.transfer(c).writer(c.Response()))
	if err == nil {
		return nil
	}
	if !c.Response().Committed {
		h.Del("Content-Disposition")
		return err
	}
	// Half a zip is sent: cut the connection, so the client sees a
	// failed download rather than a short file.
	if !errors.Is(err, context.Canceled) {
		s.log.Warn("a zip was cut off", "thread", t.ID, "err", err)
	}
	panic(http.ErrAbortHandler)
}

// fileHeaders are on every file the API answers: no sniffing, a sandbox
// with no sources of its own should a browser render it anyway, and no
// other site may embed it.
func fileHeaders(h http.Header) {
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// previewTypes are the types a browser shows inline as an image and
// never runs: SVG, which can script, is not one.
var previewTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// previewable sniffs f's first bytes: an image of previewTypes is
// answered inline with its type; anything else as an attachment of type
// application/octet-stream, whatever its name says.
func previewable(f io.ReaderAt) (typ string, inline bool) {
	var head [512]byte
	n, _ := f.ReadAt(head[:], 0)
	if typ := http.DetectContentType(head[:n]); previewTypes[typ] {
		return typ, true
	}
	return "application/octet-stream", false
}

// disposition is the Content-Disposition of a file named name.
func disposition(inline bool, name string) string {
	kind := "attachment"
	if inline {
		kind = "inline"
	}
	if v := mime.FormatMediaType(kind, map[string]string{"filename": name}); v != "" {
		return v
	}
	return kind
}
