package anthropic

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/uuid"

	"herd/agent"
	"herd/agent/internal/provider"
	"herd/agent/tools"
)

// messageParams maps a Request onto the Messages API request body. System
// messages become the system blocks; consecutive messages of one role are
// merged into one message, since the API wants user and assistant turns to
// alternate and a batch of tool results to arrive in one user message.
// A thinking budget above 0 turns extended thinking on, and only then are
// AI messages' thinking blocks sent back.
func messageParams(model string, maxTokens, thinking int64, req agent.Request) (sdk.MessageNewParams, error) {
	params := sdk.MessageNewParams{Model: sdk.Model(model), MaxTokens: maxTokens}
	if thinking > 0 {
		params.Thinking = sdk.ThinkingConfigParamOfEnabled(thinking)
	}
	type turn struct {
		user   bool
		blocks []sdk.ContentBlockParamUnion
	}
	var turns []turn
	for i, m := range req.Messages {
		var t turn
		switch m.Type {
		case agent.TypeSystem:
			if m.Content != "" {
				params.System = append(params.System, sdk.TextBlockParam{Text: m.Content})
			}
			continue
		case agent.TypeHuman:
			t = turn{true, userBlocks(m)}
		case agent.TypeAI:
			t = turn{false, assistantBlocks(m, thinking > 0)}
		case agent.TypeTool:
			t = turn{true, []sdk.ContentBlockParamUnion{toolResult(m)}}
		default:
			return params, fmt.Errorf("message %d: unknown type %q", i, m.Type)
		}
		if len(t.blocks) == 0 {
			continue // the API rejects empty content
		}
		if n := len(turns); n > 0 && turns[n-1].user == t.user {
			turns[n-1].blocks = append(turns[n-1].blocks, t.blocks...)
			continue
		}
		turns = append(turns, t)
	}
	for _, t := range turns {
		if t.user {
			params.Messages = append(params.Messages, sdk.NewUserMessage(t.blocks...))
		} else {
			params.Messages = append(params.Messages, sdk.NewAssistantMessage(t.blocks...))
		}
	}
	// The cache breakpoints: the prefix up to the system prompt and the one
	// up to the tools (which come first in the cached prefix) are both
	// reused by every later turn of the conversation.
	if n := len(params.System); n > 0 {
		params.System[n-1].CacheControl = sdk.NewCacheControlEphemeralParam()
	}
	return params, addTools(&params, req.Tools)
}

// addTools gives params the tools, the last one a cache breakpoint.
func addTools(params *sdk.MessageNewParams, specs []tools.Spec) error {
	for _, t := range specs {
		tool, err := toolParam(t)
		if err != nil {
			return err
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: &tool})
	}
	if n := len(params.Tools); n > 0 {
		params.Tools[n-1].OfTool.CacheControl = sdk.NewCacheControlEphemeralParam()
	}
	return nil
}

// toolResult answers a tool_use block. Empty output leaves the content
// out: the API rejects an empty text block.
func toolResult(m agent.Message) sdk.ContentBlockParamUnion {
	r := sdk.ToolResultBlockParam{ToolUseID: m.ToolCallID}
	if m.Content != "" {
		r.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: m.Content}}}
	}
	return sdk.ContentBlockParamUnion{OfToolResult: &r}
}

func textBlocks(text string) []sdk.ContentBlockParamUnion {
	if text == "" {
		return nil
	}
	return []sdk.ContentBlockParamUnion{sdk.NewTextBlock(text)}
}

// userBlocks is a human message: its text, and its images (a model that
// sees, agent.Image) as image blocks with a base64 source after it.
func userBlocks(m agent.Message) []sdk.ContentBlockParamUnion {
	blocks := textBlocks(m.Content)
	for _, img := range m.Images {
		blocks = append(blocks, sdk.NewImageBlockBase64(img.MIMEType, base64.StdEncoding.EncodeToString(img.Data)))
	}
	return blocks
}

