// Package provider holds what herd's HTTP providers (agent/openai and
// agent/anthropic) share: reading a model's endpoint from its config, and
// the errors and tool arguments a call returns. The rules live here once so
// the providers cannot drift apart.
package provider

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"herd/agent"
)

const (
	// defaultTimeout applies when timeout_seconds is unset, so a server
	// that stops answering cannot hold a run forever.
	defaultTimeout    = 5 * time.Minute
	defaultMaxRetries = 2
	// maxMessage bounds how much of an error body goes into an error,
	// since a proxy may answer with a whole HTML page.
	maxMessage = 500
)

// errCallTimedOut is the cause of the per-call deadline, so a timeout can
// be told from the caller's own cancellation or deadline.
var errCallTimedOut = errors.New("call timed out")

// envKey matches an api_key that names an environment variable.
var envKey = regexp.MustCompile(`^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$`)

// Endpoint is one configured model's endpoint, checked: where it is, its
// key, and the limits of one call.
type Endpoint struct {
	Name       string // the configured model name, for error text and logs
	Model      string // the provider's model id when an agent.Request names none
	BaseURL    string
	APIKey     string // the key itself: a $VAR is read from the environment
	MaxRetries int
	Timeout    time.Duration // of one call as a whole, retries and streaming included
}

// NewEndpoint checks cfg's endpoint for a provider of the given kind
// ("openai"), whose error text it names. An api_key of the form $VAR or
// ${VAR} is read from the environment here, once; the variable must be
// set. base_url defaults to defaultBaseURL, max_retries to 2 and
// timeout_seconds to 5 minutes.
func NewEndpoint(kind string, cfg agent.ModelConfig, defaultBaseURL string) (Endpoint, error) {
	key := cfg.APIKey
	if m := envKey.FindStringSubmatch(key); m != nil {
		name := cmp.Or(m[1], m[2])
		key = os.Getenv(name)
		if key == "" {
			return Endpoint{}, fmt.Errorf("%s model %q: api_key: environment variable %s is not set", kind, cfg.Name, name)
		}
	}

	base := cmp.Or(cfg.BaseURL, defaultBaseURL)
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Endpoint{}, fmt.Errorf("%s model %q: base_url %q is not an http(s) URL", kind, cfg.Name, base)
	}

	retries := defaultMaxRetries
	if cfg.MaxRetries != nil {
		retries = *cfg.MaxRetries
	}
	if retries < 0 {
		return Endpoint{}, fmt.Errorf("%s model %q: max_retries must not be negative, got %d", kind, cfg.Name, retries)
	}

	timeout := defaultTimeout
	if cfg.TimeoutSeconds > 0 {
		timeout = time.Duration(cfg.TimeoutSeconds) * time.Second
	}
	return Endpoint{
		Name:       cfg.Name,
		Model:      cmp.Or(cfg.Model, cfg.Name),
		BaseURL:    base,
		APIKey:     key,
		MaxRetries: retries,
		Timeout:    timeout,
	}, nil
}

// WithTimeout bounds one call by the endpoint's timeout, so that
// ContextError can tell it from the caller's own end.
func (e Endpoint) WithTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, e.Timeout, errCallTimedOut)
}

// Errorf builds a provider error: it wraps agent.ErrProvider, names the
// model and never carries the API key (see Redact).
func (e Endpoint) Errorf(format string, args ...any) error {
	err := fmt.Errorf("%w: %s: "+format, append([]any{agent.ErrProvider, e.Name}, args...)...)
	if text, ok := Redact(err.Error(), e.APIKey); ok {
		return &scrubbedError{text: text, err: err}
	}
	return err
}

