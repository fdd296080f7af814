package hub

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"herd/server/render"
)

// benchAnswer is a long answer as a model writes one: prose, lists and
// two code blocks, about 12 KB.
func benchAnswer() string {
	var b strings.Builder
	for i := range 6 {
		b.WriteString("## Part " + string(rune('A'+i)) + "\n\nThis part explains the **change** in a few sentences, with `inline code`, a [link](https://example.com) and some *emphasis*, as an answer would.\n\n")
		b.WriteString("- the first point of the list, with enough words to wrap\n- the second point\n- the third point, `code` in it\n\n")
		if i%3 == 0 {
			b.WriteString("```go\n")
			for j := range 25 {
				b.WriteString("func step" + string(rune('a'+j)) + "(ctx context.Context, n int) (string, error) { return fmt.Sprint(n), nil } // note\n")
			}
			b.WriteString("```\n\n")
		}
	}
	return b.String()
}

// BenchmarkLiveRender measures what rendering one streamed answer as it
// arrives costs the server: cpu-ms/op is the process's CPU for every live
// render and frame of the answer, streamed as 4-byte tokens at 50 tokens
// a second (a fake clock: the answer streams for 31 s). every-token is the
// naive alternative for comparison: a render per token. final is the one
// render of the saved message.
func BenchmarkLiveRender(b *testing.B) {
	answer := benchAnswer()
	tokens := chunks(answer, 4)
	cpu := func(b *testing.B, run func()) {
		start := cpuTime()
		for b.Loop() {
			run()
		}
		b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	}
	b.Run("throttled", func(b *testing.B) {
		var frames, bytes int
		cpu(b, func() {
			clock := time.Unix(1e9, 0)
			frames, bytes = 0, 0
			l := newLiveText(render.NewMarkdown(), func(_ string, f *frame) { frames++; bytes += len(f.full) }, func(string) bool { return true })
			l.now = func() time.Time { return clock }
			for _, tok := range tokens {
				l.append("th", "run", "m", tok, false)
				clock = clock.Add(20 * time.Millisecond)
				l.renderDue()
			}
		})
		b.ReportMetric(float64(frames), "frames/answer")
		b.ReportMetric(float64(bytes)/1024, "frame-KiB/answer")
		b.ReportMetric(float64(len(tokens)), "tokens/answer")
	})
	b.Run("every-token", func(b *testing.B) {
		cpu(b, func() {
			md := render.NewMarkdown()
			var text strings.Builder
			for _, tok := range tokens {
				text.WriteString(tok)
				md.Render(text.String())
			}
		})
	})
	b.Run("final", func(b *testing.B) {
		cpu(b, func() { render.NewMarkdownCache(0).Render(answer) })
	})
}

// cpuTime is the process's CPU time, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
