package openai

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"herd/agent"
)

const (
	defaultBaseURL = "https://api.openai.com/v1"
	// defaultTimeout applies when timeout_seconds is unset, so a
	// server that stops answering cannot hold a run forever.
	defaultTimeout    = 5 * time.Minute
	defaultMaxRetries = 2
	// defaultMaxRetryDelay caps the backoff between retries and is
	// the longest Retry-After honoured; a server asking for a longer wait
	// gets its error returned at once rather than a stalled run.
	defaultMaxRetryDelay = 30 * time.Second
	// maxProviderMessage bounds how much of an error body goes into an
	// error, since a proxy may answer with a whole HTML page.
	maxProviderMessage = 500
)

// errCallTimedOut is the cause of the per-call deadline, so a timeout can
// be told from the caller's own cancellation or deadline.
var errCallTimedOut = errors.New("call timed out")

// envKey matches an api_key that names an environment variable.
var envKey = regexp.MustCompile(`^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$`)

// Provider is an agent.Provider for any OpenAI-compatible chat-completions
// endpoint (OpenAI, vLLM, Ollama, LiteLLM, DeepSeek, …). Every call streams.
//
// Tool-call arguments: Args is always valid JSON. A JSON object the model
// sent is kept as is; empty arguments become {}; anything else (invalid
// JSON, e.g. cut short by a token limit, or a non-object) becomes a JSON
// string holding the model's text verbatim. Such Args fail to decode as an
// object, so the tool reports bad arguments to the model; the caller can
// read the text back with json.Unmarshal into a string; and when the call
// is sent back in a later request the model sees exactly what it wrote.
type Provider struct {
	name        string // the configured model name, for error text and logs
	model       string // the provider's model id when an agent.Request names none
	client      oai.Client
	streamUsage bool
	timeout     time.Duration
	apiKey      string // kept only to scrub it from error text
	log         *slog.Logger
}

// Option tunes a Provider beyond its agent.ModelConfig.
type Option func(*options)

type options struct {
	httpClient    *http.Client
	maxRetryDelay time.Duration
	log           *slog.Logger
}

// WithHTTPClient sets the HTTP client the provider sends requests
// with (default http.DefaultClient).
func WithHTTPClient(c *http.Client) Option {
	return func(o *options) { o.httpClient = c }
}

// WithMaxRetryDelay caps the wait between retries: the exponential
// backoff (which starts at half a second) and the longest Retry-After
// honoured. Tests make it small to stay fast. d must be positive.
func WithMaxRetryDelay(d time.Duration) Option {
	return func(o *options) { o.maxRetryDelay = d }
}

// WithLogger sets where the provider logs (default slog.Default()).
// It logs retries and, at debug level, each completed call with the
// provider's completion id.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// New builds the provider for one configured model. An api_key of
// the form $VAR or ${VAR} is read from the environment here, once; the
// variable must be set. TimeoutSeconds limits each call as a whole,
// retries and streaming included (default 5 minutes). MaxRetries bounds
// the retries on 408, 409, 429, 5xx and connection failures (default 2);
// they happen only before a response starts, never once text has been
// streamed.
func New(cfg agent.ModelConfig, opts ...Option) (*Provider, error) {
	o := options{maxRetryDelay: defaultMaxRetryDelay, log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxRetryDelay <= 0 {
		return nil, fmt.Errorf("openai model %q: max retry delay must be positive, got %s", cfg.Name, o.maxRetryDelay)
	}

	key := cfg.APIKey
	if m := envKey.FindStringSubmatch(key); m != nil {
		name := cmp.Or(m[1], m[2])
		key = os.Getenv(name)
		if key == "" {
			return nil, fmt.Errorf("openai model %q: api_key: environment variable %s is not set", cfg.Name, name)
		}
	}

	base := cmp.Or(cfg.BaseURL, defaultBaseURL)
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai model %q: base_url %q is not an http(s) URL", cfg.Name, base)
	}

	retries := defaultMaxRetries
	if cfg.MaxRetries != nil {
		retries = *cfg.MaxRetries
	}
	if retries < 0 {
		return nil, fmt.Errorf("openai model %q: max_retries must not be negative, got %d", cfg.Name, retries)
	}

	timeout := defaultTimeout
	if cfg.TimeoutSeconds > 0 {
		timeout = time.Duration(cfg.TimeoutSeconds) * time.Second
	}

	// The client is built from explicit options only: oai.NewClient
	// would also read OPENAI_API_KEY, OPENAI_BASE_URL and friends from the
	// environment, and could send an ambient key to a third-party base_url.
	clientOpts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithAPIKey(key),
		option.WithMaxRetries(retries),
		option.WithMaxRetryDelay(o.maxRetryDelay),
	}
	if o.httpClient != nil {
		clientOpts = append(clientOpts, option.WithHTTPClient(o.httpClient))
	}

	return &Provider{
		name:        cfg.Name,
		model:       cmp.Or(cfg.Model, cfg.Name),
		client:      oai.Client{Options: clientOpts},
		streamUsage: cfg.StreamUsage == nil || *cfg.StreamUsage,
		timeout:     timeout,
		apiKey:      key,
		log:         o.log,
	}, nil
}