// assistantBlocks is an AI message as the API takes it back: its thinking
// blocks first, unchanged and with their signatures (the API checks them,
// and wants them while a tool-use turn continues), then text and tool use.
func assistantBlocks(m agent.Message, thinking bool) []sdk.ContentBlockParamUnion {
	var blocks []sdk.ContentBlockParamUnion
	if thinking {
		for _, b := range m.Thinking {
			if b.Redacted != "" {
				blocks = append(blocks, sdk.NewRedactedThinkingBlock(b.Redacted))
			} else {
				blocks = append(blocks, sdk.NewThinkingBlock(b.Signature, b.Thinking))
			}
		}
	}
	blocks = append(blocks, textBlocks(m.Content)...)
	for _, tc := range m.ToolCalls {
		blocks = append(blocks, sdk.NewToolUseBlock(tc.ID, toolInput(tc.Args), tc.Name))
	}
	return blocks
}

// toolInput is a call's arguments as the API takes them back: an object.
// Args that are not one (a model's invalid JSON kept as a string) are sent
// as {} — the tool result that follows already told the model so.
func toolInput(args json.RawMessage) json.RawMessage {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(trimmed) {
		return trimmed
	}
	return json.RawMessage(`{}`)
}

// toolParam maps a tool's JSON Schema onto the API's input_schema.
func toolParam(t tools.Spec) (sdk.ToolParam, error) {
	tool := sdk.ToolParam{Name: t.Name}
	if t.Description != "" {
		tool.Description = sdk.String(t.Description)
	}
	var schema map[string]any
	if len(t.Parameters) > 0 {
		if err := json.Unmarshal(t.Parameters, &schema); err != nil {
			return tool, fmt.Errorf("tool %q: parameters are not a JSON object: %w", t.Name, err)
		}
	}
	if props, ok := schema["properties"]; ok {
		tool.InputSchema.Properties = props
	}
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				tool.InputSchema.Required = append(tool.InputSchema.Required, s)
			}
		}
	}
	delete(schema, "type")
	delete(schema, "properties")
	delete(schema, "required")
	if len(schema) > 0 {
		tool.InputSchema.ExtraFields = schema
	}
	return tool, nil
}

// accumulator builds a Response from stream events.
type accumulator struct {
	events     int
	text       strings.Builder
	thinking   []*agent.ThinkingBlock         // in stream order
	thoughts   map[int64]*agent.ThinkingBlock // thinking blocks by content index
	shown      int                            // bytes of reasoning streamed
	blocks     map[int64]*partialCall         // tool_use blocks by content index
	calls      []*partialCall                 // in stream order
	usage      sdk.MessageDeltaUsage          // the running totals
	reported   bool                           // any usage arrived
	model      string
	messageID  string
	stopReason string
	stopped    bool // message_stop arrived
}

type partialCall struct {
	id, name string
	args     strings.Builder
}

func newAccumulator() *accumulator {
	return &accumulator{blocks: map[int64]*partialCall{}, thoughts: map[int64]*agent.ThinkingBlock{}}
}

