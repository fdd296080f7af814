package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"herd/models"
)

// Eight subagents on a model limited to two requests at once: never more
// than two calls are in flight, the others wait their turn, and every
// subagent completes.
func TestMaxConcurrentRequests(t *testing.T) {
	var inFlight, peak, calls atomic.Int64
	sub := func(ctx context.Context, req Request) (Response, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		calls.Add(1)
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return Response{}, ctx.Err()
		}
		return reply("done", &Usage{InputTokens: 3, OutputTokens: 2, TotalTokens: 5}), nil
	}
	var tasks []ToolCall
	for i := range 8 {
		tasks = append(tasks, taskCall(fmt.Sprint("t", i), fmt.Sprint("item ", i), SubagentGeneral))
	}
	cfg := defaultSubagents()
	cfg.MaxConcurrentPerResponse, cfg.MaxTotalPerRun = 8, 8
	// The lead's calls go through the same limit, as they would on one
	// local server.
	m := model("local", LimitRequests(split(leadThen(tasks...), sub), 2))
	h := newHarness(t, harnessConfig{subagents: cfg, models: []*Model{m}})
	h.run("eight items")
	if p := peak.Load(); p > 2 {
		t.Errorf("%d subagent calls in flight at once, want at most 2", p)
	}
	if c := calls.Load(); c != 8 {
		t.Errorf("%d subagent calls, want 8", c)
	}
	for id, msg := range h.toolMessages() {
		if md := metadata(t, msg); md.Status != StatusCompleted {
			t.Errorf("task %s ended %s, want completed", id, md.Status)
		}
	}
	if n := len(h.toolMessages()); n != 8 {
		t.Errorf("%d ToolMessages, want 8", n)
	}
}

// A call waiting for a slot gives up when its context ends, saying why.
func TestLimitRequestsWaitEndsWithContext(t *testing.T) {
	release := make(chan struct{})
	p := LimitRequests(llmFunc(func(ctx context.Context, _ Request, _ func(string)) (Response, error) {
		<-release
		return Response{}, nil
	}), 1)
	done := make(chan struct{})
	go func() { defer close(done); _, _ = p.Complete(context.Background(), Request{}, nil) }()
	for len(p.(*limited).slots) == 0 { // the first call holds the slot
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := p.Complete(ctx, Request{}, nil)
	if err == nil || !errors.Is(err, ErrProvider) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting call: %v; want a provider error naming the deadline", err)
	}
	close(release)
	<-done
}

// A Stop ends a run's contexts one after another. When it reaches the
// holder of the only slot before a waiter of the same run, the holder's
// freed slot must not carry the waiter's call to the model: the run is
// over. The waiter's context here is reached by the Stop only when the
// test says, as a busy machine can leave it for a while.
func TestStopFreesNoSlotForAWaiter(t *testing.T) {
	var calls atomic.Int64
	p := LimitRequests(llmFunc(func(ctx context.Context, _ Request, _ func(string)) (Response, error) {
		calls.Add(1)
		<-ctx.Done()
		return Response{}, ctx.Err()
	}), 1)
	run, stop := context.WithCancel(context.Background())
	run = withRun(run)
	holderDone := make(chan struct{})
	go func() { defer close(holderDone); _, _ = p.Complete(run, Request{}, nil) }()
	for calls.Load() == 0 { // the holder's call has the slot
		time.Sleep(time.Millisecond)
	}
	// The waiter's context carries the run but is not cancelled with it.
	waiter, reached := context.WithCancel(context.WithValue(context.Background(), runKey{}, run))
	defer reached()
	waiting := make(chan struct{})
	waiter = withModelWait(waiter, func(w bool) {
		if w {
			close(waiting)
		}
	})
	waiterErr := make(chan error, 1)
	go func() { _, err := p.Complete(waiter, Request{}, nil); waiterErr <- err }()
	<-waiting
	stop() // reaches the holder first
	<-holderDone
	for len(p.(*limited).slots) == 0 { // the waiter took the freed slot
		time.Sleep(time.Millisecond)
	}
	reached() // the Stop reaches the waiter too
	if err := <-waiterErr; !errors.Is(err, context.Canceled) {
		t.Errorf("the waiter's call: %v, want cancelled", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d calls reached the model, want the holder's only", n)
	}
	if n := len(p.(*limited).slots); n != 0 {
		t.Errorf("%d slots held after both calls ended", n)
	}
}

// records is every record committed so far.
func (h *harness) records() []models.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.frames)
}

