package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"herd/agent"
	"herd/models"
	"herd/server/auth"
	"herd/server/files"
	"herd/views"
)

// apiError is an error with its HTTP status and a message safe to show.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

func errBadRequest(format string, a ...any) *apiError {
	return &apiError{http.StatusBadRequest, "bad_request", fmt.Sprintf(format, a...)}
}
func errUnprocessable(format string, a ...any) *apiError {
	return &apiError{http.StatusUnprocessableEntity, "unprocessable", fmt.Sprintf(format, a...)}
}
func errNotFound(what string) *apiError {
	return &apiError{http.StatusNotFound, "not_found", what + " not found"}
}
func errConflict(msg string) *apiError { return &apiError{http.StatusConflict, "conflict", msg} }
func errTooLarge(msg string) *apiError {
	return &apiError{http.StatusRequestEntityTooLarge, "payload_too_large", msg}
}

// authErrors are the statuses and codes of auth's sentinels; each one's
// text is its message.
var authErrors = []struct {
	err    error
	status int
	code   string
}{
	{auth.ErrUnauthorized, http.StatusUnauthorized, "unauthorized"},
	{auth.ErrInvalidToken, http.StatusUnauthorized, "unauthorized"},
	{auth.ErrBadCredentials, http.StatusUnauthorized, "invalid_credentials"},
	{auth.ErrForbidden, http.StatusForbidden, "forbidden"},
	{auth.ErrSessionRequired, http.StatusForbidden, "session_required"},
	{auth.ErrCSRF, http.StatusForbidden, "csrf"},
	{auth.ErrDisabled, http.StatusForbidden, "disabled"},
	{auth.ErrWrongPassword, http.StatusForbidden, "wrong_password"},
	{auth.ErrSetupToken, http.StatusForbidden, "setup_token"},
	{auth.ErrWeakPassword, http.StatusUnprocessableEntity, "weak_password"},
	{auth.ErrInvalidEmail, http.StatusUnprocessableEntity, "unprocessable"},
	{auth.ErrUnknownHost, http.StatusMisdirectedRequest, "unknown_host"},
	{auth.ErrRateLimited, http.StatusTooManyRequests, "rate_limited"},
}

// knownError is the answer to err when it is one a user may read (an
// *apiError, one of auth's or the runtime's), with Retry-After set on c for a rate
// limit; nil for any other error.
func knownError(err error, c echo.Context) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var be *budgetError
	if errors.As(err, &be) {
		c.Response().Header().Set("Retry-After", be.retryAfter(time.Now()))
		return &be.apiError
	}
	var rl *auth.RateLimitError
	if errors.As(err, &rl) {
		c.Response().Header().Set("Retry-After", strconv.Itoa(rl.Seconds()))
	}
	for _, m := range authErrors {
		if errors.Is(err, m.err) {
			return &apiError{m.status, m.code, err.Error()}
		}
	}
	if ae := runtimeError(err); ae != nil {
		return ae
	}
	if ae := ssoError(err); ae != nil {
		return ae
	}
	if ae := consoleError(err); ae != nil {
		return ae
	}
	return filesError(err)
}

// filesError is server/files' refusal as a user reads it, nil for any
// other error.
func filesError(err error) *apiError {
	var (
		refused *files.RefusedError
		bad     *files.PathError
		upload  *files.UploadError
	)
	switch {
	case errors.As(err, &refused):
		return errTooLarge(refused.Msg)
	case errors.As(err, &bad):
		return errBadRequest("%s", bad.Msg)
	case errors.As(err, &upload):
		return errBadRequest("%s", upload.Msg)
	case errors.Is(err, files.ErrFolder):
		return errBadRequest("only files can be deleted; delete the files of a folder one by one")
	case errors.Is(err, files.ErrNotFound):
		return errNotFound("file")
	case errors.Is(err, files.ErrOutside):
		return &apiError{Status: http.StatusForbidden, Code: "outside_workspace", Message: "a symbolic link on the path leads outside the workspace; herd serves nothing there"}
	case errors.Is(err, files.ErrNotMultipart):
		return &apiError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type", Message: `send the files as multipart/form-data, each as a part named "file"`}
	case errors.Is(err, files.ErrUploadsTaken):
		return errConflict("the workspace's uploads is not a folder (a file or a link out took its name); move it away and upload again")
	}
	return nil
}

