package models

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkWriterFence measures what fencing (WriterOptions.Fence: one
// SELECT … FOR SHARE of a batch's runs, pipelined with BEGIN and the seq
// reservations) costs the Writer on PostgreSQL, side by side in each
// iteration against the same Writer without it, each on a fresh schema:
//   - throughput: benchProducers producers Enqueue 20,000 subagent.step
//     rows of their own run (group commit);
//   - hand-off: one producer Writes 300 commits of 2 rows (a task's end
//     and its ToolMessage), its latency per commit.
//
// Metrics: fenced/plain rows/s ratio, and each side's hand-off p50 and
// p99 in µs.
func BenchmarkWriterFence(b *testing.B) {
	const rows, handoffs = 20_000, 300
	ctx := context.Background()
	var ratio []float64
	var lat = map[bool][]time.Duration{}
	for n := range b.N {
		var rate [2]float64
		order := []bool{false, true}
		if n%2 == 1 {
			order = []bool{true, false} // neither side always goes first
		}
		for _, fenced := range order {
			i := 0
			if fenced {
				i = 1
			}
			s, threads := benchStore(b, drivers[1])
			var opts WriterOptions
			if fenced {
				epoch, err := s.RegisterInstance(ctx, "bench", "", time.Hour)
				if err != nil {
					b.Fatal(err)
				}
				opts.Fence = func() Fence { return Fence{Instance: "bench", Epoch: epoch} }
				for p, th := range threads {
					r := &Run{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", p), ThreadID: th, UserID: "u1", Status: RunRunning, ModelName: "m", StartedAt: time.Now(), InstanceID: "bench", LeaseEpoch: epoch}
					if err := s.ClaimRun(ctx, r, 0); err != nil {
						b.Fatal(err)
					}
				}
			}
			w := s.NewWriter(opts)
			recs := benchStepRows(threads, rows)
			rate[i] = float64(len(recs)) / enqueueAll(b, w, recs).Seconds()
			hand := benchStepRows(threads[:1], 2*handoffs)
			for k := 0; k < len(hand); k += 2 {
				t0 := time.Now()
				if err := w.Write(ctx, hand[k], hand[k+1]); err != nil {
					b.Fatal(err)
				}
				lat[fenced] = append(lat[fenced], time.Since(t0))
			}
			w.Close()
			_ = s.Close()
		}
		ratio = append(ratio, rate[1]/rate[0])
	}
	slices.Sort(ratio)
	b.ReportMetric(ratio[len(ratio)/2], "fenced/plain")
	for fenced, name := range map[bool]string{false: "plain", true: "fenced"} {
		l := lat[fenced]
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2].Microseconds()), name+"-p50-µs")
		b.ReportMetric(float64(l[len(l)*99/100].Microseconds()), name+"-p99-µs")
	}
}