// project rebuilds the thread's cards as the page does after a reload,
// with activeRunID the live run ("" when none).
func (h *harness) project(activeRunID string) []Card {
	h.t.Helper()
	ctx := context.Background()
	msgs, err := h.store.Messages(ctx, h.thread)
	if err != nil {
		h.t.Fatal(err)
	}
	events, err := h.store.CardEventsBetween(ctx, h.thread, activeRunID, 0, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return ProjectCards(CardSource{Messages: msgs, Events: events, ActiveRunID: activeRunID})
}

// waits is every wait event committed so far: the latest word of each
// task (by task id) and of each lead (by run id), in commit order.
func waits(recs []models.Record) (tasks map[string]bool, leads map[string]bool) {
	tasks, leads = map[string]bool{}, map[string]bool{}
	for _, r := range recs {
		if r.Event == nil {
			continue
		}
		switch p := r.Payload.(type) {
		case TaskWait:
			tasks[p.TaskID] = p.Waiting
		case RunWait:
			leads[p.RunID] = p.Waiting
		}
	}
	return tasks, leads
}

func waitingTasks(recs []models.Record) int {
	tasks, _ := waits(recs)
	n := 0
	for _, w := range tasks {
		if w {
			n++
		}
	}
	return n
}

// Three subagents on a model that takes one request at a time: the two
// whose call waits say so on their cards, live and after a reload; the
// one that gets the slot says so too. Cancelling a waiting card ends it
// cancelled at once, takes no slot and frees none: the holder keeps the
// only slot, the third waits on, and then completes.
func TestWaitingForTheModel(t *testing.T) {
	var inFlight, peak, calls atomic.Int64
	release := make(chan struct{})
	holding := make(chan string, 3)
	sub := func(ctx context.Context, req Request) (Response, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		if p := peak.Load(); n > p {
			peak.Store(n) // calls are serialised by the limit; a race here is the bug this counts
		}
		calls.Add(1)
		holding <- lastHuman(req)
		select {
		case <-release:
		case <-ctx.Done():
			return Response{}, ctx.Err()
		}
		return reply("done", &Usage{InputTokens: 3, OutputTokens: 2, TotalTokens: 5}), nil
	}
	tasks := []ToolCall{taskCall("t0", "item 0", SubagentGeneral), taskCall("t1", "item 1", SubagentGeneral), taskCall("t2", "item 2", SubagentGeneral)}
	m := model("local", LimitRequests(split(leadThen(tasks...), sub), 1))
	h := newHarness(t, harnessConfig{models: []*Model{m}})
	st := h.start("three items")

	holder := "t" + strings.TrimPrefix(<-holding, "do item ") // one subagent holds the slot
	h.until("two cards waiting for the model", func(recs []models.Record) bool { return waitingTasks(recs) == 2 })

	// After a reload: the page's cards project from the stored events.
	cards := h.project(st.RunID)
	var waiting []string
	for _, c := range cards {
		switch {
		case c.Waiting && c.Status == StatusRunning:
			waiting = append(waiting, c.TaskID)
		case c.Waiting:
			t.Errorf("card %s waiting while %s", c.TaskID, c.Status)
		}
	}
	if len(waiting) != 2 || slices.Contains(waiting, holder) {
		t.Fatalf("waiting cards after a reload = %v (holder %s); want the two others", waiting, holder)
	}

	// Cancel one waiting card: it ends cancelled while the slot stays held.
	cancelled, third := waiting[0], waiting[1]
	if err := h.rt.CancelTask(h.thread, cancelled); err != nil {
		t.Fatal(err)
	}
	h.until("the cancelled card's end", func(recs []models.Record) bool {
		for _, r := range recs {
			if r.Event == nil {
				continue
			}
			if e, ok := r.Payload.(TaskEnd); ok && e.TaskID == cancelled {
				return true
			}
		}
		return false
	})
	if n := inFlight.Load(); n != 1 {
		t.Errorf("%d calls in flight after the cancel, want the holder's 1", n)
	}
	if tasks, _ := waits(h.records()); !tasks[third] {
		t.Errorf("the third card stopped waiting when another was cancelled")
	}

	close(release)
	h.wait()
	if p := peak.Load(); p != 1 {
		t.Errorf("peak %d calls in flight, want 1", p)
	}
	if c := calls.Load(); c != 2 {
		t.Errorf("%d subagent calls, want 2 (the cancelled one never called)", c)
	}
	for id, msg := range h.toolMessages() {
		md := metadata(t, msg)
		want := StatusCompleted
		if id == cancelled {
			want = StatusCancelled
		}
		if md.Status != want {
			t.Errorf("task %s ended %s (%s), want %s", id, md.Status, md.Error, want)
		}
	}
	// The third card's wait ended when its call started, before its step.
	var order []string
	for _, e := range h.events(third) {
		if e.EventType == eventSubagentWait || e.EventType == eventSubagentStep {
			p, _ := PayloadOf(&e)
			order = append(order, fmt.Sprintf("%s:%v", e.EventType, p))
		}
	}
	if len(order) != 3 || !strings.HasPrefix(order[0], "subagent.wait:{") || !strings.HasSuffix(order[0], " true}") ||
		!strings.HasSuffix(order[1], " false}") || !strings.HasPrefix(order[2], "subagent.step") {
		t.Errorf("events of the third card = %v; want wait true, wait false, step", order)
	}
	for _, c := range h.project("") {
		if c.Waiting {
			t.Errorf("card %s still waiting after the run (%s)", c.TaskID, c.Status)
		}
	}
}

// A lead whose model is busy with another thread's call says it waits,
// and says so no more once its call has the slot.
func TestLeadWaitingForTheModel(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan string, 2)
	lead := llmFunc(func(ctx context.Context, req Request, _ func(string)) (Response, error) {
		entered <- lastHuman(req)
		if lastHuman(req) == "first" {
			select {
			case <-release:
			case <-ctx.Done():
				return Response{}, ctx.Err()
			}
		}
		return reply("answer", nil), nil
	})
	h := newHarness(t, harnessConfig{models: []*Model{model("local", LimitRequests(lead, 1))}})
	h.start("first")
	if got := <-entered; got != "first" {
		t.Fatalf("first call: %q", got)
	}
	other := h.newThread("u2")
	st := h.startIn(other, "u2", "second")
	h.until("the second lead waiting", func(recs []models.Record) bool { _, leads := waits(recs); return leads[st.RunID] })
	events, err := h.store.CardEventsBetween(context.Background(), other, st.RunID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !LeadWaiting(events, st.RunID) {
		t.Errorf("after a reload the second lead does not show as waiting")
	}
	close(release)
	h.wait()
	h.waitThread(other)
	if <-entered != "second" {
		t.Errorf("the second call never reached the model")
	}
	if _, leads := waits(h.records()); leads[st.RunID] {
		t.Errorf("the second lead still shows as waiting after its call")
	}
	events, _, err = h.store.Events(context.Background(), other, models.EventFilter{EventTypes: []string{eventRunWait}})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 {
		t.Errorf("%d run.wait events, want 2 (waiting, then not)", len(events))
	}
	if LeadWaiting(events, st.RunID) {
		t.Errorf("after a reload the ended lead still shows as waiting")
	}
}

// A card waiting for the model ends at once, with the status its ending
// calls for, whichever way its context ends: its own cancel, a Stop, its
// execution deadline.
func TestWaitEndsWithItsContext(t *testing.T) {
	for _, tt := range []struct {
		name    string
		timeout int
		end     func(h *harness, st Started, waiting string)
		want    string
		wantErr string
	}{
		{"cancel the card", 30, func(h *harness, _ Started, id string) { _ = h.rt.CancelTask(h.thread, id) }, StatusCancelled, ""},
		{"stop the run", 30, func(h *harness, st Started, _ string) { _ = h.rt.Cancel(h.thread, st.RunID) }, StatusCancelled, ""},
		{"execution deadline", 1, func(*harness, Started, string) {}, StatusTimedOut, "Execution timed out after 1 seconds"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			holding := make(chan struct{}, 2)
			sub := func(ctx context.Context, _ Request) (Response, error) {
				holding <- struct{}{}
				<-ctx.Done() // holds the only slot until its own context ends
				return Response{}, ctx.Err()
			}
			tasks := []ToolCall{taskCall("t0", "item 0", SubagentGeneral), taskCall("t1", "item 1", SubagentGeneral)}
			cfg := defaultSubagents()
			cfg.TimeoutSeconds = tt.timeout
			// A grace far beyond the bar below: a card that ended only
			// because the grace ran out cannot pass for one that ended at
			// once, however slowly a loaded machine writes its end.
			cfg.CancelGraceSeconds = 15
			h := newHarness(t, harnessConfig{subagents: cfg, models: []*Model{model("local", LimitRequests(split(leadThen(tasks...), sub), 1))}})
			st := h.start("two items")
			<-holding
			h.until("a card waiting for the model", func(recs []models.Record) bool { return waitingTasks(recs) == 1 })
			var waiting string
			byTask, _ := waits(h.records())
			for id, w := range byTask {
				if w {
					waiting = id
				}
			}
			began := time.Now()
			tt.end(h, st, waiting)
			h.until("the waiting card's end", func(recs []models.Record) bool {
				for _, r := range recs {
					if r.Event != nil {
						if e, ok := r.Payload.(TaskEnd); ok && e.TaskID == waiting {
							return true
						}
					}
				}
				return false
			})
			// Well within the cancel grace (15 s), after which a call that
			// ignored its context would be abandoned and end the card anyway
			// (with an error the status check below would also catch).
			if d := time.Since(began); d > 5*time.Second {
				t.Errorf("the waiting card took %v to end", d)
			}
			if tt.name == "cancel the card" {
				_ = h.rt.Cancel(h.thread, st.RunID) // free the holder
			}
			h.wait()
			md := metadata(t, h.toolMessages()[waiting])
			if md.Status != tt.want || md.Error != tt.wantErr {
				t.Errorf("the waiting card ended %s %q, want %s %q", md.Status, md.Error, tt.want, tt.wantErr)
			}
			// Under a deadline the holder, admitted first, ends first, and
			// the waiter may get the slot in its last milliseconds.
			if len(holding) != 0 && tt.want != StatusTimedOut {
				t.Error("the waiting card called the model")
			}
		})
	}
}
