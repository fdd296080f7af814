package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"herd/agent"
	"herd/agent/anthropic"
	"herd/agent/anthropic/anthropictest"
	"herd/agent/openai"
	"herd/agent/openai/openaitest"
)

// isTitleCall tells the title call from the lead's by its prompt.
func isTitleCall(system string) bool { return strings.HasPrefix(system, "You name chat threads.") }

// openaiTitleApp is an app whose models are an OpenAI-compatible fake that
// answers the title call with title (or fails it when title is "") and
// the lead with a plain answer.
func openaiTitleApp(t *testing.T, title string, delay time.Duration, opts ...appOption) (*testApp, *openaitest.Server) {
	t.Helper()
	fake := openaitest.NewServer(t)
	fake.SetFallback(func(req openaitest.ChatRequest) openaitest.Reply {
		if len(req.Messages) > 0 && isTitleCall(req.Messages[0].Text()) {
			if title == "" {
				return openaitest.Fail(http.StatusBadRequest, "no titles today")
			}
			return openaitest.Reply{Chunks: []string{title}, ChunkDelay: delay, Usage: &openaitest.Usage{PromptTokens: 70, CompletionTokens: 6, TotalTokens: 76}}
		}
		return openaitest.Reply{Chunks: []string{"Here is a plan."}, Usage: &openaitest.Usage{PromptTokens: 500, CompletionTokens: 20, TotalTokens: 520}}
	})
	retries := 0
	p, err := openai.New(agent.ModelConfig{Name: "demo-fast", Provider: "openai", Model: "gpt-test", BaseURL: fake.URL(), APIKey: "sk-test", MaxRetries: &retries},
		openai.WithHTTPClient(fake.Client()), openai.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	return newApp(t, append([]appOption{func(c *appConfig) {
		c.provider = p
		for i := range c.models {
			c.models[i].Provider = "openai"
		}
	}}, opts...)...), fake
}

// firstMessage creates a thread with its first message and waits for its
// run and its title call to end.
func (u *user) firstMessage(content string) string {
	u.a.t.Helper()
	var out struct {
		Thread threadJSON `json:"thread"`
	}
	u.mustJSON("POST", "/api/threads", map[string]string{"content": content}, http.StatusCreated, &out)
	u.a.waitIdle(out.Thread.ID)
	u.a.srv.titles.Wait()
	return out.Thread.ID
}

func (u *user) title(threadID string) string {
	u.a.t.Helper()
	var out struct {
		Thread threadJSON `json:"thread"`
	}
	u.mustJSON("GET", "/api/threads/"+threadID, nil, http.StatusOK, &out)
	return out.Thread.Title
}

func titleCalls(fake *openaitest.Server) []openaitest.Request {
	var out []openaitest.Request
	for _, r := range fake.Requests() {
		if len(r.Chat.Messages) > 0 && isTitleCall(r.Chat.Messages[0].Text()) {
			out = append(out, r)
		}
	}
	return out
}

// TestModelTitlesThread: the first message of a thread on a model that
// makes calls gets a title from it in one short call — bounded, with the
// message — which replaces the first message's title; the call is in the
// ledger under the lead, and a later message makes no second call.
func TestModelTitlesThread(t *testing.T) {
	a, fake := openaiTitleApp(t, "\"Kyoto trip in March\"", 0)
	u := a.newUser("ann@example.com", false)
	th := u.firstMessage("can you plan my trip to kyoto in march? we have 5 days")
	if got := u.title(th); got != "Kyoto trip in March" {
		t.Errorf("title %q, want the model's", got)
	}
	calls := titleCalls(fake)
	if len(calls) != 1 {
		t.Fatalf("%d title calls, want 1", len(calls))
	}
	req := calls[0].Chat
	if req.MaxTokens != 40 || len(req.Tools) != 0 || len(req.Messages) != 2 || req.Messages[1].Text() != "can you plan my trip to kyoto in march? we have 5 days" {
		t.Errorf("the title call: max_tokens %d, %d tools, messages %+v", req.MaxTokens, len(req.Tools), req.Messages)
	}
	rep, err := a.store.Usage(context.Background(), th, "")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lead.Calls != 2 || rep.Lead.TotalTokens != 520+76 || rep.Subagents.Calls != 0 || rep.Total.TotalTokens != 596 {
		t.Errorf("ledger %+v: want the answer and the title call, 596 tokens, under the lead", rep)
	}
	u.startRun(th, "and what about osaka?")
	a.waitIdle(th)
	a.srv.titles.Wait()
	if n := len(titleCalls(fake)); n != 1 {
		t.Errorf("%d title calls after a second message, want 1", n)
	}
}

// TestModelTitleFallsBack: a title call that fails, or answers nothing
// usable, leaves the title the first message gave; a failed call is not
// in the ledger (it reported nothing), an unusable one is.
func TestModelTitleFallsBack(t *testing.T) {
	for _, tc := range []struct {
		name, reply string
		calls       int64
	}{
		{"failed call", "", 1},
		{"unusable answer", "```\n```", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, fake := openaiTitleApp(t, tc.reply, 0)
			u := a.newUser("ann@example.com", false)
			th := u.firstMessage("Compare SQLite and PostgreSQL:\n- speed\n- operations")
			if got := u.title(th); got != "Compare SQLite and PostgreSQL" {
				t.Errorf("title %q, want the first message's", got)
			}
			if n := len(titleCalls(fake)); n != 1 {
				t.Errorf("%d title calls, want 1", n)
			}
			rep, _ := a.store.Usage(context.Background(), th, "")
			if rep.Lead.Calls != tc.calls {
				t.Errorf("%d lead calls in the ledger, want %d", rep.Lead.Calls, tc.calls)
			}
		})
	}
}

