package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
// task tool (SPEC §4.3): from the moment a subagent's loop has returned its
// terminal outcome (Execution.decidedAt) to the moment the blocking
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
					o, release := env.rt.exec.delegate(r.scope(), call)
					returned := time.Now()
					e := benchExecution(env, r, call.ID)
					if o.Status != StatusCompleted || e == nil || e.decidedAt.IsZero() {
						b.Errorf("task %s: status %s (%s), execution found %v", call.ID, o.Status, o.Error, e != nil)
						return
					}
					mu.Lock()
					lat = append(lat, returned.Sub(e.decidedAt))
					mu.Unlock()
					r.finishTask(call, o, release)
				})
			}
			wg.Wait()
		}

		b.StopTimer()
		r.end(models.RunCompleted, "")
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
}

// benchRun starts a run by hand, as Runtime.Start does, without a lead
// loop: the benchmark plays the lead and calls delegate itself.
func benchRun(b *testing.B, env *benchEnv) *run {
	b.Helper()
	rt := env.rt
	r := &run{
		env: &rt.runEnv, release: rt.release, id: rt.newID(), threadID: env.thread, userID: "u1", model: rt.defModel,
		done: make(chan struct{}), usage: map[string]models.UsageEntry{},
	}
	r.ctx, r.cancel = context.WithCancelCause(rt.base)
	if err := r.begin(context.Background(), rt.newID(), "benchmark"); err != nil {
		b.Fatal(err)
	}
	return r
}

