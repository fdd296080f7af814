package anthropic

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/google/uuid"

	"herd/agent"
	"herd/agent/internal/provider"
)

const (
	defaultBaseURL = "https://api.anthropic.com"
	// DefaultMaxTokens is max_tokens when max_output_tokens is unset: the
	// Messages API requires it on every request.
	DefaultMaxTokens = 4096
	// MinThinkingBudget is the API's smallest thinking budget.
	MinThinkingBudget = 1024
	// defaultMaxRetryDelay is the longest retry-after honoured; a server
	// asking for a longer wait gets its error returned at once rather than
	// a stalled run.
	defaultMaxRetryDelay = 30 * time.Second
)

// Provider is an agent.Provider for Anthropic's Messages API. Every call
// streams. The system prompt and the tool definitions carry cache_control
// breakpoints, so the many turns of one lead reuse the cached prefix.
//
// Usage: InputTokens counts the whole prompt, cached or not (Anthropic's
// input_tokens plus cache_read_input_tokens plus
// cache_creation_input_tokens), so figures compare with OpenAI's
// prompt_tokens; CacheReadTokens is set only when the provider reported
// a read.
//
// Extended thinking (thinking_budget_tokens): thinking blocks stream to
// Request.OnReasoning and make Response.Reasoning (a redacted block shows
// nothing); Response.Thinking keeps them signed, and an AI message's
// Thinking goes back at the head of its turn, as the API requires while a
// tool-use turn continues.
type Provider struct {
	ep        provider.Endpoint
	messages  sdk.MessageService
	maxTokens int64
	thinking  int64         // the thinking budget; 0: off
	maxDelay  time.Duration // the longest retry-after honoured
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

	// A $VAR key is never empty once read (NewEndpoint insists), so the
	// configured text tells whether there is a key at all.
	if cfg.APIKey == "" {
		return nil, fmt.Errorf("anthropic model %q: api_key is required", cfg.Name)
	}
	ep, err := provider.NewEndpoint("anthropic", cfg, defaultBaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.MaxOutputTokens < 0 {
		return nil, fmt.Errorf("anthropic model %q: max_output_tokens must not be negative, got %d", cfg.Name, cfg.MaxOutputTokens)
	}
	maxTokens := cmp.Or(cfg.MaxOutputTokens, DefaultMaxTokens)
	if b := cfg.ThinkingBudgetTokens; b != 0 && (b < MinThinkingBudget || b >= maxTokens) {
		return nil, fmt.Errorf("anthropic model %q: thinking_budget_tokens must be 0 (off) or from %d to below max_output_tokens (%d), got %d",
			cfg.Name, MinThinkingBudget, maxTokens, b)
	}

	// WithoutEnvironmentDefaults: the SDK would otherwise read
	// ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, profiles and friends, and
	// could send an ambient key to a configured third-party base_url.
	client := sdk.NewClient(
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(ep.BaseURL),
		option.WithAPIKey(ep.APIKey),
		option.WithMaxRetries(ep.MaxRetries),
		option.WithHTTPClient(o.httpClient),
	)
	return &Provider{
		ep:        ep,
		messages:  client.Messages,
		maxTokens: int64(maxTokens),
		thinking:  int64(cfg.ThinkingBudgetTokens),
		maxDelay:  o.maxRetryDelay,
		log:       o.log,
	}, nil
}

// Complete streams one message. Errors wrap agent.ErrProvider; a cancelled
// ctx also yields an error wrapping context.Canceled.
func (p *Provider) Complete(ctx context.Context, req agent.Request, onDelta func(text string)) (agent.Response, error) {
	callID := uuid.NewString()
	model := cmp.Or(req.Model, p.ep.Model)
	maxTokens, thinking := p.maxTokens, p.thinking
	if n := int64(req.MaxTokens); n > 0 && n < maxTokens {
		// The API wants the thinking budget below max_tokens; a short
		// call does not think.
		maxTokens, thinking = n, 0
	}
	params, err := messageParams(model, maxTokens, thinking, req)
	if err != nil {
		return agent.Response{}, p.ep.Errorf("build request: %w", err)
	}

	ctx, cancel := p.ep.WithTimeout(ctx)
	defer cancel()

	attempts := 0
	stream := p.messages.NewStreaming(ctx, params, p.countAttempts(&attempts))
	defer stream.Close()
	acc := newAccumulator()
	for stream.Next() {
		// Events already buffered when ctx ends are dropped, so no text
		// reaches onDelta after the caller has stopped the call.
		if ctx.Err() != nil {
			return agent.Response{}, p.ep.ContextError(ctx)
		}
		acc.add(stream.Current(), onDelta, req.OnReasoning)
	}
	if err := stream.Err(); err != nil {
		return agent.Response{}, p.streamError(ctx, err, acc.events, attempts)
	}
	if ctx.Err() != nil {
		return agent.Response{}, p.ep.ContextError(ctx)
	}
	if !acc.stopped {
		return agent.Response{}, p.ep.Errorf("stream cut short: the connection closed before message_stop, after %d events", acc.events)
	}

	resp := acc.response(callID, model)
	resp.Cut = acc.stopReason == "max_tokens"
	if resp.Cut && maxTokens == p.maxTokens {
		// The answer (or a tool call's input) is cut; the operator's fix
		// is max_output_tokens. A call's own smaller cap is its caller's.
		p.log.Warn("anthropic: answer cut at max_tokens", "model", p.ep.Name, "call_id", callID, "max_output_tokens", p.maxTokens)
	}
	p.log.Debug("anthropic: call completed", "model", p.ep.Name, "call_id", callID, "message_id", acc.messageID,
		"reported_model", resp.Model, "stop_reason", acc.stopReason, "tool_calls", len(resp.ToolCalls), "thinking_blocks", len(resp.Thinking),
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
			p.log.Info("anthropic: retrying", "model", p.ep.Name, "attempt", *n, "previous_status", lastStatus)
		}
		res, err := next(r)
		lastStatus = 0
		if res != nil {
			lastStatus = res.StatusCode
			if d, ok := retryAfter(res.Header); ok && d > p.maxDelay {
				// The SDK would wait as long as asked; x-should-retry is
				// its documented switch to return the error instead.
				res.Header.Set("x-should-retry", "false")
				p.log.Info("anthropic: not retrying: retry-after exceeds the longest wait", "model", p.ep.Name, "retry_after", d, "max", p.maxDelay)
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
		return p.ep.ContextError(ctx)
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		msg := provider.Message(apiErr.Message, apiErr.RawJSON())
		if events > 0 || apiErr.StatusCode == http.StatusOK {
			return p.ep.Errorf("error event in stream after %d events: %s", events, msg)
		}
		if provider.Overflow(apiErr.StatusCode, msg) {
			return p.ep.Errorf("HTTP %d %s: %s%s%w", apiErr.StatusCode, statusText(apiErr.StatusCode), msg, provider.AfterAttempts(attempts), provider.Overflowed)
		}
		var after time.Duration
		if apiErr.Response != nil {
			after, _ = retryAfter(apiErr.Response.Header)
		}
		return p.ep.StatusErrorf(apiErr.StatusCode, after, msg, "HTTP %d %s: %s%s", apiErr.StatusCode, statusText(apiErr.StatusCode), msg, provider.AfterAttempts(attempts))
	}
	if events == 0 && attempts > 0 && !provider.IsDecodeError(err) {
		return p.ep.Errorf("request failed%s: %w", provider.AfterAttempts(attempts), err)
	}
	if provider.IsDecodeError(err) {
		return p.ep.Errorf("malformed stream event after %d events: %w", events, err)
	}
	return p.ep.Errorf("stream cut short after %d events: %w", events, err)
}

// statusText names a status, Anthropic's 529 included.
func statusText(code int) string {
	if code == 529 {
		return "Overloaded"
	}
	return http.StatusText(code)
}
