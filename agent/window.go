package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"

	"herd/agent/tools"
)

// A conversation is fitted into its model's context window before each
// call (docs/DESIGN.md §3): tokens are estimated from the bytes, the
// estimate is calibrated from the input tokens the provider reports, and
// the oldest turns are left out when the request would not fit.
const (
	// bytesPerToken is the estimate's rate: about four bytes a token for
	// English text with the BPE tokenizers of OpenAI, Anthropic and Llama;
	// code, other scripts and JSON run denser, which calibration learns.
	bytesPerToken = 4
	// messageOverhead is what a message costs beyond its text: the role
	// and the separators of the chat template.
	messageOverhead = 4
	// toolOverhead is what a tool definition costs beyond its JSON.
	toolOverhead = 8
	// marginDivisor keeps 1/16 of the window free for the estimate's error.
	marginDivisor = 16
	// outputDivisor reserves 1/8 of the window for the answer when
	// max_output_tokens is unset (and so nothing caps the answer).
	outputDivisor = 8
	// minCalibrationTokens: a request this small says little about the
	// ratio, mostly template overhead.
	minCalibrationTokens = 64
	// The ratio stays within these bounds whatever a provider reports:
	// no real tokenizer is far outside them, and a provider that
	// under-reports (the demo counts no tool definitions) cannot make
	// the estimate useless.
	minRatio, maxRatio = 0.5, 4.0
	// overflowRatioStep raises the ratio when a provider refused a
	// request the estimate said would fit: that estimate was far off, so
	// the retry assumes twice the tokens; reported usage brings the ratio
	// back down.
	overflowRatioStep = 2
)

// ErrContextLength is wrapped by a provider error that says the request
// was longer than the model's context window.
var ErrContextLength = errors.New("context window exceeded")

// errTooLong is the cause of a call not made: even the system prompt and
// the latest turn do not fit the window.
var errTooLong = errors.New("conversation does not fit the context window")

// gauge learns, per model, how many of the provider's tokens one
// estimated token is: the ratio of the input tokens a call reported to
// the estimate of that call's request. Each report moves the ratio half
// way to what it observed (an average that forgets old calls), so one odd
// request cannot swing it, and the next request's estimate is closer. The
// zero gauge has ratio 1.
type gauge struct {
	bits atomic.Uint64 // math.Float64bits of the ratio; 0 means 1
}

func (g *gauge) ratio() float64 {
	if b := g.bits.Load(); b != 0 {
		return math.Float64frombits(b)
	}
	return 1
}

func (g *gauge) set(r float64) {
	g.bits.Store(math.Float64bits(min(max(r, minRatio), maxRatio)))
}

// learn calibrates from one call: estimated is the raw estimate of the
// request sent, u the usage reported for it (nil when none was).
func (g *gauge) learn(estimated int, u *Usage) {
	if u == nil || u.InputTokens <= 0 || estimated < minCalibrationTokens {
		return
	}
	observed := float64(u.InputTokens) / float64(estimated)
	g.set((g.ratio() + observed) / 2)
}

// overflowed raises the ratio after a provider refused a request as too
// long, so that the retry leaves out more.
func (g *gauge) overflowed() { g.set(g.ratio() * overflowRatioStep) }

// estimateMessage is a message's raw token estimate.
func estimateMessage(m Message) int {
	n := len(m.Content) + len(m.Name) + len(m.ToolCallID)
	for _, c := range m.ToolCalls {
		n += len(c.ID) + len(c.Name) + len(c.Args)
	}
	t := (n+bytesPerToken-1)/bytesPerToken + messageOverhead
	for _, img := range m.Images {
		t += imageTokens(img)
	}
	return t
}

// imageTokens is an image's estimate: Anthropic's rule, a token per 750
// pixels (1,590 for 1092×1092); OpenAI's high detail counts fewer, so the
// estimate errs on the side that fits.
func imageTokens(img Image) int {
	return (img.Width*img.Height + 749) / 750
}

// estimateTools is the raw token estimate of the tool definitions, which
// every request carries.
func estimateTools(specs []tools.Spec) int {
	n := 0
	for _, s := range specs {
		n += (len(s.Name)+len(s.Description)+len(s.Parameters)+bytesPerToken-1)/bytesPerToken + toolOverhead
	}
	return n
}

// window is a model's context window as the trimming sees it.
type window struct {
	size, output, margin int
}

func windowOf(c ModelConfig) window {
	out := c.MaxOutputTokens
	if out <= 0 {
		out = c.ContextWindow / outputDivisor
	}
	return window{size: c.ContextWindow, output: out, margin: c.ContextWindow / marginDivisor}
}

// budget is the prompt's share of the window, in provider tokens.
func (w window) budget() int { return w.size - w.output - w.margin }

// fitReport says what a request left out. Turns count the conversation's
// units (a human message; an AI message with its tool results), the
// system prompt not included.
type fitReport struct {
	Sent, Total int
	Estimate    int // raw estimate of the request as sent
}

// Trimmed says whether turns were left out.
func (f fitReport) Trimmed() bool { return f.Sent < f.Total }

// turn is one unit of trimming: msgs[start:end].
type turn struct{ start, end, cost int }

