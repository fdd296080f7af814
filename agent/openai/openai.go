package openai

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"herd/agent"
	"herd/agent/internal/provider"
)

const (
	defaultBaseURL = "https://api.openai.com/v1"
	// defaultMaxRetryDelay caps the backoff between retries and is
	// the longest Retry-After honoured; a server asking for a longer wait
	// gets its error returned at once rather than a stalled run.
	defaultMaxRetryDelay = 30 * time.Second
	// maxPlainBody bounds a non-streamed response read into memory.
	maxPlainBody = 32 << 20
)

// The stream settings of a model (ModelConfig.Stream).
const (
	// StreamAuto streams; when a server fails a streamed request that
	// carries tools, the call is retried as a plain request and the model
	// calls tools without streaming from then on.
	StreamAuto = "auto"
	// StreamTrue always streams.
	StreamTrue = "true"
	// StreamFalse never streams: every call is one request and response.
	StreamFalse = "false"
)

// Provider is an agent.Provider for any OpenAI-compatible chat-completions
// endpoint (OpenAI, vLLM, Ollama, LiteLLM, DeepSeek, …). Calls stream,
// or not, as the model's stream setting says (StreamAuto and friends).
//
// Tool-call arguments: Args is always valid JSON. A JSON object the model
// sent is kept as is; empty arguments become {}; anything else (invalid
// JSON, e.g. cut short by a token limit, or a non-object) becomes a JSON
// string holding the model's text verbatim. Such Args fail to decode as an
// object, so the tool reports bad arguments to the model; the caller can
// read the text back with json.Unmarshal into a string; and when the call
// is sent back in a later request the model sees exactly what it wrote.
type Provider struct {
	ep          provider.Endpoint
	client      oai.Client
	streamUsage bool
	stream      string // StreamAuto, StreamTrue or StreamFalse
	// plainTools is set once stream: auto has seen the server fail a
	// streamed request with tools: such calls are then made unstreamed.
	plainTools    atomic.Bool
	maxRetryDelay time.Duration
	log           *slog.Logger
	// maxOutput caps each answer (max_output_tokens; 0 sends no cap).
	maxOutput int64
	// completionTokens sends the cap as max_completion_tokens, which
	// OpenAI's own API requires of its reasoning models, rather than the
	// max_tokens that compatible servers (Ollama, vLLM, llama.cpp) read.
	completionTokens bool
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

	ep, err := provider.NewEndpoint("openai", cfg, defaultBaseURL)
	if err != nil {
		return nil, err
	}

	stream := cmp.Or(string(cfg.Stream), StreamAuto)
	if stream != StreamAuto && stream != StreamTrue && stream != StreamFalse {
		return nil, fmt.Errorf("openai model %q: stream must be auto, true or false, got %q", cfg.Name, cfg.Stream)
	}

	// The client is built from explicit options only: oai.NewClient
	// would also read OPENAI_API_KEY, OPENAI_BASE_URL and friends from the
	// environment, and could send an ambient key to a third-party base_url.
	clientOpts := []option.RequestOption{
		option.WithBaseURL(ep.BaseURL),
		option.WithAPIKey(ep.APIKey),
	}
	if o.httpClient != nil {
		clientOpts = append(clientOpts, option.WithHTTPClient(o.httpClient))
	}

	return &Provider{
		ep:               ep,
		client:           oai.Client{Options: clientOpts},
		streamUsage:      cfg.StreamUsage == nil || *cfg.StreamUsage,
		stream:           stream,
		maxRetryDelay:    o.maxRetryDelay,
		log:              o.log,
		maxOutput:        int64(max(cfg.MaxOutputTokens, 0)),
		completionTokens: isOpenAIHost(ep.BaseURL),
	}, nil
}

