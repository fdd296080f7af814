package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"herd/server/auth"
)

// TestAuthErrorsMapped: every error auth returns has its status and code
// here, wrapped or not, its text as the message; a rate limit also sets
// Retry-After in whole seconds; any other error is left to the 500.
func TestAuthErrorsMapped(t *testing.T) {
	cases := []struct {
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
		{auth.ErrInvalidEmail, http.StatusUnprocessableEntity, "unprocessable"},
		{auth.CheckPassword("short"), http.StatusUnprocessableEntity, "weak_password"},
		{&auth.HostError{Host: "evil.example"}, http.StatusMisdirectedRequest, "unknown_host"},
		{fmt.Errorf("sign-in: %w", auth.ErrBadCredentials), http.StatusUnauthorized, "invalid_credentials"},
	}
	for _, c := range cases {
		ctx := echo.New().NewContext(httptest.NewRequest("GET", "/", nil), httptest.NewRecorder())
		ae := knownError(c.err, ctx)
		if ae == nil || ae.Status != c.status || ae.Code != c.code || ae.Message != c.err.Error() {
			t.Errorf("%v: %+v, want %d %s with its text", c.err, ae, c.status, c.code)
		}
	}
	rec := httptest.NewRecorder()
	ctx := echo.New().NewContext(httptest.NewRequest("GET", "/", nil), rec)
	limited := &auth.RateLimitError{Why: "too many failed sign-ins from your address", RetryAfter: 1500 * time.Millisecond}
	if ae := knownError(limited, ctx); ae == nil || ae.Status != http.StatusTooManyRequests || ae.Code != "rate_limited" ||
		ae.Message != "too many failed sign-ins from your address; try again in 2 seconds" || rec.Header().Get("Retry-After") != "2" {
		t.Errorf("rate limit: %+v, Retry-After %q", ae, rec.Header().Get("Retry-After"))
	}
	if ae := knownError(fmt.Errorf("disk on fire"), ctx); ae != nil {
		t.Errorf("an unknown error mapped to %+v", ae)
	}
}
