package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"herd/agent/tools"
)

func human(s string) Message { return Message{Type: TypeHuman, Content: s} }
func ai(s string, calls ...ToolCall) Message {
	return Message{Type: TypeAI, Content: s, ToolCalls: calls}
}
func toolResult(id, s string) Message {
	return Message{Type: TypeTool, ToolCallID: id, Name: "ls", Content: s}
}
func lsCall(id string) ToolCall { return ToolCall{ID: id, Name: "ls", Args: json.RawMessage(`{}`)} }

// shape is a conversation written one letter a message (s system, h
// human, a ai, t tool) with each message's content after a colon.
func shape(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(m.Type[:1] + ":" + m.Content)
	}
	return b.String()
}

// long is text of about n estimated tokens.
func long(tag string, n int) string { return tag + strings.Repeat("x", n*bytesPerToken-len(tag)) }

func TestEstimateMessage(t *testing.T) {
	for _, tt := range []struct {
		name string
		m    Message
		want int
	}{
		{"empty", Message{Type: TypeHuman}, messageOverhead},
		{"bytes over four, rounded up", human("12345"), 2 + messageOverhead},
		{"tool calls counted", ai("", ToolCall{ID: "abcd", Name: "efgh", Args: json.RawMessage(`{"a":1}`)}), 4 + messageOverhead},
		{"tool result's id and name", Message{Type: TypeTool, ToolCallID: "abcd", Name: "ls", Content: "12"}, 2 + messageOverhead},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := estimateMessage(tt.m); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
	specs := []tools.Spec{{Name: "ls", Description: "lists", Parameters: json.RawMessage(`{"type":"object"}`)}}
	if got, want := estimateTools(specs), (2+5+17+3)/4+toolOverhead; got != want {
		t.Errorf("tools: got %d, want %d", got, want)
	}
}

func TestFitMessages(t *testing.T) {
	sys := Message{Type: TypeSystem, Content: "S"}
	// Each message below costs 100 + overhead, the system prompt 1 + overhead.
	msg := func(m Message) Message { m.Content = m.Content + strings.Repeat("x", 400-len(m.Content)); return m }
	h1, a1, h2 := msg(human("h1")), msg(ai("a1")), msg(human("h2"))
	call := msg(ai("a2", lsCall("c1"), lsCall("c2")))
	r1, r2 := msg(toolResult("c1", "r1")), msg(toolResult("c2", "r2"))
	h3 := msg(human("h3"))
	step := func(n string) []Message {
		return []Message{msg(ai("s"+n, lsCall(n))), msg(toolResult(n, "t"+n))}
	}
	per := 100 + messageOverhead
	sysCost := 1 + messageOverhead

	for _, tt := range []struct {
		name      string
		msgs      []Message
		budget    int
		want      string // shape of the contents' first two letters
		sent, all int
		tooLong   bool
	}{
		{name: "fits: nothing left out", msgs: []Message{sys, h1, a1, h2}, budget: sysCost + 3*per + 20,
			want: "s:S h:h1 a:a1 h:h2", sent: 3, all: 3},
		{name: "oldest turns first", msgs: []Message{sys, h1, a1, h2, a1, h3}, budget: sysCost + 3*per + 20,
			want: "s:S h:h2 a:a1 h:h3", sent: 3, all: 5},
		{name: "a call and its results go together", msgs: []Message{sys, h1, call, r1, r2, h2, a1, h3}, budget: sysCost + 4*per + 20,
			want: "s:S h:h2 a:a1 h:h3", sent: 3, all: 5},
		{name: "kept history starts with a human message", msgs: []Message{sys, h1, a1, a1, h2}, budget: sysCost + 2*per + 20,
			want: "s:S h:h2", sent: 1, all: 4},
		{name: "latest human and latest steps kept, oldest steps left out",
			msgs:   append([]Message{sys, h1}, append(append(step("1"), step("2")...), step("3")...)...),
			budget: sysCost + 5*per + 20, want: "s:S h:h1 a:s2 t:t2 a:s3 t:t3", sent: 3, all: 4},
		{name: "the minimum does not fit", msgs: append([]Message{sys, h1, a1, h2}, step("1")...), budget: sysCost + 2*per,
			tooLong: true},
		{name: "the system prompt alone counts", msgs: []Message{sys, h1}, budget: per, tooLong: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, rep, err := fitMessages(tt.msgs, 0, tt.budget)
			if tt.tooLong {
				if !errors.Is(err, errTooLong) {
					t.Fatalf("err %v, want errTooLong", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			short := make([]Message, len(got))
			for i, m := range got {
				short[i] = m
				short[i].Content = strings.TrimRight(m.Content, "x")
			}
			if s := shape(short); s != tt.want {
				t.Errorf("sent %s, want %s", s, tt.want)
			}
			if rep.Sent != tt.sent || rep.Total != tt.all {
				t.Errorf("report %d of %d turns, want %d of %d", rep.Sent, rep.Total, tt.sent, tt.all)
			}
			if rep.Estimate > tt.budget {
				t.Errorf("estimate %d over the budget %d", rep.Estimate, tt.budget)
			}
			assertPaired(t, got)
		})
	}
}

// assertPaired fails when a tool result lacks its call or a call lacks a
// result: what providers refuse with a 400.
func assertPaired(t *testing.T, msgs []Message) {
	t.Helper()
	open := map[string]bool{}
	for _, m := range msgs {
		switch m.Type {
		case TypeTool:
			if !open[m.ToolCallID] {
				t.Errorf("result %s without its call", m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		default:
			if len(open) > 0 {
				t.Errorf("calls %v without results", open)
			}
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		}
	}
	if len(open) > 0 {
		t.Errorf("calls %v without results", open)
	}
}

func TestModelFitUsesTheWindow(t *testing.T) {
	msgs := []Message{{Type: TypeSystem, Content: "S"}, human(long("h1", 300)), ai(long("a1", 300)), human(long("h2", 300))}
	req := Request{Messages: msgs}
	t.Run("no window: sent whole", func(t *testing.T) {
		m := &Model{Config: ModelConfig{Name: "m"}}
		got, rep, err := m.fit(req)
		if err != nil || len(got.Messages) != 4 || rep.Trimmed() || rep.Total != 3 {
			t.Errorf("got %d messages, %+v, %v; want all 4", len(got.Messages), rep, err)
		}
	})
	t.Run("max_output_tokens and the margin come off", func(t *testing.T) {
		// 1000 − 400 − 62 = 538: one of the three turns of 304.
		m := &Model{Config: ModelConfig{Name: "m", ContextWindow: 1000, MaxOutputTokens: 400}}
		got, rep, err := m.fit(req)
		if err != nil || len(got.Messages) != 2 || rep.Sent != 1 || rep.Total != 3 {
			t.Errorf("got %d messages, %+v, %v; want the system prompt and h2", len(got.Messages), rep, err)
		}
		// A model whose tokens run twice the estimate fits only the minimum…
		m.gauge.set(2)
		if _, _, err := m.fit(req); !errors.Is(err, errTooLong) {
			t.Fatalf("err %v, want errTooLong", err)
		} else if !strings.Contains(err.Error(), "context_window 1000, less 400 for the answer and 62 margin") {
			t.Errorf("err %q does not explain the budget", err)
		}
	})
	t.Run("unset max_output_tokens reserves an eighth", func(t *testing.T) {
		w := windowOf(ModelConfig{ContextWindow: 1600})
		if w.budget() != 1600-200-100 {
			t.Errorf("budget %d", w.budget())
		}
	})
}

func TestGaugeLearnsFromReportedUsage(t *testing.T) {
	var g gauge
	if g.ratio() != 1 {
		t.Fatalf("zero gauge ratio %v, want 1", g.ratio())
	}
	g.learn(1000, nil)
	g.learn(1000, &Usage{})
	g.learn(10, &Usage{InputTokens: 500}) // too small to say anything
	if g.ratio() != 1 {
		t.Fatalf("ratio %v after nothing to learn from, want 1", g.ratio())
	}
	g.learn(1000, &Usage{InputTokens: 2000})
	if g.ratio() != 1.5 {
		t.Errorf("ratio %v, want half way to 2", g.ratio())
	}
	g.learn(1000, &Usage{InputTokens: 2000})
	if g.ratio() != 1.75 {
		t.Errorf("ratio %v, want 1.75", g.ratio())
	}
	g.learn(1000, &Usage{InputTokens: 1_000_000})
	if g.ratio() != maxRatio {
		t.Errorf("ratio %v, want the bound %v", g.ratio(), maxRatio)
	}
	g.set(1)
	g.overflowed()
	if g.ratio() != overflowRatioStep {
		t.Errorf("ratio %v after an overflow, want %v", g.ratio(), overflowRatioStep)
	}
}

// TestCallFittedCalibrates: the estimate is corrected from the input
// tokens the provider reports, so that the next request of a model whose
// tokens run denser than the estimate leaves more out, and the request
// fits where the uncalibrated estimate would have overflowed.
func TestCallFittedCalibrates(t *testing.T) {
	const window = 2000
	var sent []int // the provider's count of each request's tokens
	llm := llmFunc(func(_ context.Context, req Request, _ func(string)) (Response, error) {
		n := 0
		for _, m := range req.Messages {
			n += 2 * estimateMessage(m) // this model's tokens: twice the estimate
		}
		sent = append(sent, n)
		if n > window {
			return Response{}, fmt.Errorf("%w: HTTP 400: maximum context length is %d: %w", ErrProvider, window, ErrContextLength)
		}
		return Response{Text: "ok", Usage: &Usage{InputTokens: int64(n)}}, nil
	})
	m := &Model{Config: ModelConfig{Name: "m", ContextWindow: window, MaxOutputTokens: 200}, Provider: llm}
	s := &strays{grace: time.Second}
	log := slog.New(slog.DiscardHandler)
	msgs := []Message{{Type: TypeSystem, Content: "S"}}
	for i := range 12 {
		msgs = append(msgs, human(long(fmt.Sprint("h", i), 100)), ai(long(fmt.Sprint("a", i), 100)))
	}
	msgs = append(msgs, human("last"))

	// The first call overflows on the uncalibrated estimate and is
	// retried with a stricter one.
	if _, rep, err := callFitted(context.Background(), s, log, m, Request{Messages: msgs}, nil); err != nil || !rep.Trimmed() {
		t.Fatalf("first call: %+v, %v", rep, err)
	}
	if len(sent) != 2 || sent[0] <= window || sent[1] > window {
		t.Fatalf("requests of %v tokens, want one refused and a retry that fits", sent)
	}
	sent = nil
	for range 3 {
		if _, _, err := callFitted(context.Background(), s, log, m, Request{Messages: msgs}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(sent) != 3 {
		t.Errorf("requests %v, want 3 without retries once calibrated", sent)
	}
	if r := m.gauge.ratio(); r < 1.8 || r > 2.2 {
		t.Errorf("ratio %v, want about 2", r)
	}
}

// TestCallFittedExplainsAnUnknownWindow: without context_window, a
// provider's refusal reads in plain words with what to configure.
func TestCallFittedExplainsAnUnknownWindow(t *testing.T) {
	llm := llmFunc(func(context.Context, Request, func(string)) (Response, error) {
		return Response{}, fmt.Errorf("%w: gpt: HTTP 400 Bad Request: maximum context length exceeded: %w", ErrProvider, ErrContextLength)
	})
	m := &Model{Config: ModelConfig{Name: "gpt"}, Provider: llm}
	_, _, err := callFitted(context.Background(), &strays{grace: time.Second}, slog.New(slog.DiscardHandler), m, Request{Messages: []Message{human("hi")}}, nil)
	if !errors.Is(err, ErrProvider) || !strings.Contains(err.Error(), "set context_window for this model") || !strings.Contains(err.Error(), "HTTP 400") {
		t.Errorf("err %v, want the plain explanation and the provider's words", err)
	}
}