// Complete runs one chat completion: streamed, or as one plain
// request/response when the model's stream setting says so (see
// StreamAuto). Errors wrap ErrProvider; a cancelled ctx also yields an
// error wrapping context.Canceled.
func (p *Provider) Complete(ctx context.Context, req agent.Request, onDelta func(text string)) (agent.Response, error) {
	callID := uuid.NewString()
	model := cmp.Or(req.Model, p.ep.Model)
	params, err := chatParams(model, req, p.streamUsage)
	limit := p.maxOutput
	if n := int64(req.MaxTokens); n > 0 && (limit == 0 || n < limit) {
		limit = n
	}
	if limit > 0 && p.completionTokens {
		params.MaxCompletionTokens = oai.Int(limit)
	} else if limit > 0 {
		params.MaxTokens = oai.Int(limit)
	}
	if err != nil {
		return agent.Response{}, p.ep.Errorf("build request: %w", err)
	}

	ctx, cancel := p.ep.WithTimeout(ctx)
	defer cancel()

	out := sinks{text: onDelta, reasoning: req.OnReasoning}
	tools := len(req.Tools) > 0
	if p.stream == StreamFalse || (tools && p.plainTools.Load()) {
		return p.completePlain(ctx, params, callID, model, out)
	}
	resp, refused, err := p.completeStreamed(ctx, params, callID, model, out)
	if err == nil || !refused || !tools || p.stream != StreamAuto || ctx.Err() != nil {
		return resp, err
	}
	// stream: auto and a server that cannot stream tool calls: try the
	// call again as a plain request, and keep doing so for this model.
	resp, plainErr := p.completePlain(ctx, params, callID, model, out)
	if plainErr != nil && ctx.Err() != nil {
		return agent.Response{}, plainErr // keeps context.Canceled and the timeout findable
	}
	if plainErr != nil {
		joined := p.ep.Errorf("%s; retried without streaming: %s", p.ep.TrimPrefix(err), p.ep.TrimPrefix(plainErr))
		// The plain call's status is the cause the run's failure says.
		if st, ok := errors.AsType[*agent.StatusError](plainErr); ok {
			joined = &agent.StatusError{Status: st.Status, RetryAfter: st.RetryAfter, Err: joined}
		}
		return agent.Response{}, joined
	}
	if p.plainTools.CompareAndSwap(false, true) {
		p.log.Warn("openai: the server failed a streamed request with tools; this model now calls tools without streaming",
			"model", p.ep.Name, "error", err.Error())
	}
	return resp, nil
}

// completeStreamed runs the call as a stream. refused reports a failure
// that a plain request might not have: an HTTP error status other than
// auth and rate limits, or a stream that failed before any content.
func (p *Provider) completeStreamed(ctx context.Context, params oai.ChatCompletionNewParams, callID, model string, out sinks) (resp agent.Response, refused bool, err error) {
	res, attempts, status, err := p.send(ctx, params, true)
	if err != nil {
		switch status {
		case 0, http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestTimeout, http.StatusTooManyRequests:
			return agent.Response{}, false, err
		}
		// A request too long for the model is as long unstreamed.
		return agent.Response{}, !errors.Is(err, agent.ErrContextLength), err
	}
	// Some servers and proxies ignore stream: true, or answer 200 with an
	// error object; the SSE decoder would see neither as anything but an
	// empty stream.
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt == "application/json" {
		body, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		_ = res.Body.Close()
		if err != nil {
			return agent.Response{}, false, p.streamError(ctx, err, 0)
		}
		return agent.Response{}, true, p.ep.Errorf("expected an event stream, got a JSON body: %s", providerMessage(body))
	}
	acc, err := p.readStream(ctx, res, out)
	if err != nil {
		return agent.Response{}, acc.empty(), err
	}
	return p.completed(acc, callID, model, attempts, true), false, nil
}

// completePlain runs the call as one request and response, tool calls
// included. The answer arrives whole: each sink gets its part once.
func (p *Provider) completePlain(ctx context.Context, params oai.ChatCompletionNewParams, callID, model string, out sinks) (agent.Response, error) {
	// stream_options is only allowed on streamed requests.
	params.StreamOptions = oai.ChatCompletionStreamOptionsParam{}
	res, attempts, _, err := p.send(ctx, params, false)
	if err != nil {
		return agent.Response{}, err
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxPlainBody))
	_ = res.Body.Close()
	if err != nil {
		return agent.Response{}, p.streamError(ctx, err, 0)
	}
	var cc oai.ChatCompletion
	if err := json.Unmarshal(body, &cc); err != nil || !cc.JSON.Choices.Valid() {
		return agent.Response{}, p.ep.Errorf("expected a chat completion, got: %s", providerMessage(body))
	}
	acc := &streamAccumulator{model: cc.Model, completionID: cc.ID, out: out}
	if cc.JSON.Usage.Valid() {
		acc.usage = usageOf(cc.Usage)
	}
	for _, ch := range cc.Choices {
		if ch.Index != 0 {
			continue
		}
		acc.addReasoning(reasoningField(ch.Message.JSON.ExtraFields))
		acc.addContent(ch.Message.Content)
		acc.finishReason = ch.FinishReason
		for _, tc := range ch.Message.ToolCalls {
			c := &partialCall{id: tc.ID, name: tc.Function.Name}
			c.args.WriteString(tc.Function.Arguments)
			acc.calls = append(acc.calls, c)
		}
	}
	acc.endContent()
	return p.completed(acc, callID, model, attempts, false), nil
}

