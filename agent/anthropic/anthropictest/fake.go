// Package anthropictest is a fake Anthropic Messages API server for tests.
// It speaks the real streaming wire format (SSE with named events:
// message_start carrying usage, ping, content_block_start,
// content_block_delta with thinking_delta, signature_delta, text_delta and
// input_json_delta,
// content_block_stop, message_delta with stop_reason and usage,
// message_stop, and error), answers from a per-test script of replies, and
// records every request it receives so a test can assert what the client
// sent.
//
//	srv := anthropictest.NewServer(t, anthropictest.Text("Hello", ", world"))
//	p, err := anthropic.New(
//		agent.ModelConfig{Name: "claude", Provider: "anthropic", Model: "claude-test", BaseURL: srv.URL(), APIKey: "k"},
//		anthropic.WithHTTPClient(srv.Client()), // no idle connections outlive the test
//	)
//
// Replies are consumed in order, one per request. When the script runs out,
// the fallback (see SetFallback) answers; without one the server answers
// 500, so an unexpected extra call shows up as an error rather than a hang.
package anthropictest

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"herd/agent/internal/fake"
)

// MessageID is the id of every message the server streams.
const MessageID = "msg_anthropictest"

// argPieces is how many input_json_delta events a tool call's input is
// split across, so every tool call exercises delta accumulation.
const argPieces = 3

// Ending says how a streamed reply ends.
type Ending int

// The endings. For every ending but EndDone, Reply.After counts the events
// (message_start, ping, each block's start, deltas and stop,
// message_delta, message_stop) written before it happens.
const (
	// EndDone ends normally, with message_delta and message_stop.
	EndDone Ending = iota
	// EndCut ends the HTTP response cleanly with no message_stop, as a
	// server or proxy that gives up mid-stream does.
	EndCut
	// EndAbort drops the connection mid-response.
	EndAbort
	// EndHang writes nothing more and holds the connection open until the
	// client goes away or the server closes.
	EndHang
	// EndError writes an error event (`event: error`) carrying
	// Reply.ErrorType and Reply.Error, and ends the response, as the API
	// does when it overloads mid-stream.
	EndError
)

// Reply scripts the server's answer to one request.
type Reply struct {
	// Thinking are the thinking_delta texts of one thinking block streamed
	// first, signed with Signature(the joined text); RedactedThinking, when
	// set, adds a redacted_thinking block with that data after it. The
	// server checks that thinking blocks sent back carry their signatures
	// and open a continuing tool-use turn, as the API does.
	Thinking         []string
	RedactedThinking string
	// Chunks are the text deltas of one text block, in order.
	Chunks []string
	// ToolCalls are tool_use blocks streamed after the text, each input
	// split across several input_json_delta events.
	ToolCalls []ToolCall
	// Usage is reported in message_start (input and cache figures) and
	// message_delta (output_tokens). Nil: no usage at all, like a proxy
	// that strips it.
	Usage *Usage
	// Model is the model reported in message_start; empty: the requested one.
	Model string
	// StopReason defaults to "tool_use" when there are tool calls and
	// "end_turn" otherwise.
	StopReason string
	// EventDelay is waited before each event.
	EventDelay time.Duration
	// End and After script an abnormal ending after After events.
	End   Ending
	After int

	// Status, when neither 0 nor 200, answers with that HTTP status and
	// an Anthropic error body instead of a stream.
	Status int
	// Error is the provider's message for Status and EndError; ErrorType
	// its type (default: the API's type for the status, overloaded_error
	// for EndError).
	Error     string
	ErrorType string
	// Header holds extra response headers, e.g. retry-after.
	Header http.Header
}

// ToolCall is a tool_use block the fake model streams.
type ToolCall struct {
	ID   string
	Name string
	// Input is the input JSON text exactly as the model "generates" it.
	Input string
}

// Usage is the token usage a reply reports. The cache figures are
// pointers: nil leaves the field out of the event, as older API versions
// and proxies do.
type Usage struct {
	InputTokens              int64
	OutputTokens             int64
	CacheReadInputTokens     *int64
	CacheCreationInputTokens *int64
}

// Text is a reply that streams chunks as one text block and ends its turn.
func Text(chunks ...string) Reply { return Reply{Chunks: chunks} }

// Fail is a reply that answers with an HTTP error status and an Anthropic
// error body carrying message.
func Fail(status int, message string) Reply { return Reply{Status: status, Error: message} }