// TestModelTitleRenameWins: the owner renames the thread while its title
// call is in flight: their title stays; the call is still counted.
func TestModelTitleRenameWins(t *testing.T) {
	a, _ := openaiTitleApp(t, "Model's title", 400*time.Millisecond)
	u := a.newUser("ann@example.com", false)
	var out struct {
		Thread threadJSON `json:"thread"`
	}
	u.mustJSON("POST", "/api/threads", map[string]string{"content": "plan a trip"}, http.StatusCreated, &out)
	th := out.Thread.ID
	u.mustJSON("PATCH", "/api/threads/"+th, map[string]string{"title": "Mine"}, http.StatusOK, nil)
	a.waitIdle(th)
	a.srv.titles.Wait()
	if got := u.title(th); got != "Mine" {
		t.Errorf("title %q after the owner's rename, want theirs", got)
	}
	rep, _ := a.store.Usage(context.Background(), th, "")
	if rep.Lead.Calls != 2 {
		t.Errorf("%d lead calls in the ledger, want the answer and the title call", rep.Lead.Calls)
	}
}

// TestModelTitleReachesOpenPage: a page open on an untitled thread gets
// the model's title as a thread.renamed frame, and so does a rename.
func TestModelTitleReachesOpenPage(t *testing.T) {
	a, _ := openaiTitleApp(t, "Kyoto trip", 0)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("")
	conn := u.watch(th)
	u.startRun(th, "plan my kyoto trip")
	want := []string{"Kyoto trip", "Renamed by hand"}
	for i, title := range want {
		deadline := time.Now().Add(15 * time.Second)
		for {
			f, err := readFrame(conn, time.Until(deadline))
			if err != nil {
				t.Fatalf("no thread.renamed frame with %q: %v", title, err)
			}
			if f.Type != FrameThreadRenamed {
				continue
			}
			var d struct{ Title string }
			_ = json.Unmarshal(f.Data, &d)
			if d.Title != title || f.ThreadID != th || f.Seq != nil {
				t.Errorf("frame %+v, want title %q unsequenced", f, title)
			}
			break
		}
		if i == 0 {
			a.waitIdle(th)
			u.mustJSON("PATCH", "/api/threads/"+th, map[string]string{"title": want[1]}, http.StatusOK, nil)
		}
	}
}

