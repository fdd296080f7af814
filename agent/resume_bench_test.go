package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"herd/agent"
	"herd/agent/tools"
	"herd/models"
)

// BenchmarkResumeThousand measures the resume of 1,000 unfinished
// subagents after a deploy's stop (docs/DESIGN.md §11; issue 24's bar:
// all running again within 2 s). Each iteration builds the state on a
// fresh SQLite file: runs whose lead delegates 1,000 tasks in all, every
// subagent makes one model call with a tool call (a step and its
// checkpoint piece, then the tool's result and its piece) and blocks in
// its second call; then the runtime stops with Runtime.Release, as
// main's shutdown does with runs.resume on, and the writer and the store
// close. Timed: a fresh Runtime on the store reopened, as a restarted
// herd builds it, reads the running runs and calls Continue (cause
// restart) until every one of the 1,000 subagents has made its next model
// call (the provider counts them and signals the last: no polling).
//
// "runs-N" is N runs on N threads of one user, 1,000/N tasks each:
// resume reads each run's events, messages, checkpoints and usage and
// commits its run.resumed, one run after another, so N is what its time
// grows with ("runs-1000": a subagent per run, as 1,000 users' runs).
// Metrics: running-ms (Continue's start to the 1,000th call),
// continue-ms (until Continue returned; the subagents' calls go on in
// their goroutines) and reads-ms (the share of continue-ms spent in
// resume's reads), medians over the iterations.
func BenchmarkResumeThousand(b *testing.B) {
	for _, runs := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("runs-%d", runs), func(b *testing.B) { benchResume(b, runs) })
	}
}