// Request is one request the server received.
type Request struct {
	Header   http.Header
	Body     []byte          // the raw request body
	Messages MessagesRequest // Body decoded; zero when Body is not valid JSON
}

// MessagesRequest is the part of a Messages request body tests assert on.
type MessagesRequest struct {
	Model     string          `json:"model"`
	MaxTokens int64           `json:"max_tokens"`
	Thinking  *ThinkingConfig `json:"thinking"`
	System    []Block         `json:"system"`
	Messages  []Message       `json:"messages"`
	Tools     []Tool          `json:"tools"`
	Stream    bool            `json:"stream"`
}

// Message is one message of a request.
type Message struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// ThinkingConfig is the request's extended thinking setting.
type ThinkingConfig struct {
	Type         string `json:"type"`
	BudgetTokens int64  `json:"budget_tokens"`
}

// Text is the message's text blocks joined.
func (m Message) Text() string {
	s := ""
	for _, b := range m.Content {
		if b.Type == "text" {
			s += b.Text
		}
	}
	return s
}

// Block is a content block of a request: text, image, tool_use or
// tool_result.
type Block struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	ToolUseID    string          `json:"tool_use_id"`
	Content      json.RawMessage `json:"content"`
	CacheControl *CacheControl   `json:"cache_control"`
	// Thinking and Signature are a thinking block's; Data a
	// redacted_thinking block's.
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
	Data      string `json:"data"`
	// Source is an image block's.
	Source *ImageSource `json:"source"`
}

// ImageSource is an image block's source: base64 data of a media type.
type ImageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// Image is an image block of a request, decoded.
type Image = fake.Image

// The API's bounds on one image: its base64 data and its edges.
const (
	MaxImageBase64 = 5 << 20
	MaxImageEdge   = 8000
)

// Images are the message's image blocks, decoded, in order; an error, as
// the API words it, for a block it would refuse: a source that is not
// base64, data that is not an image of its media_type, over
// MaxImageBase64 or over MaxImageEdge pixels.
func (m Message) Images() ([]Image, error) {
	var out []Image
	for i, b := range m.Content {
		if b.Type != "image" {
			continue
		}
		switch {
		case b.Source == nil:
			return nil, fmt.Errorf("content.%d.image.source: Field required", i)
		case b.Source.Type != "base64":
			return nil, fmt.Errorf("content.%d.image.source: anthropictest takes base64 sources only, got %q", i, b.Source.Type)
		case len(b.Source.Data) > MaxImageBase64:
			return nil, fmt.Errorf("content.%d.image.source.base64: image exceeds 5 MB maximum: %d bytes > %d bytes", i, len(b.Source.Data), MaxImageBase64)
		}
		img, err := fake.DecodeImage(b.Source.MediaType, b.Source.Data)
		if err != nil {
			return nil, fmt.Errorf("content.%d.image.source.base64: %w", i, err)
		}
		if img.Width > MaxImageEdge || img.Height > MaxImageEdge {
			return nil, fmt.Errorf("content.%d.image.source.base64.data: image dimensions exceed max allowed size: %d pixels", i, MaxImageEdge)
		}
		out = append(out, img)
	}
	return out, nil
}

// imageError is the API's refusal of the first image block it would not
// take, "" when there is none.
func imageError(req MessagesRequest) string {
	for i, m := range req.Messages {
		if _, err := m.Images(); err != nil {
			return fmt.Sprintf("messages.%d.%v", i, err)
		}
	}
	return ""
}

// CacheControl is a block's or tool's cache breakpoint.
type CacheControl struct {
	Type string `json:"type"`
}

// Tool is a tool offered to the model in a request.
type Tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *CacheControl   `json:"cache_control"`
}

// Server is the fake. Its methods are safe for concurrent use; concurrent
// requests take replies from the script in arrival order.
type Server struct {
	srv *fake.Server[Request, Reply]
}

// NewServer starts a server that answers with replies, in order, and closes
// it when the test ends.
func NewServer(t testing.TB, replies ...Reply) *Server {
	t.Helper()
	s := &Server{srv: fake.NewServer[Request](replies)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", s.messages)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found_error", "anthropictest: only POST /v1/messages is served, not "+r.Method+" "+r.URL.Path)
	})
	s.srv.Start(t, mux)
	return s
}

// URL is the base URL to configure a client with (no /v1, as for the real
// API: https://api.anthropic.com).
func (s *Server) URL() string { return s.srv.BaseURL() }

