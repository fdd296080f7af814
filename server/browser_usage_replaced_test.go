package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd/agent"
	"herd/agent/demo"
	"herd/agent/openai"
	"herd/agent/openai/openaitest"
	"herd/models"
)

// sumsJS reads what the page shows against what its panel says: the
// visible cards' sum, the panel's lead, subagents, total, model rows and
// replaced answers, as numbers.
const sumsJS = `(() => {
	const num = (s) => Number((s ?? "").replace(/[^0-9]/g, ""));
	const panel = document.querySelector("#usage-panel");
	const cards = [...document.querySelectorAll("#messages section.card")];
	const p = (k) => num(panel?.querySelector('[data-usage="' + k + '"]')?.textContent);
	const rows = [...(panel?.querySelectorAll('[data-usage="by-model"] tr') ?? [])].reduce((n, r) => n + num(r.cells[4].textContent), 0);
	const note = panel?.querySelector('[data-usage="replaced-note"]');
	return {
		cards: cards.length, running: cards.filter((c) => c.dataset.status === "running").length,
		sum: cards.reduce((n, c) => n + Number(c.dataset.totalTokens || 0), 0),
		lead: p("lead"), subagents: p("subagents"), total: p("total"), rows,
		replaced: note && !note.hidden ? p("replaced") : 0, note: note && !note.hidden ? note.textContent : "",
	};
})()`

type sumsView struct {
	Cards, Running                    int
	Sum, Lead, Subagents, Total, Rows int64
	Replaced                          int64
	Note                              string
}

// addsUp is sumsJS's condition: the total is the lead plus the visible
// cards, and the model rows are the total.
const addsUp = `s.sum > 0 && s.subagents === s.sum && s.total === s.lead + s.sum && s.rows === s.total`

// threadUsageReply is the usage API's answer.
type threadUsageReply struct {
	Total    models.UsageTotals `json:"total"`
	Lead     models.UsageTotals `json:"lead"`
	Replaced models.UsageTotals `json:"replaced"`
	Runs     []struct {
		RunID    string             `json:"run_id"`
		Replaced bool               `json:"replaced"`
		Usage    models.UsageReport `json:"usage"`
	} `json:"runs"`
}

// checkLedger fails the test when the panel's figures are not the
// server's: the total what the thread shows, replaced the rest.
func checkLedger(t *testing.T, u *user, th, when string, s sumsView) threadUsageReply {
	t.Helper()
	var ledger threadUsageReply
	u.mustJSON("GET", "/api/threads/"+th+"/usage", nil, http.StatusOK, &ledger)
	if s.Total != ledger.Total.TotalTokens || s.Lead != ledger.Lead.TotalTokens || s.Replaced != ledger.Replaced.TotalTokens {
		t.Errorf("%s: the panel reads %+v, the ledger total %d, lead %d, replaced %d", when, s, ledger.Total.TotalTokens, ledger.Lead.TotalTokens, ledger.Replaced.TotalTokens)
	}
	return ledger
}

