package agent

import (
	"sync"
	"time"
)

// Registry holds live executions by execution id. An entry is removed once
// its terminal state has been delivered (the ToolMessage persisted), or by
// a janitor when it never is.
type Registry struct {
	mu     sync.Mutex
	byExec map[string]*Execution
}

func newRegistry() *Registry { return &Registry{byExec: map[string]*Execution{}} }

func (g *Registry) add(e *Execution) {
	g.mu.Lock()
	g.byExec[e.ID] = e
	g.mu.Unlock()
}

// delivered removes e once its terminal state reached the lead.
func (g *Registry) delivered(e *Execution) {
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
func (g *Registry) scheduleJanitor(e *Execution, grace time.Duration) {
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

func (g *Registry) all() []*Execution {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*Execution, 0, len(g.byExec))
	for _, e := range g.byExec {
		out = append(out, e)
	}
	return out
}

func (g *Registry) byRun(runID string) []*Execution {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*Execution
	for _, e := range g.byExec {
		if e.RunID == runID {
			out = append(out, e)
		}
	}
	return out
}

// Len is the number of live executions.
func (g *Registry) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.byExec)
}
