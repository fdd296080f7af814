package anthropic

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/uuid"

	"herd/agent"
)

const (
	defaultBaseURL = "https://api.anthropic.com"
	// defaultTimeout applies when timeout_seconds is unset, so a server
	// that stops answering cannot hold a run forever.
	defaultTimeout    = 5 * time.Minute
	defaultMaxRetries = 2
	// DefaultMaxTokens is max_tokens when max_output_tokens is unset: the
	// Messages API requires it on every request.
	DefaultMaxTokens = 4096
	// defaultMaxRetryDelay is the longest retry-after honoured; a server
	// asking for a longer wait gets its error returned at once rather than
	// a stalled run.
	defaultMaxRetryDelay = 30 * time.Second
	// maxProviderMessage bounds how much of an error body goes into an
	// error, since a proxy may answer with a whole HTML page.
	maxProviderMessage = 500
	// minRedactLen is the shortest key scrubbed from error text: a
	// placeholder key such as "x" would otherwise mangle every message.
	minRedactLen = 8
)

// errCallTimedOut is the cause of the per-call deadline, so a timeout can
// be told from the caller's own cancellation or deadline.
var errCallTimedOut = errors.New("call timed out")

// envKey matches an api_key that names an environment variable.
var envKey = regexp.MustCompile(`^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$`)

// Provider is an agent.Provider for Anthropic's Messages API. Every call
// streams. The system prompt and the tool definitions carry cache_control
// breakpoints, so the many turns of one lead reuse the cached prefix.
//
// Usage: InputTokens counts the whole prompt, cached or not (Anthropic's
// input_tokens plus cache_read_input_tokens plus
// cache_creation_input_tokens), so figures compare with OpenAI's
// prompt_tokens; CacheReadTokens is set only when the provider reported
// a read.
type Provider struct {
	name      string // the configured model name, for error text and logs
	model     string // the provider's model id when an agent.Request names none
	messages  sdk.MessageService
	maxTokens int64
	timeout   time.Duration
	maxDelay  time.Duration // the longest retry-after honoured
	apiKey    string        // kept only to scrub it from error text
	log       *slog.Logger
}

// Option tunes a Provider beyond its agent.ModelConfig.
type Option func(*options)

type options struct {
	httpClient    *http.Client
	maxRetryDelay time.Duration
	log           *slog.Logger
}

// WithMaxRetryDelay sets the longest retry-after the provider waits for
// (default 30 seconds); a longer one fails the call at once. d must be
// positive.
func WithMaxRetryDelay(d time.Duration) Option {
	return func(o *options) { o.maxRetryDelay = d }
}

// WithHTTPClient sets the HTTP client the provider sends requests with
// (default http.DefaultClient).
func WithHTTPClient(c *http.Client) Option {
	return func(o *options) { o.httpClient = c }
}

// WithLogger sets where the provider logs (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// New builds the provider for one configured model. An api_key of the form
// $VAR or ${VAR} is read from the environment here, once; the variable must
// be set. TimeoutSeconds limits each call as a whole, retries and streaming
// included (default 5 minutes). MaxRetries bounds the SDK's retries on 408,
// 409, 429, 5xx (529 overloaded included) and connection failures (default
// 2), with exponential backoff or the server's Retry-After; they happen
// only before a response starts, never once text has been streamed.
func New(cfg agent.ModelConfig, opts ...Option) (*Provider, error) {
	o := options{httpClient: http.DefaultClient, maxRetryDelay: defaultMaxRetryDelay, log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxRetryDelay <= 0 {
		return nil, fmt.Errorf("anthropic model %q: max retry delay must be positive, got %s", cfg.Name, o.maxRetryDelay)
	}

	key := cfg.APIKey
	if m := envKey.FindStringSubmatch(key); m != nil {
		name := cmp.Or(m[1], m[2])
		key = os.Getenv(name)
		if key == "" {
			return nil, fmt.Errorf("anthropic model %q: api_key: environment variable %s is not set", cfg.Name, name)
		}
	}
	if key == "" {
		return nil, fmt.Errorf("anthropic model %q: api_key is required", cfg.Name)
	}

	base := cmp.Or(cfg.BaseURL, defaultBaseURL)
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("anthropic model %q: base_url %q is not an http(s) URL", cfg.Name, base)
	}

	retries := defaultMaxRetries
	if cfg.MaxRetries != nil {
		retries = *cfg.MaxRetries
	}
	if retries < 0 {
		return nil, fmt.Errorf("anthropic model %q: max_retries must not be negative, got %d", cfg.Name, retries)
	}
	if cfg.MaxOutputTokens < 0 {
		return nil, fmt.Errorf("anthropic model %q: max_output_tokens must not be negative, got %d", cfg.Name, cfg.MaxOutputTokens)
	}

	timeout := defaultTimeout
	if cfg.TimeoutSeconds > 0 {
		timeout = time.Duration(cfg.TimeoutSeconds) * time.Second
	}

	// WithoutEnvironmentDefaults: the SDK would otherwise read
	// ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, profiles and friends, and
	// could send an ambient key to a configured third-party base_url.
	client := sdk.NewClient(
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		option.WithAPIKey(key),
		option.WithMaxRetries(retries),
		option.WithHTTPClient(o.httpClient),
	)
	return &Provider{
		name:      cfg.Name,
		model:     cmp.Or(cfg.Model, cfg.Name),
		messages:  client.Messages,
		maxTokens: int64(cmp.Or(cfg.MaxOutputTokens, DefaultMaxTokens)),
		timeout:   timeout,
		maxDelay:  o.maxRetryDelay,
		apiKey:    key,
		log:       o.log,
	}, nil
}

