package agent

import (
	"sync"
	"time"
)

// registry holds live executions by execution id. An entry is removed once
// its terminal state has been delivered (the ToolMessage persisted), or by
// a janitor when it never is.
type registry struct {
	mu     sync.Mutex
	byExec map[string]*execution
}

func newRegistry() *registry { return &registry{byExec: map[string]*execution{}} }

func (g *registry) add(e *execution) {
	g.mu.Lock()
	g.byExec[e.ID] = e
	g.mu.Unlock()
}

// delivered removes e once its terminal state reached the lead.
func (g *registry) delivered(e *execution) {
	e.mu.Lock()
	if e.janitor != nil {
		e.janitor.Stop()
	}
	e.mu.Unlock()
	g.mu.Lock()
	delete(g.byExec, e.ID)
	g.mu.Unlock()
}

// janitorGrace is how long a terminal execution may wait for its delivery
// before the janitor removes it (the lead's goroutine died, say).
const janitorGrace = 2 * time.Minute

// scheduleJanitor arms the removal of a terminal execution that is never
// delivered; delivered disarms it. The caller holds e.mu.
func (g *registry) scheduleJanitor(e *execution, grace time.Duration) {
	e.janitor = time.AfterFunc(grace, func() {
		g.mu.Lock()
		_, still := g.byExec[e.ID]
		delete(g.byExec, e.ID)
		g.mu.Unlock()
		if still {
			e.log.Warn("janitor removed a terminal execution that was never delivered")
		}
	})
}

func (g *registry) all() []*execution {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*execution, 0, len(g.byExec))
	for _, e := range g.byExec {
		out = append(out, e)
	}
	return out
}

func (g *registry) byRun(runID string) []*execution {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*execution
	for _, e := range g.byExec {
		if e.RunID == runID {
			out = append(out, e)
		}
	}
	return out
}

// Len is the number of live executions.
func (g *registry) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.byExec)
}