func benchResume(b *testing.B, runs int) {
	const tasks = agent.BenchTasks
	perRun := tasks / runs
	var running, cont, readTimes []time.Duration
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		sub := agent.SubagentsConfig{
			TimeoutSeconds: 3600, MaxRunning: tasks, MaxRunningPerUser: tasks, MaxConcurrentPerResponse: perRun, MaxTotalPerRun: perRun,
			QueueTimeoutSeconds: 3600, SafetyMarginSeconds: 60, CancelGraceSeconds: 5, LoopLimit: 3,
		}
		var stubs []tools.Tool
		for _, t := range tools.Workspace() {
			stubs = append(stubs, stubTool{t})
		}
		newRuntime := func(store *models.Store, w *models.Writer, llm agent.LLMFunc) *agent.Runtime {
			rt, err := agent.New(agent.Options{
				Models: []*agent.Model{agent.TestModel("bench", llm)}, Subagents: sub,
				Lead:          agent.LeadConfig{MaxTurns: 5, MaxActiveRunsPerUser: runs},
				WorkspaceRoot: filepath.Join(dir, "ws"), Tools: stubs, Journal: w, History: store,
				Resume: agent.ResumeConfig{Enabled: true, MaxResumes: 3},
			})
			if err != nil {
				b.Fatal(err)
			}
			return rt
		}
		openStore := func() (*models.Store, *models.Writer) {
			store, err := models.Open(filepath.Join(dir, "herd.db"), models.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return store, store.NewWriter(models.WriterOptions{})
		}

		// Before the stop: every subagent blocked in its second call.
		var blocked atomic.Int64
		allBlocked := make(chan struct{})
		var fresh atomic.Int64 // a first call after the restart: not resumed
		before := resumeLLM(perRun, nil, func() {
			if blocked.Add(1) == tasks {
				close(allBlocked)
			}
		})
		store, w := openStore()
		rt := newRuntime(store, w, before)
		ctx := context.Background()
		for k := range runs {
			th, err := store.CreateThread(ctx, "u1", fmt.Sprintf("resume %d", k))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := rt.Start(ctx, agent.StartRequest{ThreadID: th.ID, UserID: "u1", Content: "Delegate."}); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-allBlocked:
		case <-time.After(5 * time.Minute):
			b.Fatalf("only %d of %d subagents reached their second call", blocked.Load(), tasks)
		}
		stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
		if n, err := rt.Release(stopCtx); err != nil || n != runs {
			b.Fatalf("release: %d runs, %v; want %d", n, err, runs)
		}
		cancel()
		if err := w.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		w.Close()
		if err := store.Close(); err != nil {
			b.Fatal(err)
		}

		// The restart.
		var again atomic.Int64
		allRunning := make(chan struct{})
		after := resumeLLM(perRun, &fresh, func() {
			if again.Add(1) == tasks {
				close(allRunning)
			}
		})
		store, w = openStore()
		b.StartTimer()
		start := time.Now()
		rt = newRuntime(store, w, after)
		rows, err := store.RunningRuns(ctx)
		if err != nil {
			b.Fatal(err)
		}
		reads := &timedReads{Store: store}
		resumed, closed, err := rt.Continue(ctx, reads, rows, agent.ResumeRestart)
		if err != nil {
			b.Fatal(err)
		}
		continued := time.Since(start)
		if resumed != runs || closed != 0 {
			b.Fatalf("resumed %d runs and closed %d, want %d and 0", resumed, closed, runs)
		}
		select {
		case <-allRunning:
		case <-time.After(time.Minute):
			b.Fatalf("only %d of %d subagents made their next call", again.Load(), tasks)
		}
		running = append(running, time.Since(start))
		cont = append(cont, continued)
		readTimes = append(readTimes, reads.total)
		b.StopTimer()

		if n := fresh.Load(); n > 0 {
			b.Fatalf("%d first calls after the restart: runs or subagents started over instead of resuming", n)
		}
		stopCtx, cancel = context.WithTimeout(ctx, time.Minute)
		if err := rt.Shutdown(stopCtx); err != nil {
			b.Fatal(err)
		}
		cancel()
		if n := again.Load(); n != tasks {
			b.Fatalf("%d subagent calls after the restart, want %d: one per subagent", n, tasks)
		}
		w.Close()
		if err := store.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(medianMS(running), "running-ms")
	b.ReportMetric(medianMS(cont), "continue-ms")
	b.ReportMetric(medianMS(readTimes), "reads-ms")
}

// timedReads is the store as resume reads it, timing the reads it makes
// per run (events, messages, checkpoints, usage): reads-ms is their sum,
// the rest of continue-ms is building the runs and committing each one's
// run.resumed.
type timedReads struct {
	*models.Store
	total time.Duration // Continue reads one run after another
}

func (s *timedReads) Events(ctx context.Context, threadID string, f models.EventFilter) ([]models.RunEvent, bool, error) {
	defer s.time(time.Now())
	return s.Store.Events(ctx, threadID, f)
}

func (s *timedReads) Messages(ctx context.Context, threadID string) ([]models.Message, error) {
	defer s.time(time.Now())
	return s.Store.Messages(ctx, threadID)
}

func (s *timedReads) Checkpoints(ctx context.Context, runID string) ([]models.Checkpoint, error) {
	defer s.time(time.Now())
	return s.Store.Checkpoints(ctx, runID)
}

func (s *timedReads) Usage(ctx context.Context, threadID, runID string) (models.UsageReport, error) {
	defer s.time(time.Now())
	return s.Store.Usage(ctx, threadID, runID)
}

func (s *timedReads) time(start time.Time) { s.total += time.Since(start) }

// resumeLLM is the provider of BenchmarkResumeThousand: a lead's first
// call delegates perRun tasks; a subagent's first call asks for a tool
// (read_file, answered at once); any later call, the lead's or a
// subagent's, blocks until its context ends, after next for a
// subagent's. After a restart (fresh set) a first call is counted in
// fresh: what resumes from its checkpoint never makes one.
func resumeLLM(perRun int, fresh *atomic.Int64, next func()) agent.LLMFunc {
	var ids atomic.Int64
	return func(ctx context.Context, req agent.Request, _ func(string)) (agent.Response, error) {
		callID := fmt.Sprintf("c%d", ids.Add(1))
		usage := &agent.Usage{InputTokens: 200, OutputTokens: 40, TotalTokens: 240}
		first := true
		for _, m := range req.Messages {
			if m.Type == agent.TypeAI {
				first = false
			}
		}
		if first && fresh != nil {
			fresh.Add(1)
		}
		switch {
		case first && agent.IsLead(req):
			calls := make([]agent.ToolCall, perRun)
			for k := range calls {
				args, _ := json.Marshal(map[string]string{"description": fmt.Sprintf("topic %d", k), "prompt": fmt.Sprintf("Look into topic %d and write down what you find.", k), "subagent_type": "general-purpose"})
				calls[k] = agent.ToolCall{ID: fmt.Sprintf("call_%04d", k), Name: agent.ToolTask, Args: args}
			}
			return agent.Response{CallID: callID, ToolCalls: calls, Usage: usage}, nil
		case first:
			return agent.Response{CallID: callID, Text: "Reading the notes first.", ToolCalls: []agent.ToolCall{{ID: "toolu_1", Name: "read_file", Args: json.RawMessage(`{"path":"notes/topic.md"}`)}}, Usage: usage}, nil
		}
		if !agent.IsLead(req) {
			next()
		}
		<-ctx.Done()
		return agent.Response{}, context.Cause(ctx)
	}
}

// medianMS is the median of ds in milliseconds.
func medianMS(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[len(s)/2].Microseconds()) / 1000
}
