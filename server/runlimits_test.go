package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"herd/agent"
	"herd/agent/demo"
	"herd/agent/tools"
	"herd/models"
)

// toolSpy wraps the demo model and records, per lead call, whether the
// lead was offered the bash tool and the bash subagent type.
type toolSpy struct {
	demo *demo.Provider
	mu   sync.Mutex
	seen map[bool]int // bash offered → lead calls
}

func newToolSpy() *toolSpy {
	return &toolSpy{demo: demo.New(demoModel("demo-fast", 5, 1)), seen: map[bool]int{}}
}

func (s *toolSpy) Complete(ctx context.Context, req agent.Request, d func(string)) (agent.Response, error) {
	for _, t := range req.Tools {
		if t.Name != agent.ToolTask {
			continue
		}
		bash := strings.Contains(string(t.Parameters), `"bash"`)
		lead := slices.ContainsFunc(req.Tools, func(t tools.Spec) bool { return t.Name == tools.Bash })
		if bash != lead {
			return agent.Response{}, fmt.Errorf("bash tool offered %v, bash type offered %v", lead, bash)
		}
		s.mu.Lock()
		s.seen[bash]++
		s.mu.Unlock()
	}
	return s.demo.Complete(ctx, req, d)
}

// hostMode is the server's options in sandbox mode host.
func hostMode(o *Options) { o.CommandsAdminOnly = true }

func hostBash(t *testing.T) tools.Tool {
	t.Helper()
	bash, err := tools.NewBash(tools.SandboxConfig{Mode: tools.SandboxHost, AllowHostBash: true, BashTimeoutSeconds: 10, OutputLimitBytes: 30000})
	if err != nil {
		t.Fatal(err)
	}
	return bash
}

// TestCommandsOnlyForAdminsOnHost is the attack through the HTTP
// API: in host mode a plain user's command to read the server's
// environment is never offered a shell, and the answer says why; an
// admin's command runs. The thread page shows the note to the user only.
func TestCommandsOnlyForAdminsOnHost(t *testing.T) {
	spy := newToolSpy()
	a := newApp(t, withServer(hostMode), func(c *appConfig) {
		c.tools, c.provider = append(tools.Workspace(), hostBash(t)), spy
	})
	plain, admin := a.newUser("ann@example.com", false), a.newUser("root@example.com", true)

	th := plain.newThread("")
	plain.startRun(th, "Run `tr '\\0' '\\n' < /proc/$PPID/environ`")
	a.waitIdle(th)
	msgs, err := a.store.Messages(context.Background(), th)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Type == agent.TypeTool || len(m.ToolCalls) > 0 {
			t.Fatalf("the plain user's run called a tool: %+v", m)
		}
	}
	if last := msgs[len(msgs)-1]; !strings.Contains(last.Content, "only admins may run commands on this host") {
		t.Errorf("answer %q does not say why", last.Content)
	}
	if page := plain.do("GET", "/threads/"+th, nil); !strings.Contains(string(page.body), `id="commands-note"`) {
		t.Error("the plain user's thread page lacks the commands note")
	}

	ath := admin.newThread("")
	admin.startRun(ath, "Run `echo admin-ran-this`")
	a.waitIdle(ath)
	if !threadHas(t, a, ath, "admin-ran-this") {
		t.Error("the admin's command did not run")
	}
	if page := admin.do("GET", "/threads/"+ath, nil); strings.Contains(string(page.body), `id="commands-note"`) {
		t.Error("the admin's thread page shows the commands note")
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if spy.seen[true] == 0 || spy.seen[false] == 0 {
		t.Errorf("lead calls by bash offered: %v, want some of each (the admin's, the user's)", spy.seen)
	}
}

// TestCommandsForEveryoneInSandbox: outside host mode every user's runs
// are offered commands and no page shows the note.
func TestCommandsForEveryoneInSandbox(t *testing.T) {
	spy := newToolSpy()
	a := newApp(t, func(c *appConfig) { c.tools, c.provider = append(tools.Workspace(), hostBash(t)), spy })
	u := a.newUser("ann@example.com", false)
	th := u.newThread("")
	u.startRun(th, "Run `echo user-ran-this`")
	a.waitIdle(th)
	if !threadHas(t, a, th, "user-ran-this") {
		t.Error("the user's command did not run")
	}
	if page := u.do("GET", "/threads/"+th, nil); strings.Contains(string(page.body), `id="commands-note"`) {
		t.Error("the thread page shows the commands note outside host mode")
	}
}