// benchExecution finds the execution of taskID; it is in the registry
// until its ToolMessage is persisted (release).
func benchExecution(env *benchEnv, r *run, taskID string) *Execution {
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

// Figures of BenchmarkThousandSubagents, also checked by it.
const (
	benchSubagentTurns = 5                          // LLM calls per subagent
	benchStepsPerTask  = 2*benchSubagentTurns - 1   // 5 ai steps + 4 tool steps
	benchEventsPerTask = benchStepsPerTask + 2      // + subagent.start, subagent.end
	benchRowsPerTask   = benchEventsPerTask + 1 + 5 // + the ToolMessage, 5 ledger rows
)

// BenchmarkThousandSubagents drives 1,000 demo subagents through the
// executor from one lead response: the lead's message lists 1,000 items,
// the demo lead answers with one task call per item, and every subagent
// makes 5 demo LLM calls of 20 ms each (4 with a workspace tool call, then
// its answer), so the ideal critical path is 0.1 s.
//
// "workspace-tools" is the benchmark of the bar: the tool calls run the
// real workspace tools on disk (write_file, ls, read_file, write_file, all
// under the thread's one notes/ directory). "stub-tools" offers the same
// tools but answers every call at once, so the two side by side tell the
// engine's share (executor, events, Writer) from the file system's.
//
// wall-s is the time from the lead's response (the demo provider returning
// it) to the 1,000th task ToolMessage committed, followed by a Writer
// flush; everything each subagent persists (start, 9 steps, end, 5 ledger
// rows) is committed before its ToolMessage. rows is what was committed in
// that window, subagent-events the subagent.* rows among them. peak-RSS-MiB
// is VmHWM of the whole test binary, reset (clear_refs) at the start of
// the iteration after a GC; it includes the Go runtime, the SQLite page
// cache and everything else the process holds.
//
// ns/op covers the whole run (start to run.end, including the lead's
// summary call after the last result), not only the wall-s window.
func BenchmarkThousandSubagents(b *testing.B) {
	b.Run("workspace-tools", func(b *testing.B) { benchThousand(b, tools.Workspace()) })
	b.Run("stub-tools", func(b *testing.B) {
		var stubs []tools.Tool
		for _, t := range tools.Workspace() {
			stubs = append(stubs, stubTool{t})
		}
		benchThousand(b, stubs)
	})
}

// stubTool offers a tool's spec but answers every call at once.
type stubTool struct{ tools.Tool }

func (t stubTool) Run(context.Context, tools.Env, json.RawMessage) (string, error) {
	return "ok: " + t.Spec().Name + " (stub)", nil
}

func benchThousand(b *testing.B, tools []tools.Tool) {
	var (
		wall    time.Duration
		rows    int64
		events  int64
		peakRSS int64
	)
	for range b.N {
		b.StopTimer()
		var (
			committed atomic.Int64
			subEvents atomic.Int64
			results   atomic.Int64
			lastDone  = make(chan struct{})
		)
		onCommit := func(recs []models.Record) {
			committed.Add(int64(len(recs)))
			for _, r := range recs {
				switch {
				case r.Event != nil && r.Event.Category == models.CategorySubagent:
					subEvents.Add(1)
				case r.Message != nil && r.Message.Type == TypeTool && r.Message.Name == ToolTask:
					if results.Add(1) == benchTasks {
						close(lastDone)
					}
				}
			}
		}
		var (
			leadAt                   time.Time
			rowsAtLead, eventsAtLead int64
			leadOnce                 sync.Once
		)
		demo := NewDemo(ModelConfig{Name: "demo", Provider: "demo", Model: "demo", LatencyMS: 20}, WithDemoSubagentTurns(benchSubagentTurns))
		clocked := llmFunc(func(ctx context.Context, req Request, onDelta func(string)) (Response, error) {
			resp, err := demo.Complete(ctx, req, onDelta)
			if _, lead := demoFindTool(req.Tools, ToolTask); lead && err == nil {
				leadOnce.Do(func() {
					rowsAtLead, eventsAtLead = committed.Load(), subEvents.Load()
					leadAt = time.Now()
				})
			}
			return resp, err
		})
		sub := SubagentsConfig{
			TimeoutSeconds: 600, MaxRunning: benchTasks, MaxConcurrentPerResponse: benchTasks, MaxTotalPerRun: benchTasks,
			QueueTimeoutSeconds: 600, SafetyMarginSeconds: 60, CancelGraceSeconds: 5, LoopLimit: 3,
		}
		env := newBenchEnv(b, model("demo", clocked), sub, tools, onCommit)
		var msg strings.Builder
		msg.WriteString("Research each of these topics:\n")
		for k := range benchTasks {
			fmt.Fprintf(&msg, "- Topic number %d of the benchmark\n", k+1)
		}
		runtime.GC()
		debug.FreeOSMemory()
		if err := resetPeakRSS(); err != nil {
			b.Logf("peak RSS is the process's since it started: %v", err)
		}
		b.StartTimer()

		if _, err := env.rt.Start(context.Background(), StartRequest{ThreadID: env.thread, UserID: "u1", Content: msg.String()}); err != nil {
			b.Fatal(err)
		}
		select {
		case <-lastDone:
		case <-time.After(5 * time.Minute):
			b.Fatalf("only %d of %d ToolMessages committed after 5 minutes", results.Load(), benchTasks)
		}
		if err := env.writer.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		stop := time.Now()
		rowsAtStop, eventsAtStop := committed.Load(), subEvents.Load()
		rss := peakRSSBytes(b)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := env.rt.Wait(ctx, env.thread); err != nil {
			b.Fatalf("run did not end: %v", err)
		}
		cancel()

		b.StopTimer()
		wall += stop.Sub(leadAt)
		rows += rowsAtStop - rowsAtLead
		events += eventsAtStop - eventsAtLead
		peakRSS = max(peakRSS, rss)
		if n := rowsAtStop - rowsAtLead; n < benchTasks*benchRowsPerTask {
			b.Fatalf("%d rows committed after the lead's response, want at least %d", n, benchTasks*benchRowsPerTask)
		}
		checkThousand(b, env)
		env.close(b)
		b.StartTimer()
	}
	b.ReportMetric(wall.Seconds()/float64(b.N), "wall-s")
	b.ReportMetric(float64(rows)/float64(b.N), "rows")
	b.ReportMetric(float64(events)/float64(b.N), "subagent-events")
	b.ReportMetric(float64(peakRSS)/(1<<20), "peak-RSS-MiB")
}

// checkThousand fails the benchmark unless every task succeeded and left
// exactly the rows the demo makes.
func checkThousand(b *testing.B, env *benchEnv) {
	b.Helper()
	ctx := context.Background()
	msgs, err := env.store.Messages(ctx, env.thread)
	if err != nil {
		b.Fatal(err)
	}
	results := 0
	for _, m := range msgs {
		if m.Type == TypeTool && m.Name == ToolTask {
			results++
			if !strings.HasPrefix(m.Content, "Task Succeeded") {
				b.Fatalf("task %s: %.200q, want Task Succeeded", m.ToolCallID, m.Content)
			}
		}
	}
	if results != benchTasks {
		b.Fatalf("%d task ToolMessages, want %d", results, benchTasks)
	}
	count := func(types ...string) int {
		es, _, err := env.store.Events(ctx, env.thread, models.EventFilter{EventTypes: types})
		if err != nil {
			b.Fatal(err)
		}
		return len(es)
	}
	if got, want := count(EventSubagentStep), benchTasks*benchStepsPerTask; got != want {
		b.Fatalf("%d subagent.step rows, want %d", got, want)
	}
	if got, want := count(EventSubagentStart, EventSubagentStep, EventSubagentEnd, EventSubagentQueued), benchTasks*benchEventsPerTask; got != want {
		b.Fatalf("%d subagent.* rows, want %d (none queued)", got, want)
	}
	rep, err := env.store.Usage(ctx, env.thread, "")
	if err != nil {
		b.Fatal(err)
	}
	if got, want := rep.Subagents.Calls, int64(benchTasks*benchSubagentTurns); got != want {
		b.Fatalf("%d subagent calls in the ledger, want %d", got, want)
	}
}

// resetPeakRSS resets the process's VmHWM to its current RSS (Linux ≥ 4.0;
// without it VmHWM stays the peak since the process started).
func resetPeakRSS() error {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSSBytes reads VmHWM, the peak resident set of the whole process.
func peakRSSBytes(b *testing.B) int64 {
	b.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}