// Client is an HTTP client for the server whose idle connections Close
// shuts, so a test leaves no connection goroutines behind.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Enqueue appends replies to the script.
func (s *Server) Enqueue(replies ...Reply) { s.srv.Enqueue(replies...) }

// SetFallback makes f answer every request that arrives once the script is
// exhausted, for tests whose call order is not deterministic.
func (s *Server) SetFallback(f func(MessagesRequest) Reply) {
	s.srv.Fallback(func(r Request) Reply { return f(r.Messages) })
}

// Requests returns every request received so far, in arrival order.
func (s *Server) Requests() []Request { return s.srv.Requests() }

// Close releases hanging replies, drops open connections and stops the
// server. It is safe to call more than once.
func (s *Server) Close() { s.srv.Close() }

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "anthropictest: read body: "+err.Error())
		return
	}
	rec := Request{Header: r.Header.Clone(), Body: body}
	decodeErr := json.Unmarshal(body, &rec.Messages)
	if decodeErr != nil {
		rec.Messages = MessagesRequest{}
	}
	reply, ok := s.srv.Next(rec)
	if !ok {
		reply = Fail(http.StatusInternalServerError, "anthropictest: no scripted reply left")
	}
	fake.AddHeader(w, reply.Header)
	switch {
	case decodeErr != nil:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "anthropictest: request body is not JSON: "+decodeErr.Error())
	case APIKey(r.Header) == "":
		writeError(w, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
	case r.Header.Get("anthropic-version") == "":
		writeError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version header is required")
	case reply.Status != 0 && reply.Status != http.StatusOK:
		writeError(w, reply.Status, cmp.Or(reply.ErrorType, errorType(reply.Status)), reply.Error)
	case !rec.Messages.Stream:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "anthropictest: only streaming requests (stream: true) are supported")
	case rec.Messages.MaxTokens <= 0:
		writeError(w, http.StatusBadRequest, "invalid_request_error", "max_tokens: Field required")
	case imageError(rec.Messages) != "":
		writeError(w, http.StatusBadRequest, "invalid_request_error", imageError(rec.Messages))
	case thinkingError(rec.Messages) != "":
		writeError(w, http.StatusBadRequest, "invalid_request_error", thinkingError(rec.Messages))
	default:
		s.stream(w, r, reply, rec.Messages)
	}
}

// APIKey is the key a request carried: the x-api-key header, or the
// bearer token the official SDK sends since v2.
func APIKey(h http.Header) string {
	if k := h.Get("x-api-key"); k != "" {
		return k
	}
	return strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
}

// event is one server-sent event.
type event struct {
	name string
	data []byte
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, reply Reply, req MessagesRequest) {
	sendEvent := s.srv.Stream(w, r, reply.EventDelay)
	send := func(ev event) bool { return sendEvent(ev.name, ev.data) }

	events := replyEvents(reply, req)
	if reply.End == EndDone {
		reply.After = len(events)
	}
	for _, ev := range events[:min(reply.After, len(events))] {
		if !send(ev) {
			return
		}
	}
	switch reply.End {
	case EndCut:
		// Returning lets net/http end the chunked body cleanly.
	case EndAbort:
		panic(http.ErrAbortHandler)
	case EndHang:
		s.srv.Hang(r)
	case EndError:
		send(event{"error", mustJSON(errorBody(cmp.Or(reply.ErrorType, "overloaded_error"), reply.Error))})
	}
}