// Complete streams one chat completion. Errors wrap ErrProvider; a
// cancelled ctx also yields an error wrapping context.Canceled.
func (p *Provider) Complete(ctx context.Context, req agent.Request, onDelta func(text string)) (agent.Response, error) {
	callID := uuid.NewString()
	model := cmp.Or(req.Model, p.model)
	params, err := chatParams(model, req, p.streamUsage)
	if err != nil {
		return agent.Response{}, p.errorf("build request: %w", err)
	}

	ctx, cancel := context.WithTimeoutCause(ctx, p.timeout, errCallTimedOut)
	defer cancel()

	attempts := 0
	res, err := p.openStream(ctx, params, &attempts)
	if err != nil {
		return agent.Response{}, err
	}
	acc, err := p.readStream(ctx, res, onDelta)
	if err != nil {
		return agent.Response{}, err
	}

	resp := acc.response(callID, model)
	p.log.Debug("openai: call completed", "model", p.name, "call_id", callID, "completion_id", acc.completionID,
		"reported_model", resp.Model, "finish_reason", acc.finishReason, "tool_calls", len(resp.ToolCalls), "attempts", attempts)
	return resp, nil
}

// openStream sends the request and returns the response carrying the event
// stream, counting the HTTP attempts into *attempts.
func (p *Provider) openStream(ctx context.Context, params oai.ChatCompletionNewParams, attempts *int) (*http.Response, error) {
	// The stream is opened by hand rather than with NewStreaming so that a
	// stream that ends without [DONE] can be told from a complete one: the
	// SDK's stream reports both as a clean end.
	var res *http.Response
	err := p.client.Post(ctx, "chat/completions", params, &res, option.WithJSONSet("stream", true), p.countAttempts(attempts))
	if err != nil {
		return nil, p.requestError(ctx, err, res, *attempts)
	}
	// Some servers and proxies ignore stream: true, or answer 200 with an
	// error object; the SSE decoder would see neither as anything but an
	// empty stream.
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt == "application/json" {
		body, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		_ = res.Body.Close()
		if err != nil {
			return nil, p.streamError(ctx, err, 0)
		}
		return nil, p.errorf("expected an event stream, got a JSON body: %s", providerMessage(body))
	}
	return res, nil
}

// countAttempts counts the HTTP attempts of one call into *n and logs each
// retry, since the SDK retries out of sight.
func (p *Provider) countAttempts(n *int) option.RequestOption {
	lastStatus := 0
	return option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		*n++
		if *n > 1 {
			p.log.Info("openai: retrying", "model", p.name, "attempt", *n, "previous_status", lastStatus)
		}
		res, err := next(r)
		lastStatus = 0
		if res != nil {
			lastStatus = res.StatusCode
		}
		return res, err
	})
}

// readStream accumulates the stream's chunks, passing text to onDelta as it
// arrives, and fails a stream that ends without a finish_reason and [DONE].
func (p *Provider) readStream(ctx context.Context, res *http.Response, onDelta func(string)) (*streamAccumulator, error) {
	dec := &doneDecoder{Decoder: ssestream.NewDecoder(res)}
	stream := ssestream.NewStream[oai.ChatCompletionChunk](dec, nil)
	defer stream.Close()

	acc := &streamAccumulator{byIndex: map[int64]int{}}
	for stream.Next() {
		// Chunks already buffered when ctx ends are dropped, so no text
		// reaches onDelta after the caller has stopped the call.
		if ctx.Err() != nil {
			return nil, p.contextError(ctx)
		}
		acc.add(stream.Current(), onDelta)
	}
	if err := stream.Err(); err != nil {
		return nil, p.streamError(ctx, err, acc.chunks)
	}
	if !dec.done {
		return nil, p.errorf("stream cut short: the connection closed before [DONE], after %d chunks", acc.chunks)
	}
	if acc.finishReason == "" {
		return nil, p.errorf("stream cut short: [DONE] arrived without a finish_reason, after %d chunks", acc.chunks)
	}
	return acc, nil
}