// completed is the response of a call that succeeded, logged with the
// provider's completion id.
func (p *Provider) completed(acc *streamAccumulator, callID, model string, attempts int, streamed bool) agent.Response {
	resp := acc.response(callID, model)
	resp.Cut = acc.finishReason == "length"
	p.log.Debug("openai: call completed", "model", p.ep.Name, "call_id", callID, "completion_id", acc.completionID,
		"reported_model", resp.Model, "finish_reason", acc.finishReason, "tool_calls", len(resp.ToolCalls), "attempts", attempts, "streamed", streamed)
	return resp
}

// send posts the request, retrying on 408, 409, 429, 5xx and connection
// failures up to max_retries times, and returns the response with its body
// unread. status is the HTTP status of a failed request (0: no response).
// The SDK's own retries are off: they ignore the call's deadline and add
// no jitter to Retry-After.
func (p *Provider) send(ctx context.Context, params oai.ChatCompletionNewParams, stream bool) (res *http.Response, attempts, status int, err error) {
	opts := []option.RequestOption{option.WithMaxRetries(0)}
	if stream {
		opts = append(opts, option.WithJSONSet("stream", true))
	}
	for attempts = 1; ; attempts++ {
		res = nil
		err := p.client.Post(ctx, "chat/completions", params, &res, opts...)
		if err == nil {
			return res, attempts, 0, nil
		}
		if ctx.Err() != nil {
			return nil, attempts, 0, p.ep.ContextError(ctx)
		}
		status, body := 0, []byte(nil)
		if res != nil && res.StatusCode >= 400 {
			status = res.StatusCode
			// The SDK puts the error body back on res; it is in memory.
			body, _ = io.ReadAll(res.Body)
			_ = res.Body.Close()
		}
		if !retryable(status) || attempts > p.ep.MaxRetries {
			return nil, attempts, status, p.requestError(err, res, status, body, attempts, "")
		}
		delay, why := p.retryDelay(ctx, res, status, attempts)
		if why != "" {
			return nil, attempts, status, p.requestError(err, res, status, body, attempts, why)
		}
		p.log.Info("openai: retrying", "model", p.ep.Name, "attempt", attempts+1, "previous_status", status, "delay", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, attempts, 0, p.ep.ContextError(ctx)
		case <-t.C:
		}
	}
}

// retryable says whether a failed attempt is worth another (0: the request
// got no response at all).
func retryable(status int) bool {
	return status == 0 || status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
}

// retryDelay is the wait before attempt n+1. A 429 or 503 with Retry-After
// waits that long plus up to 10% (at most a second) of jitter, so that
// many callers told the same time do not return together; a Retry-After
// beyond the max retry delay or the call's deadline gives up at once,
// saying why. Otherwise the wait is an exponential backoff from half a
// second, capped, less up to a quarter of jitter.
func (p *Provider) retryDelay(ctx context.Context, res *http.Response, status, n int) (time.Duration, string) {
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		if after, ok := retryAfter(res.Header, time.Now()); ok {
			if after > p.maxRetryDelay {
				return 0, fmt.Sprintf("the server asked to retry after %s, longer than the %s herd waits", after, p.maxRetryDelay)
			}
			jitter := min(after/10, time.Second) + time.Millisecond
			if deadline, ok := ctx.Deadline(); ok {
				left := time.Until(deadline)
				if after >= left {
					return 0, fmt.Sprintf("the server asked to retry after %s, past this call's deadline (%s left)",
						after, left.Round(time.Millisecond))
				}
				jitter = min(jitter, left-after)
			}
			return after + rand.N(jitter), ""
		}
	}
	delay := min(p.maxRetryDelay, time.Duration(float64(500*time.Millisecond)*math.Pow(2, float64(n-1))))
	if j := delay / 4; j > 0 {
		delay -= rand.N(j)
	}
	return delay, ""
}