// replyEvents builds the events of a reply that ends normally.
func replyEvents(reply Reply, req MessagesRequest) []event {
	var evs []event
	add := func(name string, v map[string]any) {
		v["type"] = name
		evs = append(evs, event{name, mustJSON(v)})
	}
	add("message_start", map[string]any{"message": startMessage(reply, req)})
	add("ping", map[string]any{})
	index := 0
	if len(reply.Thinking) > 0 {
		add("content_block_start", map[string]any{"index": index, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
		for _, c := range reply.Thinking {
			add("content_block_delta", map[string]any{"index": index, "delta": map[string]any{"type": "thinking_delta", "thinking": c}})
		}
		add("content_block_delta", map[string]any{"index": index, "delta": map[string]any{"type": "signature_delta", "signature": Signature(strings.Join(reply.Thinking, ""))}})
		add("content_block_stop", map[string]any{"index": index})
		index++
	}
	if reply.RedactedThinking != "" {
		add("content_block_start", map[string]any{"index": index, "content_block": map[string]any{"type": "redacted_thinking", "data": reply.RedactedThinking}})
		add("content_block_stop", map[string]any{"index": index})
		index++
	}
	if len(reply.Chunks) > 0 {
		add("content_block_start", map[string]any{"index": index, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, c := range reply.Chunks {
			add("content_block_delta", map[string]any{"index": index, "delta": map[string]any{"type": "text_delta", "text": c}})
		}
		add("content_block_stop", map[string]any{"index": index})
		index++
	}
	for _, tc := range reply.ToolCalls {
		add("content_block_start", map[string]any{"index": index, "content_block": map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": map[string]any{}}})
		for _, piece := range split(tc.Input, argPieces) {
			add("content_block_delta", map[string]any{"index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": piece}})
		}
		add("content_block_stop", map[string]any{"index": index})
		index++
	}
	delta := map[string]any{"delta": map[string]any{"stop_reason": stopReason(reply), "stop_sequence": nil}}
	if reply.Usage != nil {
		delta["usage"] = map[string]any{"output_tokens": reply.Usage.OutputTokens}
	}
	add("message_delta", delta)
	add("message_stop", map[string]any{})
	return evs
}

// startMessage is the message of message_start: no content yet, the
// input's usage.
func startMessage(reply Reply, req MessagesRequest) map[string]any {
	msg := map[string]any{
		"id": MessageID, "type": "message", "role": "assistant", "content": []any{},
		"model": cmp.Or(reply.Model, req.Model), "stop_reason": nil, "stop_sequence": nil,
	}
	if u := reply.Usage; u != nil {
		usage := map[string]any{"input_tokens": u.InputTokens, "output_tokens": 1}
		if u.CacheReadInputTokens != nil {
			usage["cache_read_input_tokens"] = *u.CacheReadInputTokens
		}
		if u.CacheCreationInputTokens != nil {
			usage["cache_creation_input_tokens"] = *u.CacheCreationInputTokens
		}
		msg["usage"] = usage
	}
	return msg
}

func stopReason(reply Reply) string {
	switch {
	case reply.StopReason != "":
		return reply.StopReason
	case len(reply.ToolCalls) > 0:
		return "tool_use"
	default:
		return "end_turn"
	}
}

// split cuts s into at most n pieces on rune boundaries; the pieces of a
// non-empty string are never empty.
func split(s string, n int) []string {
	if s == "" {
		return nil
	}
	size := max(1, (len(s)+n-1)/n)
	var out []string
	for len(s) > 0 {
		i := min(size, len(s))
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// errorType is the API's error type for a status.
func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	default:
		return "api_error"
	}
}

func errorBody(typ, message string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": message}}
}

func writeError(w http.ResponseWriter, status int, typ, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_anthropictest_"+strconv.Itoa(status))
	w.WriteHeader(status)
	_, _ = w.Write(mustJSON(errorBody(typ, message)))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Signature is the signature the server gives a thinking block with this
// text, and expects back with it.
func Signature(thinking string) string {
	sum := sha256.Sum256([]byte(thinking))
	return "sig_" + hex.EncodeToString(sum[:12])
}

// thinkingError is the API's refusal of a request's thinking, or "": a
// budget out of range; a thinking block whose signature does not match
// its text; with thinking on, a continuing tool-use turn (the last
// assistant message, answered by tool results) that does not open with its
// thinking.
func thinkingError(req MessagesRequest) string {
	for i, m := range req.Messages {
		for j, b := range m.Content {
			if b.Type == "thinking" && b.Signature != Signature(b.Thinking) {
				return fmt.Sprintf("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
			}
		}
	}
	if req.Thinking == nil || req.Thinking.Type != "enabled" {
		return ""
	}
	switch {
	case req.Thinking.BudgetTokens < 1024:
		return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
	case req.Thinking.BudgetTokens >= req.MaxTokens:
		return "`max_tokens` must be greater than `thinking.budget_tokens`"
	}
	n := len(req.Messages)
	if n < 2 || req.Messages[n-1].Role != "user" || req.Messages[n-2].Role != "assistant" {
		return ""
	}
	last, answer := req.Messages[n-2], req.Messages[n-1]
	if !hasBlock(last, "tool_use") || !hasBlock(answer, "tool_result") || len(last.Content) == 0 {
		return ""
	}
	if t := last.Content[0].Type; t != "thinking" && t != "redacted_thinking" {
		return fmt.Sprintf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks).", n-2, t)
	}
	return ""
}

func hasBlock(m Message, typ string) bool {
	for _, b := range m.Content {
		if b.Type == typ {
			return true
		}
	}
	return false
}
