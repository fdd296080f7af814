package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"herd/agent"
	"herd/agent/tools"
)

// waitProvider is a scripted model: a lead asked for "jobs N" delegates N
// tasks, one asked anything else answers "hi"; a subagent reports its
// prompt on started and answers once it gets a value from gate.
func waitProvider(started chan<- string, gate <-chan struct{}) agent.Provider {
	return providerFunc(func(ctx context.Context, req agent.Request) (agent.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		isLead := slices.ContainsFunc(req.Tools, func(t tools.Spec) bool { return t.Name == agent.ToolTask })
		var n int
		switch {
		case isLead && last.Type == agent.TypeTool:
			return agent.Response{CallID: uuid.NewString(), Text: "all done"}, nil
		case isLead && fmtScan(last.Content, "jobs %d", &n):
			calls := make([]agent.ToolCall, n)
			for i := range calls {
				calls[i] = agent.ToolCall{ID: fmt.Sprintf("call_%d", i), Name: agent.ToolTask,
					Args: fmt.Appendf(nil, `{"description":"job %d","prompt":"job-%d","subagent_type":%q}`, i, i, agent.SubagentGeneral)}
			}
			return agent.Response{CallID: uuid.NewString(), ToolCalls: calls}, nil
		case isLead:
			return agent.Response{CallID: uuid.NewString(), Text: "hi"}, nil
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

func fmtScan(s, format string, v *int) bool {
	_, err := fmt.Sscanf(s, format, v)
	return err == nil
}

// waitingJS lists the prompts of the cards whose status line says they
// wait for the model, checking that their markup agrees.
const waitingJS = `[...document.querySelectorAll("#messages section.card")]
	.filter((c) => c.querySelector(".card-status").textContent === "Waiting for a slot" && c.dataset.waiting === "1" && c.dataset.status === "running")
	.map((c) => c.querySelector(".card-prompt").textContent).sort()`

// TestBrowserWaitingForTheModel: three subagents on a model that takes one
// request at a time (max_concurrent_requests: 1). The two whose call waits
// say "Waiting for a slot", live and after a reload; the holder says
// Thinking. Cancelling a waiting card ends it Cancelled at once, calls
// nothing and frees nothing: the holder keeps the slot and the third
// waits on. A lead whose call waits shows it beside the composer, live
// and after a reload, until its call starts.
func TestBrowserWaitingForTheModel(t *testing.T) {
	started, gate := make(chan string, 8), make(chan struct{})
	local := demoModel("local", 0, 0)
	local.MaxConcurrentRequests = 1
	a := newApp(t, withModels(local), func(c *appConfig) { c.provider = waitProvider(started, gate) })
	u := a.newUser("ann@example.com", false)
	th := u.newThread("waiting")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")
	next := func() string {
		t.Helper()
		select {
		case s := <-started:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("no subagent call started")
			return ""
		}
	}

	b.sendMessage("jobs 3")
	holder := next()
	b.waitFor("two cards waiting for the model", waitingJS+`.length === 2`, 10*time.Second)
	waiting := evalAs[[]string](b, waitingJS)
	if slices.Contains(waiting, holder) {
		t.Fatalf("the holder %s shows as waiting: %v", holder, waiting)
	}
	if got := b.card(holder).StatusText; got != "Thinking" {
		t.Errorf("the card whose call runs says %q, want Thinking", got)
	}
	if evalAs[bool](b, `!document.querySelector("#run-status").hidden`) {
		t.Error("the lead shows as waiting while it waits for its tasks")
	}
	live := b.cards()
	b.shot("waiting-live")
	b.reload()
	sameCards(t, "reloaded while waiting", b.cards(), live)
	if got := evalAs[[]string](b, waitingJS); !slices.Equal(got, waiting) {
		t.Errorf("after a reload the waiting cards are %v, want %v", got, waiting)
	}

	cancelled, third := waiting[0], waiting[1]
	b.activate("cancel a waiting card", cardSel(b.card(cancelled).ID, ".card-cancel"))
	b.waitFor("the waiting card cancelled", cardJS(cancelled)+`.dataset.status === "cancelled"`, 5*time.Second)
	if got := b.card(cancelled); got.StatusText != "Cancelled" || got.Error != nil || got.Cancel {
		t.Errorf("the cancelled card: %+v; want Cancelled, no error, no Cancel button", got)
	}
	if got := evalAs[[]string](b, waitingJS); !slices.Equal(got, []string{third}) {
		t.Errorf("after the cancel the waiting cards are %v, want %v", got, []string{third})
	}
	select {
	case s := <-started:
		t.Fatalf("%s called the model while the holder kept the only slot", s)
	default:
	}

	// Another thread's lead queues behind the third card for the slot.
	other := u.newThread("lead waits")
	b.openThread(other, "")
	b.sendMessage("hello")
	b.waitFor("the lead waiting for the model", `!document.querySelector("#run-status").hidden`, 10*time.Second)
	if got := evalAs[string](b, `document.querySelector("#run-status").textContent`); got != "Waiting for the model…" {
		t.Errorf("the lead's status line says %q", got)
	}
	b.reload()
	if !evalAs[bool](b, `!document.querySelector("#run-status").hidden`) {
		t.Error("after a reload the waiting lead does not show it")
	}
	b.shot("lead-waiting")
	gate <- struct{}{} // the holder answers; the third card takes the slot
	if got := next(); got != third {
		t.Fatalf("the slot went to %s, want the third card %s", got, third)
	}
	gate <- struct{}{} // the third answers; the lead takes the slot
	b.waitFor("the lead's answer", `[...document.querySelectorAll("#messages .msg-ai")].some((m) => m.textContent.includes("hi"))`, 10*time.Second)
	b.waitRunEnd(a, other)
	if evalAs[bool](b, `!document.querySelector("#run-status").hidden`) {
		t.Error("the lead still shows as waiting after its answer")
	}

	b.waitRunEnd(a, th)
	b.openThread(th, "")
	for _, c := range b.cards() {
		want := map[bool]string{true: "Cancelled", false: "Completed"}[c.Prompt == cancelled]
		if c.StatusText != want || strings.Contains(c.StatusText, "Waiting") {
			t.Errorf("card %s ended %q, want %s", c.Prompt, c.StatusText, want)
		}
	}
}
