package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"herd/agent"
	"herd/agent/demo"
	"herd/agent/tools"
	"herd/models"
)

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

func benchThousand(b *testing.B, offered []tools.Tool) {
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
				case r.Message != nil && r.Message.Type == agent.TypeTool && r.Message.Name == agent.ToolTask:
					if results.Add(1) == agent.BenchTasks {
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
		demoLLM := demo.New(agent.ModelConfig{Name: "demo", Provider: "demo", Model: "demo", LatencyMS: 20}, demo.WithSubagentTurns(benchSubagentTurns))
		clocked := agent.LLMFunc(func(ctx context.Context, req agent.Request, onDelta func(string)) (agent.Response, error) {
			resp, err := demoLLM.Complete(ctx, req, onDelta)
			if agent.IsLead(req) && err == nil {
				leadOnce.Do(func() {
					rowsAtLead, eventsAtLead = committed.Load(), subEvents.Load()
					leadAt = time.Now()
				})
			}
			return resp, err
		})
		sub := agent.SubagentsConfig{
			TimeoutSeconds: 600, MaxRunning: agent.BenchTasks, MaxRunningPerUser: agent.BenchTasks, MaxConcurrentPerResponse: agent.BenchTasks, MaxTotalPerRun: agent.BenchTasks,
			QueueTimeoutSeconds: 600, SafetyMarginSeconds: 60, CancelGraceSeconds: 5, LoopLimit: 3,
		}
		env := agent.NewBenchEnv(b, agent.TestModel("demo", clocked), sub, offered, onCommit)
		var msg strings.Builder
		msg.WriteString("Research each of these topics:\n")
		for k := range agent.BenchTasks {
			fmt.Fprintf(&msg, "- Topic number %d of the benchmark\n", k+1)
		}
		runtime.GC()
		debug.FreeOSMemory()
		if err := resetPeakRSS(); err != nil {
			b.Logf("peak RSS is the process's since it started: %v", err)
		}
		b.StartTimer()

		if _, err := env.Runtime().Start(context.Background(), agent.StartRequest{ThreadID: env.Thread(), UserID: "u1", Content: msg.String()}); err != nil {
			b.Fatal(err)
		}
		select {
		case <-lastDone:
		case <-time.After(5 * time.Minute):
			b.Fatalf("only %d of %d ToolMessages committed after 5 minutes", results.Load(), agent.BenchTasks)
		}
		if err := env.Writer().Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		stop := time.Now()
		rowsAtStop, eventsAtStop := committed.Load(), subEvents.Load()
		rss := peakRSSBytes(b)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := env.Runtime().Wait(ctx, env.Thread()); err != nil {
			b.Fatalf("run did not end: %v", err)
		}
		cancel()

		b.StopTimer()
		wall += stop.Sub(leadAt)
		rows += rowsAtStop - rowsAtLead
		events += eventsAtStop - eventsAtLead
		peakRSS = max(peakRSS, rss)
		if n := rowsAtStop - rowsAtLead; n < agent.BenchTasks*benchRowsPerTask {
			b.Fatalf("%d rows committed after the lead's response, want at least %d", n, agent.BenchTasks*benchRowsPerTask)
		}
		checkThousand(b, env)
		env.Close(b)
		b.StartTimer()
	}
	b.ReportMetric(wall.Seconds()/float64(b.N), "wall-s")
	b.ReportMetric(float64(rows)/float64(b.N), "rows")
	b.ReportMetric(float64(events)/float64(b.N), "subagent-events")
	b.ReportMetric(float64(peakRSS)/(1<<20), "peak-RSS-MiB")
}

// checkThousand fails the benchmark unless every task succeeded and left
// exactly the rows the demo makes.
func checkThousand(b *testing.B, env *agent.BenchEnv) {
	b.Helper()
	ctx := context.Background()
	msgs, err := env.Store().Messages(ctx, env.Thread())
	if err != nil {
		b.Fatal(err)
	}
	results := 0
	for _, m := range msgs {
		if m.Type == agent.TypeTool && m.Name == agent.ToolTask {
			results++
			if !strings.HasPrefix(m.Content, "Task Succeeded") {
				b.Fatalf("task %s: %.200q, want Task Succeeded", m.ToolCallID, m.Content)
			}
		}
	}
	if results != agent.BenchTasks {
		b.Fatalf("%d task ToolMessages, want %d", results, agent.BenchTasks)
	}
	count := func(types ...string) int {
		es, _, err := env.Store().Events(ctx, env.Thread(), models.EventFilter{EventTypes: types})
		if err != nil {
			b.Fatal(err)
		}
		return len(es)
	}
	if got, want := count(agent.EventSubagentStep), agent.BenchTasks*benchStepsPerTask; got != want {
		b.Fatalf("%d subagent.step rows, want %d", got, want)
	}
	if got, want := count(agent.EventSubagentStart, agent.EventSubagentStep, agent.EventSubagentEnd, agent.EventSubagentQueued), agent.BenchTasks*benchEventsPerTask; got != want {
		b.Fatalf("%d subagent.* rows, want %d (none queued)", got, want)
	}
	rep, err := env.Store().Usage(ctx, env.Thread(), "")
	if err != nil {
		b.Fatal(err)
	}
	if got, want := rep.Subagents.Calls, int64(agent.BenchTasks*benchSubagentTurns); got != want {
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
