package agent_test

import (
	"strings"
	"sync"
	"testing"

	"herd/agent"
	"herd/agent/demo"
	"herd/agent/tools"
	"herd/models"
)

// BenchmarkCheckpointBytes measures what a subagent's checkpoint costs
// the database: the bytes of checkpoint pieces committed per subagent step
// (stored, gzipped past 1 KiB, and before compression), over a demo run of
// 4 subagents that write, list and re-read notes (the demo's default
// turns). Metrics: stored-B/step, raw-B/step, steps; and apart, the
// lead's pieces that keep its answers as they stream: their bytes per
// byte of the answers (lead-B/answer-B) and their count per run, with
// the demo streaming a word every 5 ms.
func BenchmarkCheckpointBytes(b *testing.B) {
	var (
		mu            sync.Mutex
		stored, raw   int
		steps, pieces int
		// the lead's streamed pieces, and the bytes of its answers
		leadRaw, leadPieces, answers int
	)
	count := func(recs []models.Record) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			switch {
			case r.Checkpoint != nil && r.Checkpoint.TaskID == "":
				leadPieces++
				d, err := r.Checkpoint.Data()
				if err != nil {
					b.Error(err)
				}
				leadRaw += len(d)
			case r.Message != nil && r.Message.Type == agent.TypeAI:
				answers += len(r.Message.Content)
			case r.Checkpoint != nil:
				pieces++
				stored += len(r.Checkpoint.Body)
				d, err := r.Checkpoint.Data()
				if err != nil {
					b.Error(err)
				}
				raw += len(d)
			case r.Event != nil && r.Event.EventType == "subagent.step":
				steps++
			}
		}
	}
	for range b.N {
		demoLLM := demo.New(agent.ModelConfig{Name: "demo-fast", Model: "demo-fast", LatencyMS: 1, ChunkMS: 5})
		h := agent.NewHarness(b, agent.HarnessConfig{Tools: tools.Workspace(), Models: []*agent.Model{agent.TestModel("demo-fast", demoLLM)}, OnCommit: count})
		h.Run("Please look into:\n- " + strings.Join([]string{"alpha", "beta", "gamma", "delta"}, "\n- "))
	}
	b.ReportMetric(float64(stored)/float64(steps), "stored-B/step")
	b.ReportMetric(float64(raw)/float64(steps), "raw-B/step")
	b.ReportMetric(float64(steps)/float64(b.N), "steps/run")
	b.ReportMetric(float64(pieces)/float64(b.N), "pieces/run")
	b.ReportMetric(float64(leadRaw)/float64(answers), "lead-B/answer-B")
	b.ReportMetric(float64(leadPieces)/float64(b.N), "lead-pieces/run")
}
