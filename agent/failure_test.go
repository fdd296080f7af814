package agent

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestFailureOfStatus: each status reads as its kind, with Retry only
// where it can help, and a rate limit says the wait it was given.
func TestFailureOfStatus(t *testing.T) {
	cause := errors.New("llm provider: m: HTTP …")
	for _, c := range []struct {
		status int
		after  time.Duration
		kind   string
		retry  bool
		words  string
	}{
		{401, 0, ErrorAuth, false, "An admin can fix it in herd.yaml or in the provider's console."},
		{403, 0, ErrorAuth, false, "may not use this model"},
		{404, 0, ErrorModel, false, `does not know the model "gpt-x"`},
		{408, 0, ErrorServer, true, "Retry in a moment"},
		{409, 0, ErrorServer, true, "Retry in a moment"},
		{422, 0, ErrorRequest, false, "refused the request (HTTP 422)"},
		{429, 0, ErrorRateLimit, true, "Retry in a minute"},
		{429, 90 * time.Second, ErrorRateLimit, true, "Retry in 2 min"},
		{429, 1500 * time.Millisecond, ErrorRateLimit, true, "Retry in 2 s"},
		{529, 0, ErrorServer, true, "(HTTP 529): the fault is on its side"},
	} {
		f := FailureOf(&StatusError{Status: c.status, RetryAfter: c.after, Err: cause}, ModelConfig{Name: "m", Model: "gpt-x"})
		if f.Kind != c.kind || f.Retry != c.retry || !strings.Contains(f.Notice, c.words) {
			t.Errorf("HTTP %d (after %s) = %+v, want %s retry=%v saying %q", c.status, c.after, f, c.kind, c.retry, c.words)
		}
	}
}

func TestWaitNamedIn(t *testing.T) {
	for msg, want := range map[string]time.Duration{
		"Rate limit reached. Please try again in 20s.": 20 * time.Second,
		"Please try again in 1.5 seconds":              1500 * time.Millisecond,
		"try again in 120ms":                           120 * time.Millisecond,
		"Please try again in 2m.":                      2 * time.Minute,
		"Too many requests":                            0,
	} {
		if got := WaitNamedIn(msg); got != want {
			t.Errorf("WaitNamedIn(%q) = %s, want %s", msg, got, want)
		}
	}
}