// Complete streams one message. Errors wrap agent.ErrProvider; a cancelled
// ctx also yields an error wrapping context.Canceled.
func (p *Provider) Complete(ctx context.Context, req agent.Request, onDelta func(text string)) (agent.Response, error) {
	callID := uuid.NewString()
	model := cmp.Or(req.Model, p.model)
	params, err := messageParams(model, p.maxTokens, req)
	if err != nil {
		return agent.Response{}, p.errorf("build request: %w", err)
	}

	ctx, cancel := context.WithTimeoutCause(ctx, p.timeout, errCallTimedOut)
	defer cancel()

	attempts := 0
	stream := p.messages.NewStreaming(ctx, params, p.countAttempts(&attempts))
	defer stream.Close()
	acc := newAccumulator()
	for stream.Next() {
		// Events already buffered when ctx ends are dropped, so no text
		// reaches onDelta after the caller has stopped the call.
		if ctx.Err() != nil {
			return agent.Response{}, p.contextError(ctx)
		}
		acc.add(stream.Current(), onDelta)
	}
	if err := stream.Err(); err != nil {
		return agent.Response{}, p.streamError(ctx, err, acc.events, attempts)
	}
	if ctx.Err() != nil {
		return agent.Response{}, p.contextError(ctx)
	}
	if !acc.stopped {
		return agent.Response{}, p.errorf("stream cut short: the connection closed before message_stop, after %d events", acc.events)
	}

	resp := acc.response(callID, model)
	if acc.stopReason == "max_tokens" {
		// The answer (or a tool call's input) is cut; the operator's fix
		// is max_output_tokens.
		p.log.Warn("anthropic: answer cut at max_tokens", "model", p.name, "call_id", callID, "max_output_tokens", p.maxTokens)
	}
	p.log.Debug("anthropic: call completed", "model", p.name, "call_id", callID, "message_id", acc.messageID,
		"reported_model", resp.Model, "stop_reason", acc.stopReason, "tool_calls", len(resp.ToolCalls),
		"cache_creation_tokens", acc.usage.CacheCreationInputTokens, "cache_read_tokens", acc.usage.CacheReadInputTokens,
		"attempts", attempts)
	return resp, nil
}

// countAttempts counts the HTTP attempts of one call into *n and logs each
// retry, since the SDK retries out of sight.
func (p *Provider) countAttempts(n *int) option.RequestOption {
	lastStatus := 0
	return option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		*n++
		if *n > 1 {
			p.log.Info("anthropic: retrying", "model", p.name, "attempt", *n, "previous_status", lastStatus)
		}
		res, err := next(r)
		lastStatus = 0
		if res != nil {
			lastStatus = res.StatusCode
			if d, ok := retryAfter(res.Header); ok && d > p.maxDelay {
				// The SDK would wait as long as asked; x-should-retry is
				// its documented switch to return the error instead.
				res.Header.Set("x-should-retry", "false")
				p.log.Info("anthropic: not retrying: retry-after exceeds the longest wait", "model", p.name, "retry_after", d, "max", p.maxDelay)
			}
		}
		return res, err
	})
}

