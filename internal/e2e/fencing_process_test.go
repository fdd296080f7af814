package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd/internal/pgtest"
)

// Fencing and outages on PostgreSQL (docs/DESIGN.md §14): an instance
// that lost its lease never writes again, and an outage of the database,
// however long, costs no instance and no run.

// runEnds are a thread's run.end events with what they say.
type runEnds struct {
	Events []struct {
		Seq     int64  `json:"seq"`
		RunID   string `json:"run_id"`
		TaskID  string `json:"task_id"`
		Type    string `json:"event_type"`
		Content struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"content"`
	} `json:"events"`
}

func (c *client) events(threadID, types string) runEnds {
	var p runEnds
	c.call("GET", "/api/threads/"+threadID+"/events?limit=1000&event_types="+types, nil, &p)
	return p
}

// oneTerminalEach fails t unless the thread has exactly one run.end and
// one subagent.end per card, and its seqs run 1..n without a gap.
func oneTerminalEach(t *testing.T, c *client, threadID string) {
	t.Helper()
	if ends := c.events(threadID, "run.end"); len(ends.Events) != 1 {
		t.Errorf("thread %s: %d run.end events, want 1", threadID, len(ends.Events))
	}
	perTask := map[string]int{}
	for _, e := range c.events(threadID, "subagent.end").Events {
		perTask[e.TaskID]++
	}
	var state threadState
	c.call("GET", "/api/threads/"+threadID, nil, &state)
	for _, task := range state.Tasks {
		if perTask[task.TaskID] != 1 {
			t.Errorf("thread %s: card %s has %d subagent.end events, want 1", threadID, task.TaskID, perTask[task.TaskID])
		}
	}
	seqs := allSeqs(c, threadID)
	for i := int64(1); i <= int64(len(seqs)); i++ {
		if _, ok := seqs[i]; !ok {
			t.Errorf("thread %s: seq %d missing of %d", threadID, i, len(seqs))
		}
	}
}

// waitLog waits until p's log has want, or fails t after timeout.
func waitLog(t *testing.T, p *proc, want string, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !strings.Contains(p.log.String(), want); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log within %v:\n%s", want, timeout, p.log.String())
		}
	}
}

// TestClusterFrozenInstanceIsFenced: A is frozen (SIGSTOP) with four
// runs of subagents in flight, past its lease; B takes them over and
// finishes them. When A continues, everything it still had in hand is
// refused by the database: not one record more of those runs (one run
// end, one end per card, the same seqs), and A stays up, rejoins and
// serves a new run.
func TestClusterFrozenInstanceIsFenced(t *testing.T) {
	dsn := pgtest.DSN(t)
	env := clusterEnv(dsn, "HERD_LEAD_MAX_ACTIVE_RUNS_PER_USER=10")
	a := startHerdWith(t, t.TempDir(), env...)
	b := startHerdWith(t, t.TempDir(), env...)
	ca, cb := a.signIn(), b.signIn()
	var threads []string
	for range 4 {
		threads = append(threads, runningSubagents(ca))
	}
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	const lease = 3 * time.Second
	for _, th := range threads {
		waitRunEnd(t, cb, th, lease+60*time.Second)
	}
	t.Logf("B finished A's runs %v after the freeze", time.Since(stopped))
	before := map[string]map[int64]string{}
	for _, th := range threads {
		before[th] = allSeqs(cb, th)
	}
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitLog(t, a, "rejoined with a new lease", 20*time.Second)
	// A new run on A ends: A is up, and its writer, first in first out,
	// has tried everything it held from before the freeze.
	var th struct{ ID string }
	ca.call("POST", "/api/threads", map[string]string{"title": "after"}, &th)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, body := ca.status("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": "hello"})
		if code == http.StatusAccepted {
			break
		}
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("a new run on A after the rejoin: %d %s", code, body)
		}
	}
	waitRunEnd(t, ca, th.ID, 30*time.Second)
	for _, th := range threads {
		after := allSeqs(cb, th)
		if len(after) != len(before[th]) {
			t.Errorf("thread %s: %d records after A continued, %d before: A wrote after it was fenced", th, len(after), len(before[th]))
		}
		oneTerminalEach(t, cb, th)
		// B resumed the run and ended it: completed, not A's cancel.
		for _, e := range cb.events(th, "run.end").Events {
			if e.Content.Status != "completed" {
				t.Errorf("thread %s: run end %+v, want B's completed", th, e.Content)
			}
		}
	}
	if !strings.Contains(a.log.String(), "refused the records of runs this instance no longer owns") {
		t.Logf("A had nothing in hand to refuse:\n%s", a.log.String())
	}
	stopHerd(t, a)
	stopHerd(t, b)
}

// TestClusterDatabaseOutages: three instances on a PostgreSQL of the
// test's own, each with a run of subagents in flight, while the database
// is stopped for 5, 9 and 30 s (the lease is 10 s). Every instance stays
// up, every run completes (none closed as lost, none closed twice), and
// each thread's log is whole.
func TestClusterDatabaseOutages(t *testing.T) {
	t.Parallel() // it mostly waits: beside the others
	pg := pgtest.Private(t)
	env := append(pgEnv(pg.DSN), "HERD_CLUSTER_LEASE_SECONDS=10", "HERD_CLUSTER_RENEW_SECONDS=3", "HERD_LEAD_MAX_ACTIVE_RUNS_PER_USER=10")
	var ps []*proc
	var cs []*client
	for range 3 {
		p := startHerdWith(t, t.TempDir(), env...)
		ps = append(ps, p)
		cs = append(cs, p.signIn())
	}
	for _, outage := range []time.Duration{5 * time.Second, 9 * time.Second, 30 * time.Second} {
		t.Run(fmt.Sprint(outage), func(t *testing.T) {
			var threads []string
			for _, c := range cs {
				threads = append(threads, runningSubagents(c))
			}
			if err := pg.Halt(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(outage) // the outage itself
			if err := pg.Resume(); err != nil {
				t.Fatal(err)
			}
			for i, th := range threads {
				waitRunEnd(t, cs[i], th, 60*time.Second)
			}
			for i, th := range threads {
				oneTerminalEach(t, cs[i], th)
				for _, e := range cs[i].events(th, "run.end").Events {
					if e.Content.Status != "completed" {
						t.Errorf("instance %d's run: %+v, want completed", i, e.Content)
					}
				}
			}
			for i, p := range ps {
				select {
				case err := <-p.done:
					t.Fatalf("instance %d exited: %v\n%s", i, err, p.log.String())
				default:
				}
				if n := strings.Count(p.log.String(), "instance lost"); n > 0 {
					t.Errorf("instance %d logged %d runs as lost:\n%s", i, n, p.log.String())
				}
			}
		})
	}
	for _, p := range ps {
		stopHerd(t, p)
	}
}
