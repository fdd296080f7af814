package server

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// hashAssets maps each static file to a URL carrying its content hash.
func hashAssets(static fs.FS) (map[string]string, error) {
	out := map[string]string{}
	if static == nil {
		return out, nil
	}
	err := fs.WalkDir(static, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(static, path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[path] = "/static/" + path + "?v=" + hex.EncodeToString(sum[:6])
		return nil
	})
	return out, err
}

func (s *Server) serveStatic(c echo.Context) error {
	name := c.Param("*")
	if s.static == nil || name == "" || strings.Contains(name, "..") {
		return errNotFound("file")
	}
	if _, err := fs.Stat(s.static, name); err != nil {
		return errNotFound("file")
	}
	// Hashed URLs never change. ES modules import each other by plain
	// relative URL (/static/cards.js), which a new binary may change: those
	// are revalidated on every load, cheaply, by the same content hash as
	// an ETag (http.ServeFileFS answers a matching If-None-Match with 304).
	_, sum, _ := strings.Cut(s.assets[name], "?v=")
	if sum != "" {
		c.Response().Header().Set("ETag", `"`+sum+`"`)
	}
	if v := c.QueryParam("v"); v != "" && v == sum {
		c.Response().Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		c.Response().Header().Set("Cache-Control", "no-cache")
	}
	// Go's MIME table has no .webmanifest; browsers want this type.
	if strings.HasSuffix(name, ".webmanifest") {
		c.Response().Header().Set("Content-Type", "application/manifest+json")
	}
	http.ServeFileFS(c.Response(), c.Request(), s.static, name)
	return nil
}
