package agent

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"herd/agent/tools"
	"herd/models"
)

// This file lends the test harness (harness_test.go) and the benchmark
// environment (bench_test.go) to the external tests of package agent_test:
// the tests that run the runtime with the demo or OpenAI provider, whose
// packages import agent and so cannot be imported by agent's own tests.

// Harness is the test harness: a Runtime on a real SQLite file.
type Harness = harness

// HarnessConfig configures NewHarness; zero fields take the harness's
// defaults (the workspace tools, the default subagent limits, the
// writer's default backoff).
type HarnessConfig struct {
	Models  []*Model
	Tools   []tools.Tool
	Backoff []time.Duration
	// NoCommands starts the runs without commands; OffReason is why.
	NoCommands bool
	OffReason  string
	// Logger is the runtime's (none: discarded); PersistTimeout bounds
	// how long a run waits for a write it must make (0: the runtime's).
	Logger         *slog.Logger
	PersistTimeout time.Duration
	// OnCommit, when set, also sees every committed batch.
	OnCommit func([]models.Record)
}

// NewHarness builds a harness that fails t if the test leaks a goroutine
// or leaves an execution in the registry.
func NewHarness(t testing.TB, c HarnessConfig) *Harness {
	t.Helper()
	return newHarness(t, harnessConfig{models: c.Models, tools: c.Tools, backoff: c.Backoff, noCommands: c.NoCommands, offReason: c.OffReason,
		logger: c.Logger, persistTO: c.PersistTimeout, onCommit: c.OnCommit})
}

func (h *harness) Runtime() *Runtime      { return h.rt }
func (h *harness) Store() *models.Store   { return h.store }
func (h *harness) Writer() *models.Writer { return h.writer }
func (h *harness) Thread() string         { return h.thread }
func (h *harness) DBPath() string         { return h.dbPath }
func (h *harness) Retries() int64         { return h.retries.Load() }
func (h *harness) Run(content string) Started {
	h.t.Helper()
	return h.run(content)
}
func (h *harness) Start(content string) Started {
	h.t.Helper()
	return h.start(content)
}

// Workspace is the harness thread's workspace directory.
func (h *harness) Workspace() string { return filepath.Join(h.rt.wsRoot, h.thread) }

// StartAttached sends content with files of the workspace attached,
// checked as the server checks them (Runtime.Attachments).
func (h *harness) StartAttached(content string, paths ...string) Started {
	h.t.Helper()
	atts, err := h.rt.Attachments(h.thread, paths)
	if err != nil {
		h.t.Fatal(err)
	}
	st, err := h.rt.Start(context.Background(), StartRequest{ThreadID: h.thread, UserID: "u1", Content: content, Attachments: atts, Commands: !h.cfg.noCommands})
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

func (h *harness) Wait() {
	h.t.Helper()
	h.wait()
}
func (h *harness) ToolMessages() map[string]models.Message { return h.toolMessages() }
func (h *harness) Events(taskID string) []models.RunEvent  { return h.events(taskID) }
func (h *harness) RunRow(id string) *models.Run            { return h.runRow(id) }

// Frames returns every record the writer committed so far, in order.
func (h *harness) Frames() []models.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]models.Record(nil), h.frames...)
}

// LLMFunc is a scripted provider.
type LLMFunc = llmFunc

var (
	// TestModel wraps a provider as a configured model named name.
	TestModel = model
	// IsLead reports whether req is the lead's: it offers the task tool.
	IsLead = isLead
	// EventTypesOf lists the event types of es, in order.
	EventTypesOf = eventTypes
	// MessageMetadata decodes a task ToolMessage's metadata.
	MessageMetadata = metadata
)

// BenchEnv is a Runtime on a fresh SQLite file for benchmarks.
type BenchEnv = benchEnv

// NewBenchEnv builds a BenchEnv; see newBenchEnv.
var NewBenchEnv = newBenchEnv

func (env *benchEnv) Runtime() *Runtime      { return env.rt }
func (env *benchEnv) Store() *models.Store   { return env.store }
func (env *benchEnv) Writer() *models.Writer { return env.writer }
func (env *benchEnv) Thread() string         { return env.thread }
func (env *benchEnv) Close(b *testing.B)     { env.close(b) }

// BenchTasks is the number of task calls in each benchmark iteration.
const BenchTasks = benchTasks

// The persisted event types, for the external tests' assertions.
const (
	EventRunEnd         = eventRunEnd
	EventSubagentQueued = eventSubagentQueued
	EventSubagentStart  = eventSubagentStart
	EventSubagentStep   = eventSubagentStep
	EventSubagentEnd    = eventSubagentEnd
)