// chatParams maps a Request onto the chat-completions request body.
func chatParams(model string, req agent.Request, streamUsage bool) (oai.ChatCompletionNewParams, error) {
	params := oai.ChatCompletionNewParams{Model: shared.ChatModel(model)}
	for i, m := range req.Messages {
		switch m.Type {
		case agent.TypeSystem:
			params.Messages = append(params.Messages, oai.SystemMessage(m.Content))
		case agent.TypeHuman:
			params.Messages = append(params.Messages, oai.UserMessage(m.Content))
		case agent.TypeAI:
			params.Messages = append(params.Messages, assistantMessage(m))
		case agent.TypeTool:
			params.Messages = append(params.Messages, oai.ToolMessage(m.Content, m.ToolCallID))
		default:
			return params, fmt.Errorf("message %d: unknown type %q", i, m.Type)
		}
	}
	for _, t := range req.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fn.Description = oai.String(t.Description)
		}
		if len(t.Parameters) > 0 {
			if err := json.Unmarshal(t.Parameters, &fn.Parameters); err != nil {
				return params, fmt.Errorf("tool %q: parameters are not a JSON object: %w", t.Name, err)
			}
		}
		params.Tools = append(params.Tools, oai.ChatCompletionFunctionTool(fn))
	}
	if streamUsage {
		params.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
	}
	return params, nil
}

func assistantMessage(m agent.Message) oai.ChatCompletionMessageParamUnion {
	var a oai.ChatCompletionAssistantMessageParam
	// Content may be omitted only when there are tool calls; an empty
	// string is still sent otherwise, since some servers require it.
	if m.Content != "" || len(m.ToolCalls) == 0 {
		a.Content.OfString = oai.String(m.Content)
	}
	for _, tc := range m.ToolCalls {
		a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
				ID: tc.ID,
				Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{
					Name:      tc.Name,
					Arguments: argsText(tc.Args),
				},
			},
		})
	}
	return oai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}

// toolArgs turns the arguments text a model streamed into ToolCall.Args
// (see Provider for the rules).
func toolArgs(text string) json.RawMessage {
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

// argsText is toolArgs reversed, for sending a call back to the model.
func argsText(args json.RawMessage) string {
	if len(bytes.TrimSpace(args)) == 0 {
		return "{}"
	}
	var text string
	if json.Unmarshal(args, &text) == nil {
		return text
	}
	return string(args)
}

// doneDecoder notes whether the stream reached its [DONE] sentinel.
type doneDecoder struct {
	ssestream.Decoder
	done bool
}

func (d *doneDecoder) Next() bool {
	if !d.Decoder.Next() {
		return false
	}
	if bytes.HasPrefix(d.Event().Data, []byte("[DONE]")) {
		d.done = true
	}
	return true
}

// streamAccumulator builds a Response from chunks. Only choice 0 counts:
// herd never asks for more than one.
type streamAccumulator struct {
	chunks       int
	text         strings.Builder
	calls        []*partialCall
	byIndex      map[int64]int // tool-call index → position in calls
	usage        *agent.Usage
	model        string
	completionID string
	finishReason string
}

type partialCall struct {
	id, name string
	args     strings.Builder
}

func (a *streamAccumulator) add(c oai.ChatCompletionChunk, onDelta func(string)) {
	a.chunks++
	if c.Model != "" {
		a.model = c.Model
	}
	if c.ID != "" {
		a.completionID = c.ID
	}
	// Some servers send usage on every chunk; the last one is the total.
	if c.JSON.Usage.Valid() {
		u := agent.Usage{
			InputTokens:  c.Usage.PromptTokens,
			OutputTokens: c.Usage.CompletionTokens,
			TotalTokens:  c.Usage.TotalTokens,
		}
		if cached := c.Usage.PromptTokensDetails.CachedTokens; cached > 0 {
			u.CacheReadTokens = cached
		}
		a.usage = &u
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		if ch.Delta.Content != "" {
			a.text.WriteString(ch.Delta.Content)
			if onDelta != nil {
				onDelta(ch.Delta.Content)
			}
		}
		for _, d := range ch.Delta.ToolCalls {
			a.addToolDelta(d)
		}
		if ch.FinishReason != "" {
			a.finishReason = ch.FinishReason
		}
	}
}

// addToolDelta merges one tool-call fragment. Fragments are keyed by their
// index; a fragment bringing a new id under an index already in use starts
// a new call, for servers that number every call 0.
func (a *streamAccumulator) addToolDelta(d oai.ChatCompletionChunkChoiceDeltaToolCall) {
	pos, ok := a.byIndex[d.Index]
	if !ok || (d.ID != "" && a.calls[pos].id != "" && d.ID != a.calls[pos].id) {
		a.calls = append(a.calls, &partialCall{})
		pos = len(a.calls) - 1
		a.byIndex[d.Index] = pos
	}
	call := a.calls[pos]
	if call.id == "" {
		call.id = d.ID
	}
	// Names arrive whole in the first fragment; some servers repeat them.
	if call.name == "" {
		call.name = d.Function.Name
	}
	call.args.WriteString(d.Function.Arguments)
}

func (a *streamAccumulator) response(callID, requestedModel string) agent.Response {
	resp := agent.Response{
		CallID: callID,
		Text:   a.text.String(),
		Usage:  a.usage,
		Model:  cmp.Or(a.model, requestedModel),
	}
	for _, c := range a.calls {
		// A call id becomes a task_id and pairs the tool result with its
		// call, so a server that sends none gets one made up.
		id := cmp.Or(c.id, "call_"+uuid.NewString())
		resp.ToolCalls = append(resp.ToolCalls, agent.ToolCall{ID: id, Name: c.name, Args: toolArgs(c.args.String())})
	}
	return resp
}

// requestError explains a request that got no stream: a status with the
// provider's own message, or the transport failure.
func (p *Provider) requestError(ctx context.Context, err error, res *http.Response, attempts int) error {
	if ctx.Err() != nil {
		return p.contextError(ctx)
	}
	tries := ""
	if attempts > 1 {
		tries = fmt.Sprintf(" (after %d attempts)", attempts)
	}
	// The SDK puts the error body back on res; it is already in memory.
	if res != nil && res.StatusCode >= 400 {
		var body []byte
		if res.Body != nil {
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(res.Body)
			body = buf.Bytes()
		}
		return p.errorf("HTTP %d %s: %s%s", res.StatusCode, http.StatusText(res.StatusCode), providerMessage(body), tries)
	}
	return p.errorf("request failed%s: %w", tries, err)
}

// streamError explains a stream that failed part-way.
func (p *Provider) streamError(ctx context.Context, err error, chunks int) error {
	if ctx.Err() != nil {
		return p.contextError(ctx)
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		return p.errorf("error event in stream after %d chunks: %s", chunks, providerMessage(streamErr.Event.Data))
	}
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) {
		return p.errorf("malformed stream chunk after %d chunks: %w", chunks, err)
	}
	return p.errorf("stream cut short after %d chunks: %w", chunks, err)
}