// StatusErrorf is Errorf for a call the provider refused with an HTTP
// status, marked with it (agent.StatusError) so that the run's failure
// is said per cause; after is the wait the provider asked for, from its
// headers or, failing those, its message ("try again in 20s").
func (e Endpoint) StatusErrorf(status int, after time.Duration, msg string, format string, args ...any) error {
	if after <= 0 {
		after = agent.WaitNamedIn(msg)
	}
	return &agent.StatusError{Status: status, RetryAfter: after, Err: e.Errorf(format, args...)}
}

// TrimPrefix is err's text without the "llm provider: model: " prefix
// Errorf adds, so that two errors can be joined into one sentence.
func (e Endpoint) TrimPrefix(err error) string {
	return strings.TrimPrefix(err.Error(), agent.ErrProvider.Error()+": "+e.Name+": ")
}

// ContextError explains a call ended by its context (one from WithTimeout):
// the per-call timeout, or the caller's cancellation or deadline (wrapped
// for errors.Is).
func (e Endpoint) ContextError(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), errCallTimedOut) {
		return e.Errorf("timed out after %s (timeout_seconds): %w", e.Timeout, context.DeadlineExceeded)
	}
	return e.Errorf("call stopped: %w", ctx.Err())
}

// AfterAttempts is the note an error gets when a call took more than one
// attempt, "" otherwise.
func AfterAttempts(n int) string {
	if n > 1 {
		return fmt.Sprintf(" (after %d attempts)", n)
	}
	return ""
}

// IsDecodeError says whether err is a malformed JSON event or chunk.
func IsDecodeError(err error) bool {
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	return errors.As(err, &syntaxErr) || errors.As(err, &typeErr)
}

// Message is the human part of an error: msg, the provider's own message
// when one was found, else the raw body (a proxy's plain text or HTML),
// bounded.
func Message(msg, raw string) string {
	if msg == "" {
		msg = strings.Join(strings.Fields(raw), " ")
	}
	if msg == "" {
		return "(empty error body)"
	}
	if len(msg) > maxMessage {
		msg = strings.ToValidUTF8(msg[:maxMessage], "") + "…"
	}
	return msg
}

// overflowPhrases are how servers say a request was longer than the
// model's context window: OpenAI's code and message, vLLM, llama.cpp,
// LiteLLM, OpenRouter, DeepSeek and Anthropic ("prompt is too long").
var overflowPhrases = []string{
	"context_length_exceeded", "maximum context length", "context length", "context window",
	"prompt is too long", "input is too long", "too many tokens", "exceeds the available context",
	"context limit", // Anthropic: "input length and `max_tokens` exceed context limit"
}

// Overflow says whether a refusal with this status and message means the
// request did not fit the model's context window, which herd can remedy
// by leaving older turns out (agent.ErrContextLength).
func Overflow(status int, msg string) bool {
	if status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge && status != http.StatusUnprocessableEntity {
		return false
	}
	msg = strings.ToLower(msg)
	for _, p := range overflowPhrases {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// Overflowed marks a provider error as agent.ErrContextLength: Errorf's
// format ends in %w with it as the argument. It adds no text.
var Overflowed error = overflowed{}

type overflowed struct{}

func (overflowed) Error() string        { return "" }
func (overflowed) Is(target error) bool { return target == agent.ErrContextLength }

// ToolArgs turns the arguments text a model streamed into ToolCall.Args,
// which is always valid JSON. A JSON object is kept as is; empty arguments
// become {}; anything else (invalid JSON, e.g. cut short by a token limit,
// or a non-object) becomes a JSON string holding the model's text
// verbatim. Such Args fail to decode as an object, so the tool reports bad
// arguments to the model, and the text can be read back with
// json.Unmarshal into a string.
func ToolArgs(text string) json.RawMessage {
	trimmed := strings.TrimSpace(text)
	if trimmed == "" {
		return json.RawMessage(`{}`)
	}
	if trimmed[0] == '{' && json.Valid([]byte(trimmed)) {
		return json.RawMessage(trimmed)
	}
	quoted, _ := json.Marshal(text) // a string always marshals
	return quoted
}
