// Package openaitest is a fake OpenAI chat-completions server for tests. It
// speaks the real streaming wire format (SSE `data:` lines carrying
// chat.completion.chunk objects, then `data: [DONE]`), answers from a
// per-test script of replies, and records every request it receives so a
// test can assert what the client sent.
//
//	srv := openaitest.NewServer(t, openaitest.Text("Hello", ", world"))
//	p, err := openai.New(
//		agent.ModelConfig{Name: "gpt", Provider: "openai", Model: "gpt-test", BaseURL: srv.URL()},
//		openai.WithHTTPClient(srv.Client()), // no idle connections outlive the test
//	)
//
// A request without stream: true gets the same reply as one
// chat.completion object (Reply.End does not apply), as servers that cannot
// stream tool calls answer.
//
// Replies are consumed in order, one per request. When the script runs out,
// the fallback (see SetFallback) answers; without one the server answers
// 500, so an unexpected extra call shows up as an error rather than a hang.
package openaitest

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"herd/agent/internal/fake"
)

// CompletionID is the id the server puts in every chunk. It is the same for
// every reply, as a real server's ids may repeat across calls, so a client
// cannot use it as a unique call id.
const CompletionID = "chatcmpl-openaitest"

// argPieces is how many chunks a tool call's arguments are split across,
// so every tool call exercises delta accumulation.
const argPieces = 3

// Ending says how a streamed reply ends.
type Ending int

// The endings. For every ending but EndDone, Reply.After counts the chunks
// (data events: the role chunk, reasoning chunks, text chunks, tool-call chunks, the finish
// chunk and the usage chunk, in that order) written before it happens.
const (
	// EndDone ends normally: the finish chunk, the usage chunk when asked
	// for, then `data: [DONE]`.
	EndDone Ending = iota
	// EndCut ends the HTTP response cleanly with no [DONE], as a server or
	// proxy that gives up mid-stream does.
	EndCut
	// EndAbort drops the connection mid-response.
	EndAbort
	// EndHang writes nothing more and holds the connection open until the
	// client goes away or the server closes.
	EndHang
	// EndMalformed writes a chunk that is not valid JSON, then [DONE].
	EndMalformed
	// EndError writes an in-stream error event carrying Reply.Error
	// (`data: {"error": {...}}`) and ends the response.
	EndError
	// EndNoDone writes every chunk and ends the response without [DONE],
	// as some servers do after the finish chunk (After is ignored).
	EndNoDone
)

// Reply scripts the server's answer to one request.
type Reply struct {
	// Reasoning are reasoning deltas, one per chunk, streamed before the
	// text as DeepSeek does (content null beside them), in the field
	// ReasoningField names: "reasoning_content" (the default) or
	// "reasoning" (OpenRouter, Ollama). A plain reply carries them joined
	// in its message. A leading <think> block is scripted in Chunks, as
	// local models put it in the content.
	Reasoning      []string
	ReasoningField string
	// Chunks are the text deltas, one per chunk, in order.
	Chunks []string
	// ToolCalls are streamed after the text. Each call's arguments are
	// split across several chunks.
	ToolCalls []ToolCall
	// InterleaveToolCalls streams the calls' pieces round-robin, as some
	// servers do, instead of one call after the other.
	InterleaveToolCalls bool
	// Usage is sent in a last chunk with empty choices, only when the
	// request asked for it (stream_options.include_usage). Nil: never sent,
	// like a server that reports no usage.
	Usage *Usage
	// Model is the model name reported in every chunk; empty: the
	// requested model.
	Model string
	// FinishReason defaults to "tool_calls" when there are tool calls and
	// "stop" otherwise.
	FinishReason string
	// ChunkDelay is waited before each chunk.
	ChunkDelay time.Duration
	// End and After script an abnormal ending after After chunks.
	End   Ending
	After int

	// Status, when neither 0 nor 200, answers with that HTTP status and an
	// OpenAI-style error body {"error": {"message": Error, ...}} instead of
	// a stream.
	Status int
	// Error is the provider's message for Status and EndError.
	Error string
	// ErrorBody, when set, replaces the OpenAI-style error body verbatim.
	ErrorBody string
	// Header holds extra response headers, e.g. Retry-After.
	Header http.Header

	// Quirks of real servers, for streamed replies.

	// NoToolIndex leaves "index" out of tool-call deltas.
	NoToolIndex bool
	// WholeArgs sends each call's arguments in its first chunk, with the
	// id and name, instead of across several.
	WholeArgs bool
	// NoFinishReason leaves finish_reason null in every chunk.
	NoFinishReason bool
	// UsageEveryChunk reports the usage so far on every chunk, whether or
	// not the request asked for it; the last chunk has Usage.
	UsageEveryChunk bool
}