// retryAfter reads the wait a response asks for, as the SDK does:
// retry-after-ms, else retry-after in seconds or as an HTTP date.
func retryAfter(h http.Header) (time.Duration, bool) {
	if v, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil {
		return time.Duration(v * float64(time.Millisecond)), true
	}
	v := h.Get("Retry-After")
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t), true
	}
	return 0, false
}

// streamError explains a call that failed: before the stream (a status
// with the provider's own message, or the transport failure) or inside it
// (an error event, a broken connection, a malformed event).
func (p *Provider) streamError(ctx context.Context, err error, events, attempts int) error {
	if ctx.Err() != nil {
		return p.contextError(ctx)
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		msg := providerMessage(apiErr.Message, apiErr.RawJSON())
		if events > 0 || apiErr.StatusCode == http.StatusOK {
			return p.errorf("error event in stream after %d events: %s", events, msg)
		}
		tries := ""
		if attempts > 1 {
			tries = fmt.Sprintf(" (after %d attempts)", attempts)
		}
		return p.errorf("HTTP %d %s: %s%s", apiErr.StatusCode, statusText(apiErr.StatusCode), msg, tries)
	}
	if events == 0 && attempts > 0 && !isDecodeError(err) {
		tries := ""
		if attempts > 1 {
			tries = fmt.Sprintf(" (after %d attempts)", attempts)
		}
		return p.errorf("request failed%s: %w", tries, err)
	}
	if isDecodeError(err) {
		return p.errorf("malformed stream event after %d events: %w", events, err)
	}
	return p.errorf("stream cut short after %d events: %w", events, err)
}

func isDecodeError(err error) bool {
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	return errors.As(err, &syntaxErr) || errors.As(err, &typeErr)
}

// statusText names a status, Anthropic's 529 included.
func statusText(code int) string {
	if code == 529 {
		return "Overloaded"
	}
	return http.StatusText(code)
}

// contextError explains a call ended by its context: the per-call timeout,
// or the caller's cancellation or deadline (wrapped for errors.Is).
func (p *Provider) contextError(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), errCallTimedOut) {
		return p.errorf("timed out after %s (timeout_seconds): %w", p.timeout, context.DeadlineExceeded)
	}
	return p.errorf("call stopped: %w", ctx.Err())
}

// errorf builds a provider error: it wraps agent.ErrProvider, names the
// model and never carries the API key. Keys shorter than minRedactLen are
// placeholders (x, EMPTY) and are left alone, and a key is matched only as
// a whole token, so scrubbing cannot mangle ordinary words.
func (p *Provider) errorf(format string, args ...any) error {
	err := fmt.Errorf("%w: %s: "+format, append([]any{agent.ErrProvider, p.name}, args...)...)
	if text, ok := redact(err.Error(), p.apiKey); ok {
		return &scrubbedError{text: text, err: err}
	}
	return err
}

// redact replaces each whole-token occurrence of key in text with
// [redacted], reporting whether there was one.
func redact(text, key string) (string, bool) {
	if len(key) < minRedactLen {
		return text, false
	}
	var b strings.Builder
	found := false
	for {
		i := strings.Index(text, key)
		if i < 0 {
			break
		}
		end := i + len(key)
		if (i > 0 && isKeyByte(text[i-1])) || (end < len(text) && isKeyByte(text[end])) {
			b.WriteString(text[:i+1]) // part of a longer token: keep, look on
			text = text[i+1:]
			continue
		}
		b.WriteString(text[:i])
		b.WriteString("[redacted]")
		text = text[end:]
		found = true
	}
	b.WriteString(text)
	return b.String(), found
}

// isKeyByte reports whether c can continue an API key's token.
func isKeyByte(c byte) bool {
	return c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// scrubbedError replaces an error's text while keeping its chain for
// errors.Is and errors.As.
type scrubbedError struct {
	text string
	err  error
}

func (e *scrubbedError) Error() string { return e.text }
func (e *scrubbedError) Unwrap() error { return e.err }

// providerMessage is the human part of an error: Anthropic's
// error.message, else the raw body (a proxy's plain text or HTML), bounded.
func providerMessage(message, raw string) string {
	msg := message
	if msg == "" {
		msg = strings.Join(strings.Fields(raw), " ")
	}
	if msg == "" {
		return "(empty error body)"
	}
	if len(msg) > maxProviderMessage {
		msg = strings.ToValidUTF8(msg[:maxProviderMessage], "") + "…"
	}
	return msg
}