// retryAfter reads Retry-After-Ms (OpenAI's), else Retry-After in seconds
// or as an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms >= 0 && !math.IsInf(ms, 0) {
		return time.Duration(min(ms, 1e12) * float64(time.Millisecond)), true
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 && !math.IsInf(s, 0) {
		return time.Duration(min(s, 1e9) * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now)), true
	}
	return 0, false
}

// readStream accumulates the stream's chunks, passing text and reasoning to
// out as they arrive. A stream is complete when it reached [DONE] or a finish_reason:
// some servers send one without the other. The accumulator is returned
// even on error, to tell whether any content had arrived.
func (p *Provider) readStream(ctx context.Context, res *http.Response, out sinks) (*streamAccumulator, error) {
	dec := &doneDecoder{Decoder: ssestream.NewDecoder(res)}
	stream := ssestream.NewStream[oai.ChatCompletionChunk](dec, nil)
	defer stream.Close()

	acc := &streamAccumulator{byIndex: map[int64]int{}, out: out}
	for stream.Next() {
		// Chunks already buffered when ctx ends are dropped, so no text
		// reaches onDelta after the caller has stopped the call.
		if ctx.Err() != nil {
			return acc, p.ep.ContextError(ctx)
		}
		acc.add(stream.Current())
	}
	if err := stream.Err(); err != nil {
		return acc, p.streamError(ctx, err, acc.chunks)
	}
	if !dec.done && acc.finishReason == "" {
		return acc, p.ep.Errorf("stream cut short: the connection closed before [DONE] and without a finish_reason, after %d chunks", acc.chunks)
	}
	acc.endContent()
	return acc, nil
}

// isOpenAIHost says whether base is OpenAI's own API.
func isOpenAIHost(base string) bool {
	u, err := url.Parse(base)
	return err == nil && strings.EqualFold(u.Hostname(), "api.openai.com")
}