// TestAnthropicTitlesThread: the same through Anthropic's Messages API:
// one call, capped, without extended thinking even where the model thinks,
// and counted in the ledger.
func TestAnthropicTitlesThread(t *testing.T) {
	fake := anthropictest.NewServer(t)
	fake.SetFallback(func(req anthropictest.MessagesRequest) anthropictest.Reply {
		if len(req.System) > 0 && isTitleCall(req.System[0].Text) {
			return anthropictest.Reply{Chunks: []string{"Title: Weekend in Lisbon"}, Usage: &anthropictest.Usage{InputTokens: 60, OutputTokens: 7}}
		}
		return anthropictest.Reply{Chunks: []string{"Sure."}, Usage: &anthropictest.Usage{InputTokens: 300, OutputTokens: 10}}
	})
	retries := 0
	p, err := anthropic.New(agent.ModelConfig{Name: "demo-fast", Provider: "anthropic", Model: "claude-test", BaseURL: fake.URL(), APIKey: "k", MaxRetries: &retries, MaxOutputTokens: 8000, ThinkingBudgetTokens: 2000},
		anthropic.WithHTTPClient(fake.Client()), anthropic.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	a := newApp(t, func(c *appConfig) {
		c.provider = p
		for i := range c.models {
			c.models[i].Provider = "anthropic"
		}
	})
	u := a.newUser("ann@example.com", false)
	th := u.firstMessage("a weekend in lisbon, what should we see")
	if got := u.title(th); got != "Weekend in Lisbon" {
		t.Errorf("title %q, want the model's", got)
	}
	var titles []anthropictest.MessagesRequest
	for _, r := range fake.Requests() {
		if len(r.Messages.System) > 0 && isTitleCall(r.Messages.System[0].Text) {
			titles = append(titles, r.Messages)
		}
	}
	if len(titles) != 1 || titles[0].MaxTokens != 40 || titles[0].Thinking != nil {
		t.Fatalf("title calls %+v: want one, max_tokens 40, no thinking", titles)
	}
	rep, _ := a.store.Usage(context.Background(), th, "")
	if rep.Lead.Calls != 2 || rep.Lead.TotalTokens != 310+67 {
		t.Errorf("ledger %+v: want the answer and the title call under the lead", rep)
	}
}

// TestModelTitleWaitsForASlot: on a model that serves one call at a time
// the title call never takes the run's slot: it comes after the run.
func TestModelTitleWaitsForASlot(t *testing.T) {
	fake := openaitest.NewServer(t)
	fake.SetFallback(func(req openaitest.ChatRequest) openaitest.Reply {
		if len(req.Messages) > 0 && isTitleCall(req.Messages[0].Text()) {
			return openaitest.Reply{Chunks: []string{"Slot title"}, Usage: &openaitest.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}}
		}
		return openaitest.Reply{Chunks: []string{"Slow ", "answer."}, ChunkDelay: 100 * time.Millisecond}
	})
	retries := 0
	cfg := agent.ModelConfig{Name: "demo-fast", Provider: "openai", Model: "gpt-test", BaseURL: fake.URL(), APIKey: "sk-test", MaxRetries: &retries, MaxConcurrentRequests: 1}
	p, err := openai.New(cfg, openai.WithHTTPClient(fake.Client()), openai.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	a := newApp(t, withModels(cfg), func(c *appConfig) { c.provider = p })
	u := a.newUser("ann@example.com", false)
	th := u.firstMessage("hello there, slow model")
	reqs := fake.Requests()
	if len(reqs) != 2 || !isTitleCall(reqs[1].Chat.Messages[0].Text()) {
		t.Fatalf("%d requests; want the answer, then the title", len(reqs))
	}
	if got := u.title(th); got != "Slot title" {
		t.Errorf("title %q", got)
	}
}

// TestModelTitlesOff: with lead.model_titles off no title call is made;
// the first message's title stays.
func TestModelTitlesOff(t *testing.T) {
	off := false
	a, fake := openaiTitleApp(t, "Model's title", 0, func(c *appConfig) { c.lead.ModelTitles = &off })
	u := a.newUser("ann@example.com", false)
	th := u.firstMessage("Compare SQLite and PostgreSQL")
	if got := u.title(th); got != "Compare SQLite and PostgreSQL" {
		t.Errorf("title %q, want the first message's", got)
	}
	if n := len(titleCalls(fake)); n != 0 {
		t.Errorf("%d title calls with model_titles off", n)
	}
}