func threadHas(t *testing.T, a *testApp, threadID, text string) bool {
	t.Helper()
	msgs, err := a.store.Messages(context.Background(), threadID)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(msgs, func(m models.Message) bool { return strings.Contains(m.Content, text) })
}

// TestActiveRunsPerUser429: a user's run beyond
// lead.max_active_runs_per_user is refused with 429 naming the limit;
// another user is not affected; a stopped run frees a place.
func TestActiveRunsPerUser429(t *testing.T) {
	a := newApp(t, withModels(demoModel("slow", 10000, 5)), func(c *appConfig) { c.lead.MaxActiveRunsPerUser = 2 })
	ann, bob := a.newUser("ann@example.com", false), a.newUser("bob@example.com", false)
	threads := []string{ann.newThread(""), ann.newThread("")}
	runs := []string{ann.startRun(threads[0], "one"), ann.startRun(threads[1], "two")}
	third := ann.newThread("")
	r := ann.do("POST", "/api/threads/"+third+"/runs", map[string]string{"content": "three"})
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	if r.status != http.StatusTooManyRequests || e.Error.Code != "too_many_runs" || !strings.Contains(e.Error.Message, "lead.max_active_runs_per_user") || !strings.Contains(e.Error.Message, "2 active runs") {
		t.Fatalf("third run: %d %s, want 429 too_many_runs naming the limit of 2", r.status, r.body)
	}
	if msgs, _ := a.store.Messages(context.Background(), third); len(msgs) != 0 {
		t.Errorf("the refused run wrote %d messages", len(msgs))
	}
	bth := bob.newThread("")
	bob.mustJSON("POST", "/api/threads/"+bth+"/runs/"+bob.startRun(bth, "mine")+"/cancel", nil, http.StatusAccepted, nil)

	ann.mustJSON("POST", "/api/threads/"+threads[0]+"/runs/"+runs[0]+"/cancel", nil, http.StatusAccepted, nil)
	a.waitIdle(threads[0])
	ann.mustJSON("POST", "/api/threads/"+third+"/runs/"+ann.startRun(third, "three")+"/cancel", nil, http.StatusAccepted, nil)
	ann.mustJSON("POST", "/api/threads/"+threads[1]+"/runs/"+runs[1]+"/cancel", nil, http.StatusAccepted, nil)
	for _, th := range []string{third, threads[1], bth} {
		a.waitIdle(th)
	}
}

// fifoTool blocks like a read of a FIFO with no writer: it ignores its
// context until the test lets it go.
type fifoTool struct {
	entered chan struct{}
	release func()
	unblock chan struct{}
}

func newFIFOTool() *fifoTool {
	f := &fifoTool{entered: make(chan struct{}, 4), unblock: make(chan struct{})}
	f.release = sync.OnceFunc(func() { close(f.unblock) })
	return f
}

func (f *fifoTool) Spec() tools.Spec { return tools.Schema{}.Spec("fifo", "Reads a FIFO.") }

func (f *fifoTool) Run(context.Context, tools.Env, json.RawMessage) (string, error) {
	f.entered <- struct{}{}
	<-f.unblock
	return "", nil
}