// chatParams maps a Request onto the chat-completions request body.
func chatParams(model string, req agent.Request, streamUsage bool) (oai.ChatCompletionNewParams, error) {
	params := oai.ChatCompletionNewParams{Model: shared.ChatModel(model)}
	for i, m := range req.Messages {
		switch m.Type {
		case agent.TypeSystem:
			params.Messages = append(params.Messages, oai.SystemMessage(m.Content))
		case agent.TypeHuman:
			params.Messages = append(params.Messages, userMessage(m))
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

// userMessage is a human message: its text, and its images (a model
// that sees, agent.Image) as image_url parts after it, each a data URL.
func userMessage(m agent.Message) oai.ChatCompletionMessageParamUnion {
	if len(m.Images) == 0 {
		return oai.UserMessage(m.Content)
	}
	parts := []oai.ChatCompletionContentPartUnionParam{oai.TextContentPart(m.Content)}
	for _, img := range m.Images {
		parts = append(parts, oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{
			URL: "data:" + img.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(img.Data),
		}))
	}
	return oai.UserMessage(parts)
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

// argsText is provider.ToolArgs reversed, for sending a call back to the model.
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

// sinks are where a call's text and reasoning go as they arrive; either
// may be nil.
type sinks struct {
	text, reasoning func(string)
}

// streamAccumulator builds a Response from chunks. Only choice 0 counts:
// herd never asks for more than one.
type streamAccumulator struct {
	out          sinks
	chunks       int
	text         strings.Builder
	reasoning    strings.Builder
	think        thinkSplitter // a <think> block at the start of the content
	calls        []*partialCall
	byIndex      map[int64]int // tool-call index → position in calls
	usage        *agent.Usage
	model        string
	completionID string
	finishReason string
}

// usageOf converts reported usage; cache reads stay absent unless reported.
func usageOf(cu oai.CompletionUsage) *agent.Usage {
	u := agent.Usage{
		InputTokens:  cu.PromptTokens,
		OutputTokens: cu.CompletionTokens,
		TotalTokens:  cu.TotalTokens,
	}
	if cached := cu.PromptTokensDetails.CachedTokens; cached > 0 {
		u.CacheReadTokens = cached
	}
	return &u
}

// empty says whether no content (text, reasoning or tool call) has
// arrived: a call that showed nothing yet can be made again.
func (a *streamAccumulator) empty() bool {
	return a.text.Len() == 0 && a.reasoning.Len() == 0 && a.think.held == "" && len(a.calls) == 0
}

// addContent takes content, splitting a leading <think> block out as
// reasoning.
func (a *streamAccumulator) addContent(content string) {
	text, reasoning := a.think.write(content)
	a.addReasoning(reasoning)
	a.addText(text)
}

// endContent flushes what the <think> rule held back once the content is
// complete.
func (a *streamAccumulator) endContent() {
	text, reasoning := a.think.end()
	a.addReasoning(reasoning)
	a.addText(text)
}

func (a *streamAccumulator) addText(text string) {
	if text == "" {
		return
	}
	a.text.WriteString(text)
	if a.out.text != nil {
		a.out.text(text)
	}
}

func (a *streamAccumulator) addReasoning(text string) {
	if text == "" {
		return
	}
	a.reasoning.WriteString(text)
	if a.out.reasoning != nil {
		a.out.reasoning(text)
	}
}

type partialCall struct {
	id, name string
	args     strings.Builder
}

func (a *streamAccumulator) add(c oai.ChatCompletionChunk) {
	a.chunks++
	if c.Model != "" {
		a.model = c.Model
	}
	if c.ID != "" {
		a.completionID = c.ID
	}
	// Some servers send usage on every chunk; the last one is the total.
	if c.JSON.Usage.Valid() {
		a.usage = usageOf(c.Usage)
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		a.addReasoning(reasoningField(ch.Delta.JSON.ExtraFields))
		if ch.Delta.Content != "" {
			a.addContent(ch.Delta.Content)
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
		CallID:    callID,
		Text:      a.text.String(),
		Reasoning: strings.TrimSpace(a.reasoning.String()),
		Usage:     a.usage,
		Model:     cmp.Or(a.model, requestedModel),
	}
	for _, c := range a.calls {
		// A call id becomes a task_id and pairs the tool result with its
		// call, so a server that sends none gets one made up.
		id := cmp.Or(c.id, "call_"+uuid.NewString())
		resp.ToolCalls = append(resp.ToolCalls, agent.ToolCall{ID: id, Name: c.name, Args: provider.ToolArgs(c.args.String())})
	}
	return resp
}

// requestError explains a request that failed: a status with the
// provider's own message, or the transport failure; why says why no retry
// followed, when that was not max_retries.
func (p *Provider) requestError(err error, res *http.Response, status int, body []byte, attempts int, why string) error {
	tries := provider.AfterAttempts(attempts)
	if why != "" {
		why = " (" + why + ")"
	}
	if status >= 400 {
		msg := providerMessage(body)
		if provider.Overflow(status, string(body)) {
			return p.ep.Errorf("HTTP %d %s: %s%s%s%w", status, http.StatusText(status), msg, tries, why, provider.Overflowed)
		}
		after, _ := retryAfter(res.Header, time.Now())
		return p.ep.StatusErrorf(status, after, msg, "HTTP %d %s: %s%s%s", status, http.StatusText(status), msg, tries, why)
	}
	return p.ep.Errorf("request failed%s: %w", tries, err)
}

// streamError explains a stream that failed part-way.
func (p *Provider) streamError(ctx context.Context, err error, chunks int) error {
	if ctx.Err() != nil {
		return p.ep.ContextError(ctx)
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		return p.ep.Errorf("error event in stream after %d chunks: %s", chunks, providerMessage(streamErr.Event.Data))
	}
	if provider.IsDecodeError(err) {
		return p.ep.Errorf("malformed stream chunk after %d chunks: %w", chunks, err)
	}
	return p.ep.Errorf("stream cut short after %d chunks: %w", chunks, err)
}

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
	return provider.Message(msg, string(body))
}
