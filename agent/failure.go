package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// Error kinds: why a run's model call failed, on run.end's error_kind
// (docs/API.md), so the page and API clients can tell a key an admin
// must fix from a busy provider a Retry can get past.
const (
	ErrorAuth          = "auth"           // 401/403: the API key is wrong or lacks permission
	ErrorModel         = "model"          // 404: the provider does not know the model
	ErrorRateLimit     = "rate_limit"     // 429
	ErrorServer        = "server"         // 5xx (Anthropic's 529), 408, 409: the provider failed
	ErrorTimeout       = "timeout"        // the call's timeout_seconds ran out
	ErrorContextLength = "context_length" // the conversation does not fit the model
	ErrorNetwork       = "network"        // the provider could not be reached
	ErrorRequest       = "request"        // another 4xx: the provider refused the request
	ErrorProvider      = "provider"       // any other provider failure (a stream cut short)
)

// NoRetryKinds are the error kinds a Retry cannot get past: the same
// request would fail the same way until someone changes the key, the
// model or the conversation. The page offers no Retry for them
// (views.runEnd, static/answers.js, which reads this list off the page).
var NoRetryKinds = []string{ErrorAuth, ErrorModel, ErrorContextLength, ErrorRequest}

// StatusError marks a provider error that carries the HTTP status the
// provider answered with, and the wait it asked for (RetryAfter, 0 when
// it named none), so that a run's failure can be said per cause.
type StatusError struct {
	Status     int
	RetryAfter time.Duration
	Err        error
}

func (e *StatusError) Error() string { return e.Err.Error() }
func (e *StatusError) Unwrap() error { return e.Err }

// tryAgainIn is how providers name the wait in a rate limit's message
// ("Please try again in 20s", "in 1.5 seconds", "in 120ms").
var tryAgainIn = regexp.MustCompile(`(?i)try again in ([0-9]+(?:\.[0-9]+)?)\s*(ms|s|sec|secs|seconds?|m|min|minutes?)\b`)

// WaitNamedIn is the wait a provider's message names, 0 when none.
func WaitNamedIn(msg string) time.Duration {
	m := tryAgainIn.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0
	}
	unit := time.Second
	switch m[2][0] {
	case 'm', 'M':
		unit = time.Minute
		if len(m[2]) == 2 && (m[2][1] == 's' || m[2][1] == 'S') {
			unit = time.Millisecond
		}
	}
	return time.Duration(n * float64(unit))
}

// Failure is a failed model call said per cause: its kind, the notice in
// plain words that says who can fix it, and whether a Retry can help.
type Failure struct {
	Kind   string
	Notice string
	Retry  bool
}

// FailureOf says why a model call of model (its configured name, the
// provider's model id and timeout) failed.
func FailureOf(err error, cfg ModelConfig) Failure {
	var st *StatusError
	var opErr *net.OpError
	var dnsErr *net.DNSError
	f := Failure{Kind: ErrorProvider, Notice: "The model server answered with an error. Retry; if it keeps failing, an admin can check the model's settings in herd.yaml."}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		f = Failure{Kind: ErrorTimeout, Notice: "The model server stopped answering (the call timed out). Retry; if it keeps happening, an admin can raise timeout_seconds in herd.yaml."}
		if s := cfg.TimeoutSeconds; s > 0 {
			f.Notice = fmt.Sprintf("The model server stopped answering (timeout after %d s). Retry; if it keeps happening, an admin can raise timeout_seconds in herd.yaml.", s)
		}
	case errors.Is(err, ErrContextLength):
		f = Failure{Kind: ErrorContextLength, Notice: "The conversation is too long for this model's context window. Shorten your message or start a new thread."}
	case errors.As(err, &st):
		f = statusFailure(st, cfg)
	case errors.As(err, &dnsErr), errors.As(err, &opErr):
		f = Failure{Kind: ErrorNetwork, Notice: "The model server could not be reached. Retry; if it keeps failing, an admin can check base_url in herd.yaml and the network."}
	case !errors.Is(err, ErrProvider):
		return Failure{Notice: "The run failed.", Retry: true}
	}
	f.Retry = RetryHelps(f.Kind)
	return f
}

func statusFailure(st *StatusError, cfg ModelConfig) Failure {
	code := fmt.Sprintf("HTTP %d", st.Status)
	switch s := st.Status; {
	case s == http.StatusUnauthorized:
		return Failure{Kind: ErrorAuth, Notice: "The model provider rejected herd's API key (" + code + "): it is wrong or expired. An admin can fix it in herd.yaml or in the provider's console."}
	case s == http.StatusForbidden:
		return Failure{Kind: ErrorAuth, Notice: "herd's API key may not use this model (" + code + "). An admin can grant it in the provider's console or change the key in herd.yaml."}
	case s == http.StatusNotFound:
		return Failure{Kind: ErrorModel, Notice: fmt.Sprintf("The provider does not know the model %q (%s). An admin can fix the model name in herd.yaml.", cmp.Or(cfg.Model, cfg.Name), code)}
	case s == http.StatusTooManyRequests:
		when := "in a minute"
		if w := st.RetryAfter; w > 0 {
			when = "in " + waitWords(w)
		}
		return Failure{Kind: ErrorRateLimit, Notice: "The model provider's rate limit was reached (" + code + "). Retry " + when + "; if it keeps happening, an admin can raise the limit in the provider's console."}
	case s == http.StatusRequestTimeout || s == http.StatusConflict:
		// The provider gave up on this request, not on the conversation.
		return Failure{Kind: ErrorServer, Notice: "The model provider could not finish the request (" + code + "). Retry in a moment."}
	case s >= 500:
		return Failure{Kind: ErrorServer, Notice: "The model provider failed (" + code + "): the fault is on its side. Retry in a moment."}
	case s >= 400:
		return Failure{Kind: ErrorRequest, Notice: "The model provider refused the request (" + code + "). An admin can look at the details below and the model's settings in herd.yaml."}
	}
	return Failure{Kind: ErrorProvider, Notice: "The model server answered with an error (" + code + ")."}
}

// waitWords says a wait as a person would: "20 s", "3 min".
func waitWords(d time.Duration) string {
	if d < time.Second {
		return "a second"
	}
	if d < 90*time.Second {
		return strconv.Itoa(int((d+time.Second-1)/time.Second)) + " s"
	}
	return strconv.Itoa(int((d+time.Minute-1)/time.Minute)) + " min"
}

// RetryHelps says whether a Retry can get past a failure of this kind.
func RetryHelps(kind string) bool { return !slices.Contains(NoRetryKinds, kind) }