// TestStopEndsRunWithStuckTool: a Stop of a run whose tool ignores its
// cancellation ends the run within subagents.cancel_grace_seconds; the
// thread then takes a new message instead of answering 409.
func TestStopEndsRunWithStuckTool(t *testing.T) {
	fifo := newFIFOTool()
	callsFIFO := providerFunc(func(_ context.Context, req agent.Request) (agent.Response, error) {
		if req.Messages[len(req.Messages)-1].Type == agent.TypeTool {
			return agent.Response{CallID: uuid.NewString(), Text: "done"}, nil
		}
		return agent.Response{CallID: uuid.NewString(), ToolCalls: []agent.ToolCall{{ID: uuid.NewString(), Name: "fifo", Args: []byte(`{}`)}}}, nil
	})
	a := newApp(t, func(c *appConfig) {
		c.tools, c.provider = append(tools.Workspace(), fifo), callsFIFO
		c.subagents = agent.SubagentsConfig{CancelGraceSeconds: 1}
	})
	t.Cleanup(fifo.release) // before the app's: Shutdown waits for the tool
	u := a.newUser("ann@example.com", false)
	th := u.newThread("")
	runID := u.startRun(th, "read the fifo")
	<-fifo.entered
	stopped := time.Now()
	u.mustJSON("POST", "/api/threads/"+th+"/runs/"+runID+"/cancel", nil, http.StatusAccepted, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := a.rt.Wait(ctx, th); err != nil {
		t.Fatalf("the run had not ended %v after the Stop (cancel grace 1 s)", time.Since(stopped))
	}
	if run, err := a.store.Run(context.Background(), th, runID); err != nil || run.Status != models.RunCancelled {
		t.Fatalf("run = %+v, %v; want cancelled", run, err)
	}
	next := u.startRun(th, "again")
	<-fifo.entered
	u.mustJSON("POST", "/api/threads/"+th+"/runs/"+next+"/cancel", nil, http.StatusAccepted, nil)
	a.waitIdle(th)
}

// gatedProvider delegates n general-purpose tasks for a message
// "<name> <n>"; its subagents report their task's name on started, then
// wait for a value on gate.
func gatedProvider(started chan<- string, gate <-chan struct{}) agent.Provider {
	return providerFunc(func(ctx context.Context, req agent.Request) (agent.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		isLead := slices.ContainsFunc(req.Tools, func(t tools.Spec) bool { return t.Name == agent.ToolTask })
		switch {
		case isLead && last.Type == agent.TypeTool:
			return agent.Response{CallID: uuid.NewString(), Text: "all done"}, nil
		case isLead:
			var name string
			var n int
			fmt.Sscanf(last.Content, "%s %d", &name, &n)
			calls := make([]agent.ToolCall, n)
			for i := range calls {
				args, _ := json.Marshal(map[string]string{"description": "work item", "prompt": fmt.Sprintf("%s-%d", name, i), "subagent_type": agent.SubagentGeneral})
				calls[i] = agent.ToolCall{ID: fmt.Sprintf("call_%s_%d", name, i), Name: agent.ToolTask, Args: args}
			}
			return agent.Response{CallID: uuid.NewString(), ToolCalls: calls}, nil
		}
		started <- last.Content
		select {
		case <-gate:
			return agent.Response{CallID: uuid.NewString(), Text: "done"}, nil
		case <-ctx.Done():
			return agent.Response{}, ctx.Err()
		}
	})
}

// providerFunc is a scripted provider that streams nothing.
type providerFunc func(context.Context, agent.Request) (agent.Response, error)

func (f providerFunc) Complete(ctx context.Context, req agent.Request, _ func(string)) (agent.Response, error) {
	return f(ctx, req)
}

// TestFairAdmissionOverHTTP: alice's 32 subagents fill every running slot
// and queue; bob's one subagent, asked for after all of them, starts on
// the next slot that frees.
func TestFairAdmissionOverHTTP(t *testing.T) {
	started, gate := make(chan string, 64), make(chan struct{})
	a := newApp(t, func(c *appConfig) {
		c.provider = gatedProvider(started, gate)
		c.subagents = agent.SubagentsConfig{MaxRunning: 4, MaxRunningPerUser: 4, MaxConcurrentPerResponse: 32, MaxTotalPerRun: 32, CancelGraceSeconds: 1}
	})
	alice, bob := a.newUser("alice@example.com", false), a.newUser("bob@example.com", false)
	ath, bth := alice.newThread(""), bob.newThread("")
	next := func() string {
		t.Helper()
		select {
		case s := <-started:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("no subagent started")
			return ""
		}
	}
	queued := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); a.rt.Stats().Queued != n; time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("queued = %d, want %d", a.rt.Stats().Queued, n)
			}
		}
	}
	alice.startRun(ath, "alice 32")
	for range 4 {
		next()
	}
	queued(28)
	bob.startRun(bth, "bob 1")
	queued(29)
	gate <- struct{}{} // one of alice's subagents ends
	if got := next(); got != "bob-0" {
		t.Fatalf("the freed slot went to %s, want bob's subagent", got)
	}
	close(gate)
	a.waitIdle(ath)
	a.waitIdle(bth)
}
