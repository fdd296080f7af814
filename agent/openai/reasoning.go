package openai

import (
	"encoding/json"
	"strings"

	"github.com/openai/openai-go/v3/packages/respjson"
)

// Reasoning reaches herd from OpenAI-compatible servers in three shapes,
// all kept out of the answer's text:
//
//   - a reasoning_content field beside content (DeepSeek, vLLM, LiteLLM);
//   - a reasoning field (OpenRouter, Ollama, newer vLLM); a server that
//     sends both carries the same text twice, so reasoning_content wins;
//   - a <think>…</think> block that opens the content (local models served
//     without a reasoning parser).
//
// The <think> rule: the content is reasoning only when, leading whitespace
// aside, it starts with <think>; the block ends at the first </think> (or
// with the stream, when the model stopped while thinking), and what
// follows is the answer. A <think> anywhere else is the answer's own text
// and is left alone, so prose about the tag is never hidden. A model whose
// chat template opens the block in the prompt (content that starts inside
// the block and only closes it) is not recognised: serve it with a
// reasoning parser (vLLM --reasoning-parser, Ollama's think option).
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// reasoningField reads the reasoning of a delta or message from its extra
// JSON fields (the SDK has no field for it): reasoning_content, else
// reasoning. Anything but a JSON string (null, an object) is no reasoning.
func reasoningField(extra map[string]respjson.Field) string {
	for _, name := range []string{"reasoning_content", "reasoning"} {
		f, ok := extra[name]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

// The states of a thinkSplitter.
const (
	thinkUndecided = iota // the content so far may still open a block
	thinkInside           // inside the block: reasoning
	thinkAnswer           // after the block, or no block: the answer
)

// thinkSplitter separates a leading <think> block from streamed content,
// chunk by chunk: a tag split across chunks is recognised, and only the
// text that could still be part of a tag is held back.
type thinkSplitter struct {
	state int
	held  string // undecided content, or the start of a possible </think>
	// lead is set while the current part (reasoning, then answer) has
	// shown nothing yet: its leading whitespace (the newline after a tag)
	// is dropped.
	lead bool
}

// write takes one chunk of content and returns the answer text and the
// reasoning it completes.
func (s *thinkSplitter) write(chunk string) (text, reasoning string) {
	switch s.state {
	case thinkUndecided:
		s.held += chunk
		rest := strings.TrimLeft(s.held, " \t\r\n")
		switch {
		case strings.HasPrefix(rest, thinkOpen):
			s.state, s.held, s.lead = thinkInside, "", true
			return s.write(rest[len(thinkOpen):])
		case strings.HasPrefix(thinkOpen, rest):
			return "", "" // still undecided ("", "<", "<th", …)
		}
		text, s.held, s.state = s.held, "", thinkAnswer
		return text, ""
	case thinkInside:
		buf := s.held + chunk
		if i := strings.Index(buf, thinkClose); i >= 0 {
			reasoning = s.trimLead(buf[:i])
			s.state, s.held, s.lead = thinkAnswer, "", true
			text, _ = s.write(buf[i+len(thinkClose):])
			return text, reasoning
		}
		keep := partialSuffix(buf, thinkClose)
		s.held = buf[len(buf)-keep:]
		return "", s.trimLead(buf[:len(buf)-keep])
	}
	return s.trimLead(chunk), ""
}

// end flushes what is held when the content ends: undecided text is the
// answer, and an unterminated block is reasoning.
func (s *thinkSplitter) end() (text, reasoning string) {
	held := s.held
	s.held = ""
	switch s.state {
	case thinkUndecided:
		s.state = thinkAnswer
		return held, ""
	case thinkInside:
		return "", s.trimLead(held)
	}
	return "", ""
}

func (s *thinkSplitter) trimLead(out string) string {
	if s.lead {
		out = strings.TrimLeft(out, " \t\r\n")
		s.lead = out == ""
	}
	return out
}

// partialSuffix is the length of the longest suffix of s that is a proper
// prefix of tag: text that may be the start of a tag split across chunks.
func partialSuffix(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}