// runtimeError is the runtime's refusal of a run (agent.Runtime.Start,
// Attachments) as a user reads it, nil for any other error.
func runtimeError(err error) *apiError {
	var runLimit *agent.RunLimitError
	var attachment *agent.AttachmentError
	switch {
	case errors.As(err, &attachment):
		return &apiError{http.StatusBadRequest, "bad_attachment", attachment.Error()}
	case errors.Is(err, agent.ErrRunActive):
		return errConflict("a run is already active in this thread; wait for it or stop it")
	case errors.Is(err, agent.ErrNotLatest), errors.Is(err, agent.ErrReplaced), errors.Is(err, agent.ErrNotStopped):
		return errConflict(err.Error())
	case errors.As(err, &runLimit):
		return &apiError{http.StatusTooManyRequests, "too_many_runs", runLimit.Error() + "; wait for one to finish or stop it"}
	case errors.Is(err, agent.ErrUnknownModel):
		return &apiError{http.StatusUnprocessableEntity, "unprocessable", err.Error() + "; GET /api/models lists the available ones"}
	case errors.Is(err, agent.ErrShuttingDown):
		return &apiError{http.StatusServiceUnavailable, "unavailable", "the server is shutting down; try again shortly"}
	case errors.Is(err, models.ErrFenced):
		return errRejoining
	}
	return nil
}

// errorHandler maps every error once, at the edge: JSON for /api, a page
// otherwise. Unknown errors are logged and shown as a generic 500.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	ae := s.toAPIError(err, c)
	if ae.Status == http.StatusServiceUnavailable {
		// Every 503 of herd is transient: shutting down, storage failing.
		c.Response().Header().Set("Retry-After", "5")
	}
	if strings.HasPrefix(c.Request().URL.Path, "/api/") || strings.HasPrefix(c.Request().URL.Path, "/healthz") || strings.HasPrefix(c.Request().URL.Path, "/readyz") {
		body := map[string]string{"code": ae.Code, "message": ae.Message}
		// A refused upload names the file and the setting in fields too,
		// so a client need not parse the message.
		var refused *files.RefusedError
		if errors.As(err, &refused) {
			body["file"], body["limit"] = refused.File, refused.Limit
		}
		var be *budgetError
		if errors.As(err, &be) {
			body["resets_at"] = be.resetsAt.UTC().Format(time.RFC3339)
		}
		// A console entry's refused field is named apart too.
		var entry *EntryError
		if errors.As(err, &entry) && entry.Field != "" {
			body["field"] = entry.Field
		}
		_ = c.JSON(ae.Status, map[string]any{"error": body})
		return
	}
	// A browser is sent to sign in; a client that sent credentials (a
	// bearer token, which pages do not take) gets the 401 itself, since
	// following the redirect with the same header would only loop.
	if ae.Status == http.StatusUnauthorized && c.Request().Header.Get("Authorization") == "" {
		_ = c.Redirect(http.StatusSeeOther, "/login?next="+c.Request().URL.RequestURI())
		return
	}
	_ = s.render(c, ae.Status, views.Error(views.ErrorPage{Page: s.page(c, http.StatusText(ae.Status)), Status: ae.Status, Message: ae.Message}))
}

func (s *Server) toAPIError(err error, c echo.Context) *apiError {
	if ae := knownError(err, c); ae != nil {
		return ae
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg := http.StatusText(he.Code)
		if m, ok := he.Message.(string); ok && m != "" {
			msg = m
		}
		code := strings.ReplaceAll(strings.ToLower(http.StatusText(he.Code)), " ", "_")
		return &apiError{he.Code, code, msg}
	}
	if errors.Is(err, models.ErrNotFound) {
		return errNotFound("resource")
	}
	if f, ok := models.AsStorageFault(err); ok {
		s.storageFails.Fail(err, "method", c.Request().Method, "path", c.Request().URL.Path, "reason", f.Reason)
		return storageUnavailable(f)
	}
	s.log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "request_id", c.Response().Header().Get(echo.HeaderXRequestID), "err", err)
	return &apiError{http.StatusInternalServerError, "internal", "something went wrong on our side"}
}
