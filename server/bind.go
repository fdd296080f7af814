package server

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

// bindJSON decodes a JSON object body strictly: the content type must be
// JSON, unknown fields and trailing data are refused, and every problem is
// a 4xx with a message that says what to fix.
func bindJSON(c echo.Context, dst any) error {
	req := c.Request()
	mt, _, _ := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if mt != echo.MIMEApplicationJSON {
		return &apiError{http.StatusUnsupportedMediaType, "unsupported_media_type", "send the body as application/json"}
	}
	dec := json.NewDecoder(req.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return errBadRequest("the body must hold exactly one JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errBadRequest("the body must hold exactly one JSON object")
	}
	return nil
}

func jsonError(err error) error {
	var (
		syn  *json.SyntaxError
		typ  *json.UnmarshalTypeError
		maxb *http.MaxBytesError
	)
	switch {
	case errors.As(err, &maxb):
		return errTooLarge("the request body is larger than 1 MB")
	case errors.Is(err, io.EOF):
		return errBadRequest("the body is empty; send a JSON object")
	case errors.As(err, &syn):
		return errBadRequest("malformed JSON at byte %d: %v", syn.Offset, err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errBadRequest("malformed JSON: the body ends too early")
	case errors.As(err, &typ):
		if typ.Field != "" {
			return errBadRequest("field %q must be %s", typ.Field, typ.Type.String())
		}
		return errBadRequest("the body must be a JSON object")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errBadRequest("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return errBadRequest("malformed JSON: %v", err)
}

// pathID returns a UUID path parameter; anything else is "not found", the
// same answer as an id that does not exist.
func pathID(c echo.Context, name, what string) (string, error) {
	id := c.Param(name)
	if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
		return "", errNotFound(what)
	}
	return strings.ToLower(id), nil
}

// queryInt parses an optional integer query parameter within [lo, hi].
func queryInt(c echo.Context, name string, def, lo, hi int64) (int64, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, errBadRequest("%s must be an integer from %d to %d", name, lo, hi)
	}
	return n, nil
}