// contextError explains a call ended by its context: the per-call timeout,
// or the caller's cancellation or deadline (wrapped for errors.Is).
func (p *Provider) contextError(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), errCallTimedOut) {
		return p.errorf("timed out after %s (timeout_seconds): %w", p.timeout, context.DeadlineExceeded)
	}
	return p.errorf("call stopped: %w", ctx.Err())
}

// errorf builds a provider error: it wraps ErrProvider, names the model and
// never carries the API key.
func (p *Provider) errorf(format string, args ...any) error {
	err := fmt.Errorf("%w: %s: "+format, append([]any{agent.ErrProvider, p.name}, args...)...)
	if p.apiKey != "" && strings.Contains(err.Error(), p.apiKey) {
		return &scrubbedError{text: strings.ReplaceAll(err.Error(), p.apiKey, "[redacted]"), err: err}
	}
	return err
}

// scrubbedError replaces an error's text while keeping its chain for
// errors.Is and errors.As.
type scrubbedError struct {
	text string
	err  error
}

func (e *scrubbedError) Error() string { return e.text }
func (e *scrubbedError) Unwrap() error { return e.err }

// providerMessage extracts the human part of an error body, whichever of
// the shapes OpenAI-compatible servers use it has: {"error": {"message"}},
// {"error": "..."}, {"message": "..."}, {"detail": ...} or plain text.
func providerMessage(body []byte) string {
	var shape struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	msg := ""
	if json.Unmarshal(body, &shape) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		var text string
		switch {
		case json.Unmarshal(shape.Error, &nested) == nil && nested.Message != "":
			msg = nested.Message
		case json.Unmarshal(shape.Error, &text) == nil && text != "":
			msg = text
		case shape.Message != "":
			msg = shape.Message
		case json.Unmarshal(shape.Detail, &text) == nil && text != "":
			msg = text
		case len(shape.Detail) > 0:
			msg = string(shape.Detail)
		}
	}
	if msg == "" {
		msg = strings.Join(strings.Fields(string(body)), " ")
	}
	if msg == "" {
		return "(empty error body)"
	}
	if len(msg) > maxProviderMessage {
		msg = strings.ToValidUTF8(msg[:maxProviderMessage], "") + "…"
	}
	return msg
}
