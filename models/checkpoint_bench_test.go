package models

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkWriterCheckpoints measures what the checkpoint pieces cost the
// Writer on the hot path (docs/DESIGN.md §11): benchRows subagent.step
// rows from benchProducers producers, once alone and once each step
// queued with its piece in the same Enqueue (as agent's emitKept does),
// side by side in each iteration, each side on a fresh database, the
// order alternating so that neither always goes first. A piece is shaped
// like the demo's (an AI message with its tool call, or a tool result,
// as JSON: ~260 bytes, BenchmarkCheckpointBytes in agent).
//
// Metrics: plain-steps/s, kept-steps/s (steps with their pieces),
// kept/plain (the ratio of steps/s; the bar is ≥ 0.9), kept-rows/s
// (steps and pieces) and piece-B (the mean piece).
func BenchmarkWriterCheckpoints(b *testing.B) {
	for _, d := range drivers {
		b.Run(d.name, func(b *testing.B) { benchWriterCheckpoints(b, d) })
	}
}

func benchWriterCheckpoints(b *testing.B, d dbDriver) {
	ctx := context.Background()
	var dur [2]time.Duration
	var pieceBytes, pieces int
	for n := range b.N {
		order := []int{0, 1}
		if n%2 == 1 {
			order = []int{1, 0}
		}
		for _, kept := range order {
			b.StopTimer()
			s, threads := benchStore(b, d)
			steps := benchStepRows(threads, benchRows)
			jobs := make([][]Record, len(steps))
			for k, r := range steps {
				jobs[k] = []Record{r}
				if kept == 1 {
					ck := benchPiece(r.Event)
					pieceBytes += len(ck.Body)
					pieces++
					jobs[k] = append(jobs[k], Record{Checkpoint: ck})
				}
			}
			w := s.NewWriter(WriterOptions{OnBatch: func(st BatchStats) {
				if st.Err != nil {
					b.Errorf("writer batch failed: %v", st.Err)
				}
			}})
			b.StartTimer()

			start := time.Now()
			var wg sync.WaitGroup
			per := len(jobs) / benchProducers
			for p := range benchProducers {
				wg.Go(func() {
					for _, j := range jobs[p*per : (p+1)*per] {
						if err := w.Enqueue(ctx, j...); err != nil {
							b.Errorf("enqueue: %v", err)
							return
						}
					}
				})
			}
			wg.Wait()
			if err := w.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			dur[kept] += time.Since(start)

			b.StopTimer()
			w.Close()
			checkStepRows(b, s, benchRows)
			var got int64
			if err := s.r.Raw("SELECT COUNT(*) FROM checkpoints").Row().Scan(&got); err != nil {
				b.Fatal(err)
			}
			if want := int64(kept * benchRows); got != want {
				b.Fatalf("stored %d checkpoint pieces, want %d", got, want)
			}
			_ = s.Close()
			b.StartTimer()
		}
	}
	total := float64(b.N * benchRows)
	plain, kept := total/dur[0].Seconds(), total/dur[1].Seconds()
	b.ReportMetric(plain, "plain-steps/s")
	b.ReportMetric(kept, "kept-steps/s")
	b.ReportMetric(kept/plain, "kept/plain")
	b.ReportMetric(2*kept, "kept-rows/s") // a step and its piece
	b.ReportMetric(float64(pieceBytes)/float64(max(pieces, 1)), "piece-B")
}

// benchPiece is the checkpoint piece of step ev (a row of benchStepRows):
// the AI message whole with its tool call, or the tool result whole, as
// agent encodes them (a JSON array of messages, format 1).
func benchPiece(ev *RunEvent) *Checkpoint {
	var c struct {
		Kind      string `json:"kind"`
		Text      string `json:"text"`
		ToolName  string `json:"tool_name"`
		Version   int    `json:"version"`
		ToolCalls []struct {
			Name string `json:"name"`
			Args string `json:"args"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(ev.Content, &c); err != nil {
		panic(err)
	}
	callID := fmt.Sprintf("toolu_%020d", c.Version/2)
	var msg map[string]any
	if c.Kind == "ai" {
		calls := make([]any, len(c.ToolCalls))
		for k, tc := range c.ToolCalls {
			calls[k] = map[string]any{"id": callID, "name": tc.Name, "args": json.RawMessage(tc.Args)}
		}
		msg = map[string]any{"type": "ai", "content": c.Text, "tool_calls": calls}
	} else {
		msg = map[string]any{"type": "tool", "content": strings.TrimSpace(c.Text), "tool_call_id": callID, "name": c.ToolName}
	}
	body, err := json.Marshal([]any{msg})
	if err != nil {
		panic(err)
	}
	return NewCheckpoint(ev.ThreadID, ev.RunID, ev.TaskID, 1, body)
}
