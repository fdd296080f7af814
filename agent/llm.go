package agent

import (
	"context"
	"encoding/json"
	"errors"

	"herd/agent/tools"
)

// Message types, in the seeds' LangChain vocabulary (docs/API.md).
const (
	TypeSystem = "system"
	TypeHuman  = "human"
	TypeAI     = "ai"
	TypeTool   = "tool"
)

// Message is one entry of a conversation as an LLM sees it.
type Message struct {
	Type       string     `json:"type"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"` // the tool's name on a tool message
	// Thinking is an AI message's reasoning as the provider must get it
	// back (Anthropic's signed thinking blocks, within a tool-use turn).
	// It lives only in a loop's own history, never in the stored thread:
	// reasoning is shown to the user, not replayed to models
	// (docs/DESIGN.md §3).
	Thinking []ThinkingBlock `json:"thinking,omitempty"`
	// Images are a human message's pictures, for a model that sees
	// (ModelConfig.Vision); the note at the end of Content names each by
	// its path. They are read from the workspace for every run
	// (run.present), never stored or checkpointed.
	Images []Image `json:"-"`
	// attached are a replayed human message's attachments, which
	// run.present turns into its note and Images.
	attached []Attachment
}

// ThinkingBlock is one reasoning block a provider signed: its text and
// signature, or the opaque data of a block the provider redacted. herd
// only carries it back, unchanged.
type ThinkingBlock struct {
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Redacted  string `json:"redacted,omitempty"` // a redacted_thinking block's data
}

// ToolCall is one tool invocation requested by a model. ID is the
// provider's tool-call id; for a task call it becomes the task_id.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// callKey identifies a tool call within its run: providers reuse tool-call
// ids across runs (call_0), so an id alone names no one call of a thread.
func callKey(runID, callID string) string { return runID + "\x00" + callID }

// Usage is the token usage one LLM call reported. CacheReadTokens is
// sparse: zero means "not reported".
type Usage struct {
	InputTokens     int64 `json:"input_tokens"`
	OutputTokens    int64 `json:"output_tokens"`
	TotalTokens     int64 `json:"total_tokens"`
	CacheReadTokens int64 `json:"cache_read_tokens,omitempty"`
}

// Request is one chat-completion call.
type Request struct {
	Model    string // the provider's model id
	Messages []Message
	Tools    []tools.Spec
	// MaxTokens, when above 0, caps this call's answer below the model's
	// own cap (max_output_tokens): a short call such as a thread's title.
	// Providers that think within the cap (Anthropic's extended thinking)
	// do not think on such a call.
	MaxTokens int
	// OnReasoning, when set, receives the model's reasoning as it
	// arrives, apart from the answer's text; nil: the caller only wants
	// Response.Reasoning.
	OnReasoning func(text string)
}

// Response is one completed LLM response.
type Response struct {
	CallID string // unique per call; the usage ledger's key
	Text   string
	// Reasoning is what the model thought before answering (reasoning
	// fields, thinking blocks, a leading <think> block), never part of
	// Text.
	Reasoning string
	// Thinking is the reasoning as the provider needs it back in the next
	// call of the same turn (Message.Thinking); nil for most providers.
	Thinking  []ThinkingBlock
	ToolCalls []ToolCall
	Usage     *Usage // nil when the provider reported none
	Model     string // the model name the provider reported
	// Cut: the provider stopped the answer at its output token limit
	// (OpenAI's finish_reason "length", Anthropic's "max_tokens").
	Cut bool
}

// Provider is an LLM backend. Complete streams text through onDelta (which
// may be nil) as it arrives, and reasoning through req.OnReasoning, and
// returns the whole response. It must honour
// ctx: cancelling ctx aborts the in-flight request.
type Provider interface {
	Complete(ctx context.Context, req Request, onDelta func(text string)) (Response, error)
}

// ErrProvider wraps every error a provider returns, so callers can tell an
// LLM failure from their own.
var ErrProvider = errors.New("llm provider")

// Model is a configured model with its provider.
type Model struct {
	Config   ModelConfig
	Provider Provider
	// gauge calibrates the token estimate of this model's requests.
	gauge gauge
}
