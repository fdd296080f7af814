package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"herd/agent/tools"
	"herd/models"
)

// benchEnv is a Runtime on a fresh SQLite file, wired as main wires it.
type benchEnv struct {
	store  *models.Store
	writer *models.Writer
	rt     *Runtime
	thread string
}

// newBenchEnv builds a benchEnv; onCommit (may be nil) sees every
// committed record. close tears it down and must be called before the
// next one is built.
func newBenchEnv(b *testing.B, m *Model, sub SubagentsConfig, tools []tools.Tool, onCommit func([]models.Record)) *benchEnv {
	b.Helper()
	dir := b.TempDir()
	store, err := models.Open(filepath.Join(dir, "herd.db"), models.Options{})
	if err != nil {
		b.Fatal(err)
	}
	env := &benchEnv{store: store}
	env.writer = store.NewWriter(models.WriterOptions{OnCommit: onCommit})
	env.rt, err = New(Options{
		Models: []*Model{m}, Subagents: sub, Lead: LeadConfig{MaxTurns: 5},
		WorkspaceRoot: filepath.Join(dir, "ws"), Tools: tools, Journal: env.writer, History: store,
	})
	if err != nil {
		b.Fatal(err)
	}
	th, err := store.CreateThread(context.Background(), "u1", "bench")
	if err != nil {
		b.Fatal(err)
	}
	env.thread = th.ID
	return env
}

func (env *benchEnv) close(b *testing.B) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := env.rt.Shutdown(ctx); err != nil {
		b.Errorf("shutdown: %v", err)
	}
	env.writer.Close()
	if err := env.store.Close(); err != nil {
		b.Errorf("close store: %v", err)
	}
}

// benchTasks is the number of task calls in each benchmark iteration.
const benchTasks = 1000

// BenchmarkTaskHandoff measures the completion-to-return latency of the
// task tool (docs/DESIGN.md §5): from the moment a subagent's loop has returned its
// terminal outcome (execution.decidedAt) to the moment the blocking
// delegate returns it to the lead. That span is the real path: finish sets
// the terminal state, writes subagent.end through the Writer and waits for
// its commit, then closes done, which wakes delegate. The provider answers
// instantly, so nothing but the hand-off is timed.
//
// Each iteration runs 1,000 tasks through the executor on one run: one at
// a time ("serial"), or 4 at a time as a lead issuing the default
// max_concurrent_per_response would ("parallel-4"). After each return the
// lead's ToolMessage is persisted, as run.finishTask does, so the Writer
// sees the lead's writes too. Metrics are p50-µs, p99-µs and max-µs over
// every task of every iteration.
func BenchmarkTaskHandoff(b *testing.B) {
	for _, width := range []int{1, 4} {
		name := "serial"
		if width > 1 {
			name = fmt.Sprintf("parallel-%d", width)
		}
		b.Run(name, func(b *testing.B) { benchHandoff(b, width) })
	}
}