func (a *accumulator) add(e sdk.MessageStreamEventUnion, onDelta, onReasoning func(string)) {
	a.events++
	switch e.Type {
	case "message_start":
		a.model, a.messageID = e.Message.Model, e.Message.ID
		if e.Message.JSON.Usage.Valid() {
			u := e.Message.Usage
			a.usage = sdk.MessageDeltaUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
				CacheReadInputTokens: u.CacheReadInputTokens, CacheCreationInputTokens: u.CacheCreationInputTokens}
			a.reported = true
		}
	case "content_block_start":
		switch e.ContentBlock.Type {
		case "tool_use":
			c := &partialCall{id: e.ContentBlock.ID, name: e.ContentBlock.Name}
			a.blocks[e.Index] = c
			a.calls = append(a.calls, c)
		case "thinking":
			a.startThinking(e.Index, &agent.ThinkingBlock{Thinking: e.ContentBlock.Thinking, Signature: e.ContentBlock.Signature}, onReasoning)
		case "redacted_thinking":
			a.startThinking(e.Index, &agent.ThinkingBlock{Redacted: e.ContentBlock.Data}, nil)
		}
	case "content_block_delta":
		switch e.Delta.Type {
		case "text_delta":
			if e.Delta.Text != "" {
				a.text.WriteString(e.Delta.Text)
				if onDelta != nil {
					onDelta(e.Delta.Text)
				}
			}
		case "input_json_delta":
			if c := a.blocks[e.Index]; c != nil {
				c.args.WriteString(e.Delta.PartialJSON)
			}
		case "thinking_delta":
			if b := a.thoughts[e.Index]; b != nil && e.Delta.Thinking != "" {
				a.thinkingText(b, e.Delta.Thinking, onReasoning)
			}
		case "signature_delta":
			if b := a.thoughts[e.Index]; b != nil {
				b.Signature += e.Delta.Signature
			}
		}
	case "message_delta":
		a.stopReason = string(e.Delta.StopReason)
		a.addDeltaUsage(e.Usage)
	case "message_stop":
		a.stopped = true
	}
}

// startThinking opens a thinking block. Blocks after the first are shown
// apart by a blank line, as Response.Reasoning joins them.
func (a *accumulator) startThinking(index int64, b *agent.ThinkingBlock, onReasoning func(string)) {
	text := b.Thinking
	b.Thinking = ""
	a.thoughts[index] = b
	a.thinking = append(a.thinking, b)
	if text != "" {
		a.thinkingText(b, text, onReasoning)
	}
}

func (a *accumulator) thinkingText(b *agent.ThinkingBlock, text string, onReasoning func(string)) {
	shown := text
	if b.Thinking == "" && a.shown > 0 {
		shown = "\n\n" + text
	}
	b.Thinking += text
	a.shown += len(shown)
	if onReasoning != nil {
		onReasoning(shown)
	}
}

// addDeltaUsage takes message_delta's cumulative usage: output_tokens
// always, the input figures when the server sends them again.
func (a *accumulator) addDeltaUsage(u sdk.MessageDeltaUsage) {
	if !u.JSON.OutputTokens.Valid() && !u.JSON.InputTokens.Valid() {
		return
	}
	a.reported = true
	if u.JSON.OutputTokens.Valid() {
		a.usage.OutputTokens = u.OutputTokens
	}
	if u.JSON.InputTokens.Valid() && u.InputTokens > 0 {
		a.usage.InputTokens = u.InputTokens
	}
	if u.JSON.CacheReadInputTokens.Valid() && u.CacheReadInputTokens > 0 {
		a.usage.CacheReadInputTokens = u.CacheReadInputTokens
	}
	if u.JSON.CacheCreationInputTokens.Valid() && u.CacheCreationInputTokens > 0 {
		a.usage.CacheCreationInputTokens = u.CacheCreationInputTokens
	}
}

func (a *accumulator) response(callID, requestedModel string) agent.Response {
	resp := agent.Response{CallID: callID, Text: a.text.String(), Model: cmp.Or(a.model, requestedModel)}
	var shown []string
	for _, b := range a.thinking {
		resp.Thinking = append(resp.Thinking, *b)
		if b.Thinking != "" {
			shown = append(shown, b.Thinking)
		}
	}
	resp.Reasoning = strings.TrimSpace(strings.Join(shown, "\n\n"))
	if a.reported {
		u := a.usage
		in := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
		resp.Usage = &agent.Usage{InputTokens: in, OutputTokens: u.OutputTokens, TotalTokens: in + u.OutputTokens,
			CacheReadTokens: max(u.CacheReadInputTokens, 0)}
	}
	for _, c := range a.calls {
		// A call id becomes a task_id and pairs the result with its call.
		id := cmp.Or(c.id, "toolu_"+uuid.NewString())
		resp.ToolCalls = append(resp.ToolCalls, agent.ToolCall{ID: id, Name: c.name, Args: provider.ToolArgs(c.args.String())})
	}
	return resp
}