// TestBrowserTotalsAfterRegenerate: the thread's figures equal what the
// page shows — the lead plus the visible cards — during a run, after a
// Regenerate replaced the answer and its cards, and after an Edit
// replaced everything; the replaced answers' tokens are named apart,
// outside the total, live and after a reload alike.
func TestBrowserTotalsAfterRegenerate(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 300, 2)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("regenerate")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	b.sendMessage("Two jobs:\n- alpha\n- beta")
	b.waitFor("the panel adding up while the cards run", `(() => { const s = `+sumsJS+`; return s.running >= 1 && `+addsUp+` && s.note === ""; })()`, 30*time.Second)
	b.waitRunEnd(a, th)
	b.waitFor("two completed cards", `document.querySelectorAll('#messages section.card[data-status="completed"]').length === 2`, 15*time.Second)
	first := evalAs[sumsView](b, sumsJS)
	checkLedger(t, u, th, "the first run", first)

	// Regenerate: the answer and its cards leave the page, and their
	// tokens the total, as soon as the new run starts.
	b.activate("regenerate", ".run-end-completed .run-retry")
	b.waitFor("the new run's cards adding up, the first run's tokens apart", fmt.Sprintf(`(() => {
		const s = `+sumsJS+`;
		return s.running >= 1 && `+addsUp+` && s.replaced === %d && s.note === "+" + %q + " in replaced answers";
	})()`, first.Total, groupDigits(first.Total)), 30*time.Second)
	// The replaced run's timeline left with its answer; the new run's,
	// which has no message of its own, grows with the clock inside its
	// track.
	b.waitFor("one timeline, its bars inside it", `(() => {
		const figs = [...document.querySelectorAll("#messages .run-timeline")];
		if (figs.length !== 1 || !document.querySelector('article.msg[data-run-id="' + figs[0].dataset.runId + '"] section.card')) return false;
		const bars = [...figs[0].querySelectorAll(".timeline-bar")];
		return bars.length > 0 && bars.every((b) => parseFloat(b.style.left) + parseFloat(b.style.width) <= 100.6);
	})()`, 10*time.Second)
	b.activate("open the panel", "#usage-panel > summary")
	b.threeLooks("regenerate-mid-run")
	b.waitRunEnd(a, th)
	b.waitFor("the regenerated cards", `document.querySelectorAll('#messages section.card[data-status="completed"]').length === 2`, 15*time.Second)
	regenerated := evalAs[sumsView](b, sumsJS)
	if regenerated.Replaced != first.Total || regenerated.Subagents != regenerated.Sum || regenerated.Total != regenerated.Lead+regenerated.Sum {
		t.Errorf("after the Regenerate the panel reads %+v, want the visible cards and lead, and %d replaced", regenerated, first.Total)
	}
	checkLedger(t, u, th, "after the Regenerate", regenerated)
	live := evalAs[panelView](b, panelJS)
	b.reload()
	b.activate("open the panel", "#usage-panel > summary")
	b.threeLooks("regenerated")
	if got := evalAs[sumsView](b, sumsJS); got != regenerated {
		t.Errorf("after a reload the figures are %+v, live %+v", got, regenerated)
	}
	if got := evalAs[panelView](b, panelJS); !reflect.DeepEqual(got, live) {
		t.Errorf("after a reload the panel reads %+v, live %+v", got, live)
	}

	// Edit the message: both runs are replaced; the total is the edit's.
	b.activate("edit", ".msg-human .msg-edit")
	b.waitFor("the edit form", `document.activeElement?.matches(".msg-edit-input")`, 5*time.Second)
	evalAs[chromedp.Void](b, `(() => { document.querySelector(".msg-edit-input").value = "Three jobs:\n- alpha\n- beta\n- gamma"; })()`)
	b.do("send the edit", chromedp.KeyEvent("\r"))
	replaced := first.Total + regenerated.Total
	b.waitFor("the edit's cards adding up, both runs apart", fmt.Sprintf(`(() => { const s = `+sumsJS+`; return s.running >= 1 && `+addsUp+` && s.replaced === %d; })()`, replaced), 30*time.Second)
	b.waitRunEnd(a, th)
	b.waitFor("the edit's cards", `document.querySelectorAll('#messages section.card[data-status="completed"]').length === 3`, 15*time.Second)
	edited := evalAs[sumsView](b, sumsJS)
	if edited.Replaced != replaced || edited.Subagents != edited.Sum || edited.Total != edited.Lead+edited.Sum {
		t.Errorf("after the Edit the panel reads %+v, want the visible cards and lead, and %d replaced", edited, replaced)
	}
	ledger := checkLedger(t, u, th, "after the Edit", edited)
	var billed int64
	for _, r := range ledger.Runs {
		billed += r.Usage.Total.TotalTokens
	}
	if billed != edited.Total+edited.Replaced {
		t.Errorf("the runs made %d tokens; the panel shows %d plus %d replaced", billed, edited.Total, edited.Replaced)
	}
	b.reload()
	if got := evalAs[sumsView](b, sumsJS); got != edited {
		t.Errorf("after a reload the figures are %+v, live %+v", got, edited)
	}
}