// ToolCall is a tool call the fake model makes.
type ToolCall struct {
	// ID is the tool-call id; empty omits it, as some servers do.
	ID   string
	Name string
	// Args is the arguments text exactly as the model "generates" it; it
	// need not be valid JSON.
	Args string
}

// Usage is the token usage a reply reports.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	TotalTokens      int64
	CachedTokens     int64 // prompt_tokens_details.cached_tokens
}

// Text is a reply that streams chunks as text and stops.
func Text(chunks ...string) Reply { return Reply{Chunks: chunks} }

// Fail is a reply that answers with an HTTP error status and an
// OpenAI-style error body carrying message.
func Fail(status int, message string) Reply { return Reply{Status: status, Error: message} }

// ContextLengthExceeded is OpenAI's refusal of a request of got tokens to
// a model whose context window is limit tokens, word for word.
func ContextLengthExceeded(limit, got int) Reply {
	return Reply{Status: http.StatusBadRequest, ErrorBody: fmt.Sprintf(`{"error":{"message":"This model's maximum context length is %d tokens. `+
		`However, your messages resulted in %d tokens. Please reduce the length of the messages.",`+
		`"type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, limit, got)}
}

// Request is one request the server received.
type Request struct {
	Header http.Header
	Body   []byte      // the raw request body
	Chat   ChatRequest // Body decoded; zero when Body is not valid JSON
}

// ChatRequest is the part of a chat-completions request body tests assert on.
type ChatRequest struct {
	Model         string         `json:"model"`
	Messages      []Message      `json:"messages"`
	Tools         []Tool         `json:"tools"`
	Stream        bool           `json:"stream"`
	StreamOptions *StreamOptions `json:"stream_options"`
	// The answer's cap, as compatible servers and as OpenAI's API read it.
	MaxTokens           int64 `json:"max_tokens"`
	MaxCompletionTokens int64 `json:"max_completion_tokens"`
}

// StreamOptions is the request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one message of a request.
type Message struct {
	Role       string            `json:"role"`
	Content    json.RawMessage   `json:"content"` // a string, an array of parts, or absent
	ToolCalls  []RequestToolCall `json:"tool_calls"`
	ToolCallID string            `json:"tool_call_id"`
	// ReasoningContent is refused when sent back, as DeepSeek does.
	ReasoningContent json.RawMessage `json:"reasoning_content"`
}

// Text is the message's content as text: the string, or the text parts
// joined; empty when the content is absent or null.
func (m Message) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	var b bytes.Buffer
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// Image is an image part of a request, decoded.
type Image = fake.Image

// MaxImageBytes is the most one image part may hold, decoded, as OpenAI's
// API takes it.
const MaxImageBytes = 20 << 20

// Images are the message's image_url parts, decoded from their data URLs,
// in order; an error for a part the API would refuse:
// a URL that is not a base64 data URL of a PNG, JPEG, GIF or WebP image
// (the fake fetches nothing), bytes that are not that image, or over
// MaxImageBytes.
func (m Message) Images() ([]Image, error) {
	var parts []struct {
		Type     string `json:"type"`
		ImageURL *struct {
			URL    string `json:"url"`
			Detail string `json:"detail"`
		} `json:"image_url"`
	}
	if len(m.Content) == 0 || m.Content[0] != '[' {
		return nil, nil
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return nil, fmt.Errorf("invalid content parts: %w", err)
	}
	var out []Image
	for i, p := range parts {
		if p.Type != "image_url" {
			continue
		}
		if p.ImageURL == nil {
			return nil, fmt.Errorf("missing required parameter: 'messages.content.%d.image_url'", i)
		}
		mimeType, b64, ok := strings.Cut(strings.TrimPrefix(p.ImageURL.URL, "data:"), ";base64,")
		if !ok || !strings.HasPrefix(p.ImageURL.URL, "data:") {
			return nil, fmt.Errorf("invalid image URL: 'messages.content.%d.image_url.url': openaitest takes base64 data URLs only", i)
		}
		if base64.StdEncoding.DecodedLen(len(b64)) > MaxImageBytes {
			return nil, fmt.Errorf("image too large: content part %d is over %d bytes", i, MaxImageBytes)
		}
		img, err := fake.DecodeImage(mimeType, b64)
		if err != nil {
			return nil, fmt.Errorf("unsupported image in content part %d: %w", i, err)
		}
		out = append(out, img)
	}
	return out, nil
}

// imageError is the API's refusal of the first image part it would not
// take, "" when there is none.
func imageError(req ChatRequest) string {
	for _, m := range req.Messages {
		if _, err := m.Images(); err != nil {
			return err.Error()
		}
	}
	return ""
}

// RequestToolCall is a tool call sent back to the model in an assistant
// message.
type RequestToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function part of a RequestToolCall.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a tool offered to the model in a request.
type Tool struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function describes a function tool.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
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
	mux.HandleFunc("POST /v1/chat/completions", s.complete)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "openaitest: only POST /v1/chat/completions is served, not "+r.Method+" "+r.URL.Path)
	})
	s.srv.Start(t, mux)
	return s
}

// URL is the base URL to configure a client with (it ends in /v1).
func (s *Server) URL() string { return s.srv.BaseURL() + "/v1" }

// Client is an HTTP client for the server whose idle connections Close
// shuts, so a test leaves no connection goroutines behind.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Enqueue appends replies to the script.
func (s *Server) Enqueue(replies ...Reply) { s.srv.Enqueue(replies...) }

// SetFallback makes f answer every request that arrives once the script is
// exhausted, for tests whose call order is not deterministic (parallel
// subagents): f may choose a reply from the request's messages.
func (s *Server) SetFallback(f func(ChatRequest) Reply) {
	s.srv.Fallback(func(r Request) Reply { return f(r.Chat) })
}

// Pending is the number of scripted replies not yet used.
func (s *Server) Pending() int { return s.srv.Pending() }

// Requests returns every request received so far, in arrival order.
func (s *Server) Requests() []Request { return s.srv.Requests() }

// Close releases hanging replies, drops open connections and stops the
// server. It is safe to call more than once.
func (s *Server) Close() { s.srv.Close() }

func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "openaitest: read body: "+err.Error())
		return
	}
	rec := Request{Header: r.Header.Clone(), Body: body}
	decodeErr := json.Unmarshal(body, &rec.Chat)
	if decodeErr != nil {
		rec.Chat = ChatRequest{}
	}
	reply, ok := s.srv.Next(rec)
	if !ok {
		reply = Fail(http.StatusInternalServerError, "openaitest: no scripted reply left")
	}

	fake.AddHeader(w, reply.Header)
	switch {
	case decodeErr != nil:
		writeError(w, http.StatusBadRequest, "openaitest: request body is not JSON: "+decodeErr.Error())
		return
	case imageError(rec.Chat) != "":
		writeError(w, http.StatusBadRequest, imageError(rec.Chat))
		return
	case sentReasoning(rec.Chat):
		// DeepSeek's own answer to reasoning sent back in a request.
		writeError(w, http.StatusBadRequest, "The reasoning_content is an intermediate result for display purposes only and will not be included in the context for inference. Please remove the reasoning_content from your input messages.")
		return
	case reply.Status != 0 && reply.Status != http.StatusOK:
		if reply.ErrorBody != "" {
			w.WriteHeader(reply.Status)
			_, _ = io.WriteString(w, reply.ErrorBody)
			return
		}
		writeError(w, reply.Status, reply.Error)
		return
	case !rec.Chat.Stream:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(completion(reply, rec.Chat))
		return
	}
	s.stream(w, r, reply, rec.Chat)
}

// stream writes the reply as server-sent events.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, reply Reply, req ChatRequest) {
	sendEvent := s.srv.Stream(w, r, reply.ChunkDelay)
	send := func(data []byte) bool { return sendEvent("", data) }

	events := chunks(reply, req)
	if reply.End == EndDone || reply.End == EndNoDone {
		reply.After = len(events)
	}
	for _, ev := range events[:min(reply.After, len(events))] {
		if !send(ev) {
			return
		}
	}
	switch reply.End {
	case EndDone:
		send([]byte("[DONE]"))
	case EndCut:
		// Returning lets net/http end the chunked body cleanly.
	case EndAbort:
		// ErrAbortHandler makes net/http drop the connection without
		// logging, so the client sees an unexpected EOF.
		panic(http.ErrAbortHandler)
	case EndHang:
		s.srv.Hang(r)
	case EndMalformed:
		if send([]byte(`{"id":"` + CompletionID + `","choices":[{"index":0,"delta":{"content":`)) {
			send([]byte("[DONE]"))
		}
	case EndError:
		ev, _ := json.Marshal(map[string]any{"error": errorObject(reply.Error, "server_error")})
		send(ev)
	case EndNoDone:
		// Returning ends the response after the last chunk.
	}
}

// sentReasoning says whether a request carries reasoning back to the model.
func sentReasoning(req ChatRequest) bool {
	for _, m := range req.Messages {
		if len(m.ReasoningContent) > 0 && string(m.ReasoningContent) != "null" {
			return true
		}
	}
	return false
}

func reasoningField(reply Reply) string { return cmp.Or(reply.ReasoningField, "reasoning_content") }

// completion encodes the reply as one non-streamed chat.completion.
func completion(reply Reply, req ChatRequest) []byte {
	msg := map[string]any{"role": "assistant", "content": nil}
	if len(reply.Chunks) > 0 || len(reply.ToolCalls) == 0 {
		msg["content"] = strings.Join(reply.Chunks, "")
	}
	if len(reply.Reasoning) > 0 {
		msg[reasoningField(reply)] = strings.Join(reply.Reasoning, "")
	}
	var calls []any
	for i, tc := range reply.ToolCalls {
		calls = append(calls, map[string]any{"id": cmp.Or(tc.ID, fmt.Sprintf("call_plain_%d", i)), "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": tc.Args}})
	}
	if calls != nil {
		msg["tool_calls"] = calls
	}
	c := map[string]any{
		"id":      CompletionID,
		"object":  "chat.completion",
		"created": 1700000000,
		"model":   cmp.Or(reply.Model, req.Model),
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finishReason(reply), "logprobs": nil}},
	}
	if reply.Usage != nil {
		c["usage"] = usageObject(*reply.Usage)
	}
	b, _ := json.Marshal(c)
	return b
}

// chunks builds the data events of a reply that ends normally, without the
// [DONE] sentinel.
func chunks(reply Reply, req ChatRequest) [][]byte {
	e := chunkEncoder{
		model:     cmp.Or(reply.Model, req.Model),
		withUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
		reply:     reply,
	}
	out := [][]byte{e.delta(map[string]any{"role": "assistant", "content": ""}, nil)}
	field := reasoningField(reply)
	for _, r := range reply.Reasoning {
		out = append(out, e.delta(map[string]any{"content": nil, field: r}, nil))
	}
	for _, text := range reply.Chunks {
		d := map[string]any{"content": text}
		if len(reply.Reasoning) > 0 {
			d[field] = nil // as DeepSeek sends it once the answer starts
		}
		out = append(out, e.delta(d, nil))
	}
	out = append(out, toolCallChunks(e, reply)...)
	var finish any = finishReason(reply)
	if reply.NoFinishReason {
		finish = nil
	}
	out = append(out, e.delta(map[string]any{}, finish))
	if e.withUsage && reply.Usage != nil && !reply.UsageEveryChunk {
		out = append(out, e.usage(*reply.Usage))
	}
	if reply.UsageEveryChunk && reply.Usage != nil {
		// Each chunk reports a running count; the last one the total.
		for i := range out {
			var c map[string]any
			_ = json.Unmarshal(out[i], &c)
			u := *reply.Usage
			if i < len(out)-1 {
				u.CompletionTokens = int64(i)
				u.TotalTokens = u.PromptTokens + int64(i)
			}
			c["usage"] = usageObject(u)
			out[i], _ = json.Marshal(c)
		}
	}
	return out
}

// toolCallChunks streams every call of the reply, one after the other or
// interleaved as the reply asks.
func toolCallChunks(e chunkEncoder, reply Reply) [][]byte {
	perCall := make([][][]byte, len(reply.ToolCalls))
	for i, tc := range reply.ToolCalls {
		perCall[i] = e.toolCall(i, tc)
	}
	if reply.InterleaveToolCalls {
		return interleave(perCall)
	}
	return slices.Concat(perCall...)
}

// interleave takes the calls' chunks round-robin, so a client cannot
// assume one call is complete before the next begins.
func interleave(perCall [][][]byte) [][]byte {
	var out [][]byte
	for j := 0; ; j++ {
		wrote := false
		for _, evs := range perCall {
			if j < len(evs) {
				out = append(out, evs[j])
				wrote = true
			}
		}
		if !wrote {
			return out
		}
	}
}

func finishReason(reply Reply) string {
	switch {
	case reply.FinishReason != "":
		return reply.FinishReason
	case len(reply.ToolCalls) > 0:
		return "tool_calls"
	default:
		return "stop"
	}
}

// chunkEncoder encodes the chat.completion.chunk objects of one reply.
type chunkEncoder struct {
	model     string
	withUsage bool
	reply     Reply // for its quirks
}

// envelope is the part every chunk shares.
func (e chunkEncoder) envelope(choices []any) map[string]any {
	return map[string]any{
		"id":      CompletionID,
		"object":  "chat.completion.chunk",
		"created": 1700000000,
		"model":   e.model,
		"choices": choices,
	}
}

// delta encodes a chunk whose only choice carries delta and finish.
func (e chunkEncoder) delta(delta map[string]any, finish any) []byte {
	c := e.envelope([]any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}})
	if e.withUsage {
		// The real API sends "usage": null on every chunk but the last
		// when usage was asked for.
		c["usage"] = nil
	}
	b, _ := json.Marshal(c)
	return b
}

// toolCall encodes call i as a head chunk with its id and name, then its
// arguments split across argPieces chunks.
func (e chunkEncoder) toolCall(i int, tc ToolCall) [][]byte {
	head := map[string]any{"index": i, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": ""}}
	if tc.ID != "" {
		head["id"] = tc.ID
	}
	pieces := split(tc.Args, argPieces)
	if e.reply.WholeArgs {
		head["function"] = map[string]any{"name": tc.Name, "arguments": tc.Args}
		pieces = nil
	}
	parts := []map[string]any{head}
	for _, piece := range pieces {
		parts = append(parts, map[string]any{"index": i, "function": map[string]any{"arguments": piece}})
	}
	var evs [][]byte
	for _, part := range parts {
		if e.reply.NoToolIndex {
			delete(part, "index")
		}
		evs = append(evs, e.delta(map[string]any{"tool_calls": []any{part}}, nil))
	}
	return evs
}

// usage encodes the last chunk: no choices, only the token totals.
func (e chunkEncoder) usage(u Usage) []byte {
	c := e.envelope([]any{})
	c["usage"] = usageObject(u)
	b, _ := json.Marshal(c)
	return b
}

func usageObject(u Usage) map[string]any {
	return map[string]any{
		"prompt_tokens":         u.PromptTokens,
		"completion_tokens":     u.CompletionTokens,
		"total_tokens":          u.TotalTokens,
		"prompt_tokens_details": map[string]any{"cached_tokens": u.CachedTokens, "audio_tokens": 0},
	}
}

// split cuts s into at most n pieces of about equal length on rune
// boundaries (a piece that split a rune could not be sent as a JSON string).
func split(s string, n int) []string {
	if s == "" {
		return nil
	}
	size := max(1, len(s)/n)
	var out []string
	for len(s) > 0 {
		cut := min(size, len(s))
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		if len(out) == n-1 {
			cut = len(s)
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

func errorObject(message, typ string) map[string]any {
	return map[string]any{"message": message, "type": typ, "param": nil, "code": nil}
}

func writeError(w http.ResponseWriter, status int, message string) {
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": errorObject(message, typ)})
}