// splitTurns cuts a conversation (without its system prompt) into turns:
// each AI message owns the tool results that follow it, so a call and
// its results are kept or left out together (providers refuse a result
// without its call and a call without its results).
func splitTurns(msgs []Message) []turn {
	var out []turn
	for i, m := range msgs {
		c := estimateMessage(m)
		if m.Type == TypeTool && len(out) > 0 {
			out[len(out)-1].end, out[len(out)-1].cost = i+1, out[len(out)-1].cost+c
			continue
		}
		out = append(out, turn{start: i, end: i + 1, cost: c})
	}
	return out
}

// fitMessages returns the messages of a request that fit rawBudget
// estimated tokens together with fixed (the tools' estimate). msgs[0] is
// the system prompt. Always kept: the system prompt, the latest human
// message and the latest turn (the newest tool results a model must see
// to go on). Left out first: the oldest turns before the latest human
// message, then the oldest turns after it; a kept history always starts
// with a human message, as some providers require. When even what is
// always kept does not fit, it returns an error wrapping errTooLong.
func fitMessages(msgs []Message, fixed, rawBudget int) ([]Message, fitReport, error) {
	if len(msgs) == 0 {
		return msgs, fitReport{}, nil
	}
	turns := splitTurns(msgs[1:])
	total := fixed + estimateMessage(msgs[0])
	for _, t := range turns {
		total += t.cost
	}
	rep := fitReport{Sent: len(turns), Total: len(turns), Estimate: total}
	if total <= rawBudget || len(turns) == 0 {
		return msgs, rep, nil
	}
	pinned := len(turns) - 1 // the latest human message
	for pinned > 0 && msgs[1+turns[pinned].start].Type != TypeHuman {
		pinned--
	}
	keep := make([]bool, len(turns))
	for i := range keep {
		keep[i] = true
	}
	for i := 0; i < len(turns)-1 && total > rawBudget; i++ {
		if i == pinned {
			continue
		}
		keep[i] = false
		total -= turns[i].cost
	}
	// History that now starts with an AI turn loses it too.
	for i := 0; i < pinned; i++ {
		if !keep[i] {
			continue
		}
		if msgs[1+turns[i].start].Type == TypeHuman {
			break
		}
		keep[i] = false
		total -= turns[i].cost
	}
	if total > rawBudget {
		rep.Estimate = total
		return nil, rep, errTooLong
	}
	out := []Message{msgs[0]}
	rep.Sent = 0
	for i, t := range turns {
		if keep[i] {
			out = append(out, msgs[1+t.start:1+t.end]...)
			rep.Sent++
		}
	}
	rep.Estimate = total
	return out, rep, nil
}

// fit returns req trimmed to m's context window; a model without one
// (context_window 0) gets req as it is.
func (m *Model) fit(req Request) (Request, fitReport, error) {
	fixed := estimateTools(req.Tools)
	w := windowOf(m.Config)
	if w.size <= 0 {
		_, rep, _ := fitMessages(req.Messages, fixed, math.MaxInt)
		return req, rep, nil
	}
	r := m.gauge.ratio()
	msgs, rep, err := fitMessages(req.Messages, fixed, int(float64(w.budget())/r))
	if err != nil {
		return req, rep, fmt.Errorf("%w: the system prompt, the latest message and the latest tool results need about %d tokens, "+
			"more than the %d that model %s leaves for the prompt (context_window %d, less %d for the answer and %d margin)",
			err, int(float64(rep.Estimate)*r), w.budget(), m.Config.Name, w.size, w.output, w.margin)
	}
	req.Messages = msgs
	return req, rep, nil
}

// callFitted fits req into m's window, calls m (strays.complete) and
// calibrates m's gauge from the usage reported. A provider that refuses
// the request as too long is asked once more with a stricter estimate when
// the window is known; when it is not, the error says what to configure.
func callFitted(ctx context.Context, s *strays, log *slog.Logger, m *Model, req Request, onDelta func(string)) (Response, fitReport, error) {
	for retried := false; ; retried = true {
		sent, rep, err := m.fit(req)
		if err != nil {
			return Response{}, rep, err
		}
		resp, err := s.complete(ctx, log, m, sent, onDelta)
		switch {
		case err == nil:
			m.gauge.learn(rep.Estimate, resp.Usage)
			return resp, rep, nil
		case !errors.Is(err, ErrContextLength) || ctx.Err() != nil:
			return resp, rep, err
		case m.Config.ContextWindow <= 0:
			return resp, rep, fmt.Errorf("the conversation is longer than model %s can read, and its context_window is not configured: "+
				"set context_window for this model so that herd leaves out the oldest turns. The provider said: %w", m.Config.Name, err)
		case retried:
			return resp, rep, fmt.Errorf("the conversation is longer than model %s can read even with older turns left out: "+
				"its context_window (%d) may be set higher than the server allows. The provider said: %w", m.Config.Name, m.Config.ContextWindow, err)
		}
		m.gauge.overflowed()
		log.Warn("the model refused a request as too long; leaving out more turns", "model", m.Config.Name, "estimate", rep.Estimate, "err", err)
	}
}