// datedFake is an OpenAI-compatible fake that reports a dated model name
// for every call, answers the lead plainly, and the title
// call, each of its chunks titleDelay apart, with a title that is not used (it is the first message's own), so
// no rename carries the call to the page.
func datedFake(t *testing.T, titleDelay time.Duration) (*testApp, *openaitest.Server) {
	t.Helper()
	fake := openaitest.NewServer(t)
	fake.SetFallback(func(req openaitest.ChatRequest) openaitest.Reply {
		if len(req.Messages) > 0 && isTitleCall(req.Messages[0].Text()) {
			return openaitest.Reply{Chunks: []string{"Plan a trip"}, ChunkDelay: titleDelay, Model: "gpt-test-2024-08-06", Usage: &openaitest.Usage{PromptTokens: 70, CompletionTokens: 6, TotalTokens: 76}}
		}
		return openaitest.Reply{Chunks: []string{"Here ", "is ", "a plan."}, ChunkDelay: 100 * time.Millisecond, Model: "gpt-test-2024-08-06", Usage: &openaitest.Usage{PromptTokens: 500, CompletionTokens: 20, TotalTokens: 520}}
	})
	retries := 0
	p, err := openai.New(agent.ModelConfig{Name: "demo-fast", Provider: "openai", Model: "gpt-test", BaseURL: fake.URL(), APIKey: "sk-test", MaxRetries: &retries},
		openai.WithHTTPClient(fake.Client()), openai.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	return newApp(t, func(c *appConfig) {
		c.provider = p
		c.models = c.models[:1]
		c.models[0].Provider = "openai"
	}), fake
}

// rowsJS records, on every change of the usage panel, the labels of its
// model rows: what a reader could have seen at any moment.
const rowsJS = `(() => {
	window.herdRows = new Set();
	const note = () => {
		const rows = [...document.querySelectorAll('#usage-panel [data-usage="by-model"] tr')].map((r) => r.cells[0].textContent + " (" + r.cells[0].title + ")");
		if (rows.length > 0) window.herdRows.add(rows.join(", "));
	};
	note();
	new MutationObserver(note).observe(document.querySelector("#usage-panel"), { subtree: true, childList: true, characterData: true });
})()`

// TestBrowserUsageModelRowsAndTitle: a provider that reports its model
// with a date (gpt-test-2024-08-06) never adds a second row: the panel's
// rows are per herd model, live and after a reload; and the title call,
// whose title was not used, reaches the lead's figure live, in its own
// frame — or, when the call ended before the page's stream opened, from
// the one catch-up read the page makes on opening.
func TestBrowserUsageModelRowsAndTitle(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration
	}{
		{"frame", 400 * time.Millisecond},
		{"catch-up", 0},
	} {
		t.Run(tc.name, func(t *testing.T) { testModelRowsAndTitle(t, tc.delay) })
	}
}

func testModelRowsAndTitle(t *testing.T, titleDelay time.Duration) {
	a, fake := datedFake(t, titleDelay)
	u := a.newUser("ann@example.com", false)
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.navigate("/threads/new")
	b.waitFor("the new-thread page", `document.documentElement.dataset.herdReady === "1"`, 10*time.Second)
	b.sendMessage("Plan a trip")
	b.waitFor("the thread page", `/^\/threads\/[0-9a-f-]{36}$/.test(location.pathname) && document.documentElement.dataset.herdReady === "1"`, 10*time.Second)
	th := strings.TrimPrefix(evalAs[string](b, `location.pathname`), "/threads/")
	evalAs[chromedp.Void](b, rowsJS)
	// The answer's 520 tokens, then the title call's 76, on the open page.
	b.waitFor("the title call in the lead's figure", `document.querySelector('#usage-panel [data-usage="lead"]')?.textContent === "596"`, 30*time.Second)
	a.waitIdle(th)
	a.srv.titles.Wait()
	if n := len(titleCalls(fake)); n != 1 {
		t.Fatalf("%d title calls, want 1", n)
	}
	if got := evalAs[string](b, `document.querySelector("#thread-title").textContent`); got != "Plan a trip" {
		t.Errorf("the title is %q, want the first message's", got)
	}
	// The page counted it from the frame, not by asking again after it.
	fetched := evalAs[int](b, `performance.getEntriesByType("resource").filter((e) => new URL(e.name).pathname.endsWith("/usage")).length`)
	if fetched > 1 {
		t.Errorf("the page asked the usage API %d times, want at most once (the catch-up on opening)", fetched)
	}

	// A second message on a reloaded page: the figures the page was
	// rendered with and those it adds live name the model alike.
	b.reload()
	evalAs[chromedp.Void](b, rowsJS)
	b.sendMessage("And the way back?")
	b.waitRunEnd(a, th)
	b.waitFor("the second answer counted", `document.querySelector('#usage-panel [data-usage="lead"]')?.textContent === "1,116"`, 15*time.Second)
	b.activate("open the panel", "#usage-panel > summary")
	b.shot("model-rows")
	if rows := evalAs[[]string](b, `[...window.herdRows]`); !reflect.DeepEqual(rows, []string{"Demo-fast (demo-fast)"}) {
		t.Errorf("the panel's model rows were %q, want only the herd model's", rows)
	}
	live := evalAs[panelView](b, panelJS)
	b.reload()
	b.activate("open the panel", "#usage-panel > summary")
	if got := evalAs[panelView](b, panelJS); !reflect.DeepEqual(got, live) {
		t.Errorf("after a reload the panel reads %+v, live %+v", got, live)
	}
	var ledger usageReply
	u.mustJSON("GET", "/api/threads/"+th+"/usage", nil, http.StatusOK, &ledger)
	if _, ok := ledger.ByModel["demo-fast"]; len(ledger.ByModel) != 1 || !ok || ledger.Lead.TotalTokens != 1116 {
		t.Errorf("the usage API reads %+v, want 1,116 lead tokens under demo-fast alone", ledger)
	}
}