func benchHandoff(b *testing.B, width int) {
	instant := llmFunc(func(_ context.Context, req Request, _ func(string)) (Response, error) {
		return Response{CallID: uuid.NewString(), Text: "Done: " + req.Messages[len(req.Messages)-1].Content,
			Usage: &Usage{InputTokens: 40, OutputTokens: 8, TotalTokens: 48}, Model: "instant"}, nil
	})
	sub := SubagentsConfig{
		TimeoutSeconds: 60, MaxRunning: 32, MaxConcurrentPerResponse: width, MaxTotalPerRun: benchTasks,
		QueueTimeoutSeconds: 60, SafetyMarginSeconds: 60, CancelGraceSeconds: 5, LoopLimit: 3,
	}
	lat := make([]time.Duration, 0, b.N*benchTasks)
	var results []time.Duration
	for range b.N {
		b.StopTimer()
		env := newBenchEnv(b, model("instant", instant), sub, tools.Workspace(), nil)
		r := benchRun(b, env)
		b.StartTimer()

		var mu sync.Mutex
		for lo := 0; lo < benchTasks; lo += width {
			var wg sync.WaitGroup
			for k := lo; k < min(lo+width, benchTasks); k++ {
				wg.Go(func() {
					call := taskCall(fmt.Sprintf("call_%d", k), "Hand Off Bench", SubagentGeneral)
					o, release := env.rt.exec.delegate(r.scope(), call, func() {})
					returned := time.Now()
					e := benchExecution(env, r, call.ID)
					if o.Status != StatusCompleted || e == nil || e.decidedAt.IsZero() {
						b.Errorf("task %s: status %s (%s), execution found %v", call.ID, o.Status, o.Error, e != nil)
						return
					}
					r.finishTask(call, o, release)
					persisted := time.Now()
					mu.Lock()
					lat = append(lat, returned.Sub(e.decidedAt))
					results = append(results, persisted.Sub(e.decidedAt))
					mu.Unlock()
				})
			}
			wg.Wait()
		}

		b.StopTimer()
		r.end(ending{status: models.RunCompleted})
		r.cancel(nil)
		if n := env.rt.exec.reg.Len(); n != 0 {
			b.Errorf("registry holds %d executions after the iteration", n)
		}
		env.close(b)
		b.StartTimer()
	}
	if len(lat) != b.N*benchTasks {
		b.Fatalf("timed %d hand-offs, want %d", len(lat), b.N*benchTasks)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(percentile(lat, 50).Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(percentile(lat, 99).Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds())/1e3, "max-µs")
	slices.Sort(results)
	b.ReportMetric(float64(percentile(results, 50).Nanoseconds())/1e3, "result-p50-µs")
	b.ReportMetric(float64(percentile(results, 99).Nanoseconds())/1e3, "result-p99-µs")
}

// benchRun starts a run by hand, as Runtime.Start does, without a lead
// loop: the benchmark plays the lead and calls delegate itself.
func benchRun(b *testing.B, env *benchEnv) *run {
	b.Helper()
	rt := env.rt
	r := &run{
		env: &rt.runEnv, box: rt.cat.Load().withCommands, release: rt.release, id: rt.newID(), threadID: env.thread, userID: "u1", model: rt.cat.Load().order[0],
		done: make(chan struct{}),
	}
	r.sink = r.env.newSink(owner{r.threadID, r.userID}, r.id)
	r.ctx, r.cancel = context.WithCancelCause(rt.base)
	if err := r.begin(context.Background(), rt.newID(), "benchmark", nil); err != nil {
		b.Fatal(err)
	}
	return r
}

// benchExecution finds the execution of taskID; it is in the registry
// until its ToolMessage is persisted (release).
func benchExecution(env *benchEnv, r *run, taskID string) *execution {
	for _, e := range env.rt.exec.reg.byRun(r.id) {
		if e.TaskID == taskID {
			return e
		}
	}
	return nil
}

// percentile returns the p-th percentile of sorted d (nearest rank).
func percentile(d []time.Duration, p int) time.Duration {
	i := (len(d)*p + 99) / 100
	return d[max(i-1, 0)]
}

// BenchmarkDecodeEvent decodes a stored step as an instance of a cluster
// does for every record another instance commits (decodeEvent).
func BenchmarkDecodeEvent(b *testing.B) {
	step := []byte(`{"task_id":"call_246be7164338401fa195ce45","execution_id":"35349874-c34e-49e3-8fa8-0618eaa311cf",` +
		`"run_id":"a99b031c-27cd-425d-b47a-3c294b533d66","version":2,"message_index":1,"kind":"ai",` +
		`"text":"Writing my plan to notes/topic-18/plan.md first.","truncated":false,"tool_calls":[{"name":"write_file",` +
		`"args":"{\"content\":\"# Plan\\n\\nTask: topic 18\\n\\n1. Write down what is being asked.\\n2. Look at what the workspace already holds.\\n\",\"path\":\"notes/topic-18/plan.md\"}"}],` +
		`"usage":{"input_tokens":96,"output_tokens":102,"total_tokens":198},"model_name":"demo-fast"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeEvent(eventSubagentStep, step); err != nil {
			b.Fatal(err)
		}
	}
}