// threeLooks saves screenshots in light, in dark and on a 390×844 phone
// (a reload at that size, as a phone opens the page, then back), and
// fails the test when the phone's page scrolls sideways.
func (b *browser) threeLooks(name string) {
	b.t.Helper()
	b.shot(name + "-light")
	setTheme(b, "dark")
	b.shot(name + "-dark")
	setTheme(b, "light")
	b.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	b.reload()
	b.activate("open the panel", "#usage-panel > summary")
	b.shot(name + "-phone")
	if evalAs[bool](b, `document.documentElement.scrollWidth > document.documentElement.clientWidth`) {
		b.t.Errorf("%s: the page scrolls sideways on a 390px phone", name)
	}
	b.do("desktop viewport", chromedp.EmulateViewport(1280, 900))
	b.reload()
}

// fenceGate holds a lead's stream once its text has shown a whole fenced
// code block, until the test releases it: the page is then mid-stream
// with the block rendered.
type fenceGate struct {
	next    agent.Provider
	release chan struct{}
	once    sync.Once
}

func (g *fenceGate) Complete(ctx context.Context, req agent.Request, onDelta func(string)) (agent.Response, error) {
	if onDelta == nil {
		return g.next.Complete(ctx, req, nil)
	}
	var text strings.Builder
	return g.next.Complete(ctx, req, func(s string) {
		onDelta(s)
		text.WriteString(s)
		if strings.Count(text.String(), "```") >= 2 {
			g.once.Do(func() {
				select {
				case <-g.release:
				case <-ctx.Done():
				}
			})
		}
	})
}

// TestBrowserDemoAnswerRenders: the demo model's answer streams as
// rendered Markdown — a heading, a list and a fenced block highlighted by
// chroma with its Copy button — before it is saved, and the saved answer
// shows the same. Screenshots: light, dark and a phone, mid-stream.
func TestBrowserDemoAnswerRenders(t *testing.T) {
	fast := demoModel("demo-fast", 5, 20)
	gate := &fenceGate{next: demo.New(fast), release: make(chan struct{})}
	a := newApp(t, withModels(fast), func(c *appConfig) { c.provider = gate })
	u := a.newUser("ann@example.com", false)
	th := u.newThread("demo markdown")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	b.sendMessage("hello")
	b.waitFor("the demo's answer rendered mid-stream", `(() => {
		const body = document.querySelector(".msg-streaming .msg-body");
		const pre = body?.querySelector("pre.chroma");
		return body && body.querySelector("h3")?.textContent === "How to delegate" && body.querySelectorAll("ul > li").length >= 2
			&& body.querySelector("li strong")?.textContent === "Send a list"
			&& !!pre?.querySelector("code.language-markdown span[class]") && !!pre.querySelector(".code-copy")
			&& pre.textContent.includes("Three jobs for the demo:");
	})()`, 30*time.Second)
	if raw := evalAs[bool](b, `document.querySelector(".msg-streaming .msg-body").textContent.includes("### ")`); raw {
		t.Error("raw Markdown shown while streaming")
	}
	evalAs[chromedp.Void](b, `document.querySelector(".msg-streaming pre.chroma").scrollIntoView({block: "center"})`)
	b.threeLooks("demo-streaming")
	close(gate.release)
	b.waitRunEnd(a, th)
	b.waitFor("the saved answer", `!document.querySelector(".msg-streaming") && !!document.querySelector("article.msg-ai .msg-body h3")
		&& document.querySelectorAll("article.msg-ai pre.chroma > .code-copy").length === 1`, 15*time.Second)
}
