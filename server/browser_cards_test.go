package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/gorilla/websocket"

	"herd/agent"
	"herd/agent/demo"
	"herd/agent/tools"
	"herd/views"
)

// Browser tests of the subagent cards (docs/DESIGN.md §9): static/cards.js and its modules in a
// real Chromium against the real server and demo models.

func withSubagents(cfg agent.SubagentsConfig) appOption {
	return func(c *appConfig) { c.subagents = cfg }
}

func withTools(ts ...tools.Tool) appOption {
	return func(c *appConfig) { c.tools = ts }
}

// withHostBash adds the bash tool, so a list item like "- `sleep 30`"
// gives a subagent that stays running until it is cancelled.
func withHostBash(t *testing.T) appOption {
	t.Helper()
	bash, err := tools.NewBash(tools.SandboxConfig{Mode: tools.SandboxHost, AllowHostBash: true})
	if err != nil {
		t.Fatal(err)
	}
	return withTools(append(tools.Workspace(), bash)...)
}

func noUsage(m agent.ModelConfig) agent.ModelConfig {
	off := false
	m.Usage = &off
	return m
}

// cardView is what a card shows, read from the page (cardsJS).
type cardView struct {
	ID         string    `json:"id"`
	TaskID     string    `json:"task"`
	Class      string    `json:"cls"`
	Status     string    `json:"status"`
	Version    string    `json:"version"`
	LastSeq    string    `json:"lastSeq"`
	Execution  string    `json:"execution"`
	Total      string    `json:"total"`
	Title      string    `json:"title"`
	StatusText string    `json:"statusText"`
	Model      *string   `json:"model"` // nil when hidden
	ModelTitle string    `json:"modelTitle"`
	Tokens     *string   `json:"tokens"` // nil when absent
	Badge      *string   `json:"badge"`
	Cancel     bool      `json:"cancel"`
	Expanded   string    `json:"expanded"`
	Prompt     string    `json:"prompt"`
	Meta       string    `json:"meta"`
	Error      *string   `json:"error"`
	Result     string    `json:"result"`
	Steps      []string  `json:"steps"`      // seq: text of each timeline entry
	FilesCount *string   `json:"filesCount"` // nil when hidden
	Files      *[]string `json:"files"`      // text, href and target of each; nil when hidden
}

const cardsJS = `[...document.querySelectorAll("#messages section.card")].map((c) => {
	const q = (s) => c.querySelector(s);
	const shown = (s) => (q(s) && !q(s).hidden ? q(s).textContent : null);
	return {
		id: c.id, task: c.dataset.taskId, cls: c.className, status: c.dataset.status, version: c.dataset.version,
		lastSeq: c.dataset.lastSeq, execution: c.dataset.executionId, total: c.dataset.totalTokens,
		title: q(".card-title").textContent, statusText: q(".card-status").textContent,
		model: shown(".card-model"), modelTitle: q(".card-model").title, tokens: shown(".card-tokens"),
		badge: shown(".card-badge"), cancel: !q(".card-cancel").hidden,
		expanded: q(".card-toggle").getAttribute("aria-expanded"),
		prompt: q(".card-prompt").textContent, meta: q(".card-meta").textContent,
		error: shown(".card-error"), result: q(".card-result").textContent.trim(),
		steps: [...c.querySelectorAll(".card-step")].map((li) => li.dataset.seq + ": " + li.textContent),
		filesCount: shown(".card-files-count"),
		files: q(".card-files").hidden ? null : [...c.querySelectorAll(".card-file")].map((li) => {
			const a = li.querySelector("a");
			return li.dataset.path + " " + li.dataset.size + ": " + li.textContent + " → " + a.getAttribute("href") + " " + a.target + " " + a.rel;
		}),
	};
})`

// evalAwait evaluates a JavaScript expression that returns a promise and
// decodes what the promise resolves to.
func evalAwait[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("eval: %v", err)
	}
	return v
}

func (b *browser) cards() []cardView {
	b.t.Helper()
	return evalAs[[]cardView](b, cardsJS)
}

// card returns the card whose prompt contains text.
func (b *browser) card(text string) cardView {
	b.t.Helper()
	for _, c := range b.cards() {
		if strings.Contains(c.Prompt, text) {
			return c
		}
	}
	b.t.Fatalf("no card with %q in its prompt", text)
	return cardView{}
}

// cardSel is a CSS selector of one part of the card with id.
func cardSel(id, part string) string { return fmt.Sprintf(`[id=%q] %s`, id, part) }

// cardJS is a JavaScript expression for the card whose prompt has text.
func cardJS(text string) string {
	return fmt.Sprintf(`[...document.querySelectorAll("#messages section.card")].find((c) => c.querySelector(".card-prompt").textContent.includes(%q))`, text)
}

// ready waits for the page's socket and cards, and for the timelines of
// cards it restored expanded.
func (b *browser) ready() {
	b.t.Helper()
	b.waitFor("the page's socket and cards", `document.documentElement.dataset.herdReady === "1"
		&& ![...document.querySelectorAll(".card-steps-note")].some((n) => n.textContent === "Loading steps…")`, 15*time.Second)
}

func (b *browser) openThread(id, query string) {
	b.t.Helper()
	b.navigate("/threads/" + id + query)
	b.ready()
}

// openEmptyThread signs a new user in to a new, empty thread page of a
// default app: the page where tests import and run the static modules.
func openEmptyThread(t *testing.T, title string) (*testApp, *browser) {
	t.Helper()
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread(title)
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")
	return a, b
}

func (b *browser) reload() {
	b.t.Helper()
	b.do("reload", chromedp.Reload())
	b.ready()
}

func (b *browser) waitRunEnd(a *testApp, th string) {
	b.t.Helper()
	a.waitIdle(th)
	b.waitFor("the run's end on the page", `document.querySelector("#composer").dataset.state === "idle" && document.querySelector("#stop-button").hidden`, 15*time.Second)
}

// sameCards fails the test when two snapshots of the cards differ.
func sameCards(t *testing.T, what string, got, want []cardView) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	g, _ := json.MarshalIndent(got, "", "  ")
	w, _ := json.MarshalIndent(want, "", "  ")
	t.Errorf("%s: the cards differ\ngot  %s\nwant %s", what, g, w)
}

// recordCards logs every state of every card as the page renders it (a
// MutationObserver sees each change, none is sampled away), deduplicated
// per card, in window.__cardLog.
const recordCardsJS = `(() => {
	window.__cardLog = [];
	const last = new Map();
	const log = () => {
		for (const c of document.querySelectorAll("#messages section.card")) {
			const m = c.querySelector(".card-model");
			const entry = {
				task: c.dataset.taskId, status: c.dataset.status, total: c.dataset.totalTokens,
				tokens: c.querySelector(".card-tokens")?.textContent ?? null,
				model: m.hidden ? "" : m.textContent, modelTitle: m.title,
			};
			const key = JSON.stringify(entry);
			if (last.get(entry.task) !== key) {
				last.set(entry.task, key);
				window.__cardLog.push(entry);
			}
		}
	};
	new MutationObserver(log).observe(document.getElementById("messages"), { subtree: true, childList: true, attributes: true, characterData: true });
})()`

type cardSample struct {
	Task       string  `json:"task"`
	Status     string  `json:"status"`
	Total      string  `json:"total"`
	Tokens     *string `json:"tokens"`
	Model      string  `json:"model"`
	ModelTitle string  `json:"modelTitle"`
}

func isTerminal(status string) bool { return views.IsTerminalStatus(status) }

// apiThread is what the tests read of GET /api/threads/{id}: the task
// ToolMessages' metadata and the cards (tasks).
type apiThread struct {
	Thread   threadJSON `json:"thread"`
	Messages []struct {
		Type             string         `json:"type"`
		Name             string         `json:"name"`
		ToolCallID       string         `json:"tool_call_id"`
		AdditionalKwargs map[string]any `json:"additional_kwargs"`
	} `json:"messages"`
	Tasks []struct {
		TaskID       string `json:"task_id"`
		SubagentType string `json:"subagent_type"`
		ModelName    string `json:"model_name"`
	} `json:"tasks"`
}

func (u *user) thread(th string) apiThread {
	u.a.t.Helper()
	var out apiThread
	u.mustJSON("GET", "/api/threads/"+th, nil, http.StatusOK, &out)
	return out
}

// finalUsage is the subagent_token_usage.total_tokens of each task
// ToolMessage, by task id; absent when the message has none.
func (u *user) finalUsage(th string) map[string]int64 {
	u.a.t.Helper()
	out := map[string]int64{}
	for _, m := range u.thread(th).Messages {
		if m.Type != "tool" || m.Name != "task" {
			continue
		}
		if usage, ok := m.AdditionalKwargs["subagent_token_usage"].(map[string]any); ok {
			out[m.ToolCallID] = int64(usage["total_tokens"].(float64))
		}
	}
	return out
}

func (u *user) stepSeqs(th, runID, taskID string) []string {
	u.a.t.Helper()
	var page struct {
		Events []struct {
			Seq int64 `json:"seq"`
		} `json:"events"`
		HasMore bool `json:"has_more"`
	}
	q := url.Values{"task_id": {taskID}, "run_id": {runID}, "event_types": {"subagent.step"}, "limit": {"1000"}}
	u.mustJSON("GET", "/api/threads/"+th+"/events?"+q.Encode(), nil, http.StatusOK, &page)
	if page.HasMore {
		u.a.t.Fatal("more than 1000 steps")
	}
	var seqs []string
	for _, e := range page.Events {
		seqs = append(seqs, strconv.FormatInt(e.Seq, 10))
	}
	return seqs
}

func seqsOf(steps []string) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i], _, _ = strings.Cut(s, ":")
	}
	return out
}

func label(total int64) string { return views.TokenLabel(&total, true) }

// TestBrowserCardContract loads the card modules in the page and checks them
// against the contracts, which the Go code is tested against too: every
// card format example, exactly the statuses, stop reasons, refusal reasons
// and task frame types, how every ToolMessage of the contract reads as a
// card, the usage panel's figures and notes (usage_notes), Go's own
// TokenLabel on values the examples do not cover, and its FilesCount.
func TestBrowserCardContract(t *testing.T) {
	_, b := openEmptyThread(t, "contract")

	read := func(name string) string {
		raw, err := os.ReadFile("../contracts/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	type labelCase struct {
		Total    int64  `json:"total"`
		Terminal bool   `json:"terminal"`
		Label    string `json:"label"`
	}
	var gos []labelCase
	values := []int64{0, 1, 999, 1000, 9999, 10000, 10049, 10050, 12250, 12350, 12750, 99949, 99950,
		999949, 999950, 999999, 1000000, 1049999, 1050000, 1250000, 1750000, 9999999, 123456789}
	rng := rand.New(rand.NewPCG(4, 2))
	for range 300 {
		values = append(values, rng.Int64N(int64(1)<<uint(rng.IntN(34))))
	}
	for _, n := range values {
		for _, terminal := range []bool{false, true} {
			gos = append(gos, labelCase{n, terminal, views.TokenLabel(&n, terminal)})
		}
	}
	goLabels, _ := json.Marshal(gos)
	var counts []string // views.FilesCount(0…12)
	for n := range 13 {
		counts = append(counts, views.FilesCount(n))
	}
	goCounts, _ := json.Marshal(counts)

	problems := evalAwait[[]string](b, fmt.Sprintf(`(async (format, status, stream, goLabels, messages, goCounts) => {
		const m = { ...(await import("/static/format.js")), ...(await import("/static/metadata.js")), ...(await import("/static/merge.js")) };
		const problems = [];
		const check = (ok, what) => { if (!ok) problems.push(what); };
		const eq = (got, want, what) => check(got === want, what + ": got " + JSON.stringify(got) + ", want " + JSON.stringify(want));
		const view = await import("/static/card-view.js");
		goCounts.forEach((want, n) => eq(view.filesCount(n), want, "filesCount(" + n + ") as Go writes it"));
		const sameSet = (got, want, what) => eq(JSON.stringify([...new Set(got)].sort()), JSON.stringify([...new Set(want)].sort()), what);

		for (const c of format.token_labels) eq(m.tokenLabel(c.total, c.terminal), c.label, "tokenLabel(" + c.total + ", " + c.terminal + ")");
		for (const c of goLabels) eq(m.tokenLabel(c.total, c.terminal), c.label, "tokenLabel(" + c.total + ", " + c.terminal + ") as Go formats it");
		for (const c of format.status_texts) eq(m.statusText(c.status, c.activity, c.waiting === true), c.text, "statusText(" + c.status + ", " + c.activity + ", " + (c.waiting === true) + ")");
		for (const c of format.not_started) eq(m.notStartedText(c.refusal), c.text, "notStartedText(" + JSON.stringify(c.refusal) + ")");
		for (const c of format.held) eq(m.heldText(c.refusal), c.text, "heldText(" + JSON.stringify(c.refusal) + ")");
		for (const c of format.stop_badges) eq(m.stopLabel(c.stop_reason), c.badge, "stopLabel(" + c.stop_reason + ")");
		for (const s of format.live_statuses) eq(m.isTerminal(s), false, "isTerminal(" + s + ")");
		for (const c of format.activities) eq(m.activityText(c.step), c.text, "activityText(" + JSON.stringify(c.step) + ")");
		for (const c of format.durations) eq(m.duration(c.ms), c.text, "duration(" + c.ms + ")");
		for (const c of format.lost_times) eq(m.lostTime(c.ms), c.text, "lostTime(" + c.ms + ")");
		for (const c of format.resumed) eq(m.resumedNotice({ run_id: "r", resumes: 1, lost_ms: c.lost_ms, cause: c.cause }), c.notice, "resumedNotice(" + c.cause + ", " + c.lost_ms + ")");
		check(format.activities.length > 0 && format.durations.length > 0, "the contract has no activities or durations");
		const panel = await import("/static/usage-panel.js");
		for (const c of format.usage_notes) {
			eq(panel.figure(c.totals), c.figure, "figure(" + JSON.stringify(c.totals) + ")");
			eq(panel.usageNote(c.totals), c.note, "usageNote(" + JSON.stringify(c.totals) + ")");
		}
		check(format.usage_notes.length > 0, "the contract has no usage notes");
		check(format.lost_times.length > 0 && format.resumed.length > 0, "the contract has no lost times or resumed notices");

		// Statuses: exactly the contract's values are terminal and read as
		// metadata; the legacy values read as the contract says.
		const valid = status.valid_status_values;
		const legacy = status.legacy_status_values;
		const candidates = [...valid, ...Object.keys(legacy), ...format.live_statuses, "", "bogus", "Completed", "timed out"];
		for (const s of candidates) {
			eq(m.isTerminal(s), valid.includes(s), "isTerminal(" + s + ")");
			eq(m.readMetadata({ subagent_status: s }) !== null, valid.includes(s) || s in legacy, "readMetadata accepts status " + s);
		}
		for (const [s, want] of Object.entries(legacy)) {
			const withResult = m.readMetadata({ subagent_status: s, subagent_result_brief: "done" });
			eq(withResult?.status, want.with_result, s + " with a result");
			eq(withResult?.stopReason, want.stop_reason, s + " with a result: stop reason");
			eq(m.readMetadata({ subagent_status: s })?.status, want.without_result, s + " without a result");
		}
		// Stop reasons: exactly the contract's values have a badge and read
		// as metadata, with the contract's labels.
		for (const r of [...status.valid_stop_reason_values, "", "bogus", "max_turns_reached", "toString"]) {
			const ok = status.valid_stop_reason_values.includes(r);
			eq(m.stopLabel(r), ok ? "capped: " + status.stop_reason_labels[r] : "", "stopLabel(" + r + ")");
			eq(m.readMetadata({ subagent_status: "failed", subagent_stop_reason: r })?.stopReason, ok ? r : "", "readMetadata stop reason " + r);
		}
		// Refusals: exactly the contract's reasons read as metadata, and only
		// on a failed task.
		sameSet(m.REFUSAL_REASONS, status.valid_refusal_reasons, "refusal reasons");
		for (const r of [...status.valid_refusal_reasons, "", "bogus", "max_running", "toString"]) {
			const ok = status.valid_refusal_reasons.includes(r);
			eq(m.readMetadata({ subagent_status: "failed", subagent_refusal: { reason: r, limit: 3 } })?.refusal?.reason ?? "", ok ? r : "", "readMetadata refusal " + r);
			eq(m.readMetadata({ subagent_status: "completed", subagent_refusal: { reason: r, limit: 3 } })?.refusal ?? null, null, "readMetadata refusal " + r + " of a completed task");
		}
		for (const limit of [-1, 2.5, "4", true, null]) eq(m.readMetadata({ subagent_status: "failed", subagent_refusal: { reason: "max_total_per_run", limit } })?.refusal ?? null, null, "readMetadata refusal limit " + JSON.stringify(limit));
		// The contract's ToolMessages, and the legacy rows, read as a card
		// as agent.Card reads them, with the status line views writes.
		check(messages.tool_messages.length > 0 && messages.legacy_messages.length > 0 && messages.bounded_messages.length > 0, "the tool message contract has no cases");
		for (const tc of [...messages.tool_messages, ...messages.legacy_messages, ...messages.bounded_messages]) {
			const card = m.newCard("r", "t");
			m.applyToolMessage(card, { content: tc.content, additional_kwargs: tc.additional_kwargs });
			const w = tc.card;
			const refusal = (r) => (r ? [r.reason, r.limit] : null);
			eq(JSON.stringify([card.status, card.stopReason, card.result, card.error, refusal(card.refusal)]), JSON.stringify([w.status, w.stop_reason, w.result, w.error, refusal(w.refusal)]), tc.name);
			const line = (card.status === "failed" && m.notStartedText(card.refusal)) || m.statusText(card.status, "", false);
			eq(line, w.status_text, tc.name + ": status line");
		}
		// Usage: the contract's three keys, integers >= 0, or nothing.
		const usage = Object.fromEntries(status.usage_keys.map((k, i) => [k, i + 1]));
		check(m.normalizeUsage(usage) !== null, "a full usage snapshot is refused");
		for (const k of status.usage_keys) {
			for (const bad of [undefined, -1, 1.5, true, "3", null]) {
				const u = { ...usage, [k]: bad };
				if (bad === undefined) delete u[k];
				eq(m.normalizeUsage(u), null, "usage with " + k + " = " + String(bad));
			}
		}
		// Task frames: exactly the contract's types change a card, and a
		// terminal frame gives the status the contract maps it from.
		const frames = Object.keys(stream.task_frames);
		sameSet(m.TASK_FRAME_TYPES, frames, "task frame types");
		for (const type of [...frames, ...Object.keys(stream.event_types), ...stream.ephemeral_frame_types, stream.message_frame_type, "task_bogus"]) {
			eq(m.applyTaskFrame(m.newCard("r", "t"), type, { version: 1 }, 1), frames.includes(type), "applyTaskFrame accepts " + type);
		}
		for (const [s, type] of Object.entries(stream.event_types["subagent.end"].frame_type_by_status)) {
			const card = m.newCard("r", "t");
			m.applyTaskFrame(card, type, { version: 1, status: s, usage: null }, 1);
			eq(card.status, s, type + " with status " + s);
		}
		return problems;
	})(%s, %s, %s, %s, %s, %s)`, read("card_format_contract.json"), read("subagent_status_contract.json"), read("run_event_stream_contract.json"), goLabels, read("tool_message_contract.json"), goCounts))
	for _, p := range problems {
		t.Error(p)
	}
}

// TestBrowserCardMerge feeds static/merge.js real-shaped frames in
// random orders with duplicates: a card's visible state is that of its
// newest frame, its status never leaves a terminal state and its total
// never goes down.
func TestBrowserCardMerge(t *testing.T) {
	_, b := openEmptyThread(t, "merge")
	problems := evalAwait[[]string](b, `(async () => {
		const m = { ...(await import("/static/format.js")), ...(await import("/static/metadata.js")), ...(await import("/static/merge.js")) };
		const problems = [];
		const usage = (n) => ({ input_tokens: n - 1, output_tokens: 1, total_tokens: n });
		const base = { task_id: "t", execution_id: "e", run_id: "r", model_name: "demo-deep" };
		const frames = [
			["task_queued", { ...base, version: 1, description: "D", prompt: "P", subagent_type: "general-purpose" }],
			["task_started", { ...base, version: 2, description: "D", prompt: "P", subagent_type: "general-purpose" }],
			["task_running", { ...base, version: 3, message_index: 1, usage: usage(100), step: { kind: "ai", text: "a", truncated: false, tool_calls: [{ name: "ls", args: "{}" }] } }],
			["task_running", { ...base, version: 4, message_index: 2, usage: usage(100), step: { kind: "tool", text: "x", truncated: false, tool_name: "ls" } }],
			["task_running", { ...base, version: 5, message_index: 3, usage: usage(250), step: { kind: "ai", text: "b", truncated: false } }],
			["task_completed", { ...base, version: 6, usage: usage(250), result: "R", stop_reason: "turn_capped" }],
		];
		const visible = (c) => JSON.stringify([c.status, c.total, c.modelName, c.stopReason, c.result, c.error, c.version]);
		const inOrder = m.newCard("r", "t");
		for (const [i, [type, d]] of frames.entries()) m.applyTaskFrame(inOrder, type, d, i + 10);
		const rank = (s) => (m.isTerminal(s) ? 2 : s === "running" ? 1 : 0);
		let seed = 42; // a fixed LCG, so a failing order can be replayed
		const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
		for (let round = 0; round < 200; round++) {
			const shuffled = [...frames, ...frames.filter(() => random() < 0.5)];
			for (let i = shuffled.length - 1; i > 0; i--) {
				const j = Math.floor(random() * (i + 1));
				[shuffled[i], shuffled[j]] = [shuffled[j], shuffled[i]];
			}
			// An older running frame with a lower usage after the end.
			shuffled.push(["task_running", { ...base, version: 4, message_index: 2, usage: usage(1), step: { kind: "ai", text: "old", truncated: false } }]);
			const card = m.newCard("r", "t");
			let status = card.status, total = -1;
			for (const [type, d] of shuffled) {
				m.applyTaskFrame(card, type, d, null);
				if (rank(card.status) < rank(status)) problems.push("status went back from " + status + " to " + card.status);
				if ((card.total ?? -1) < total) problems.push("total went down from " + total + " to " + card.total);
				status = card.status;
				total = card.total ?? -1;
			}
			if (visible(card) !== visible(inOrder)) problems.push("order " + shuffled.map(([, d]) => d.version) + ": " + visible(card) + ", in order " + visible(inOrder));
		}
		// A newer running frame after the end cannot revive the card or lower its total.
		m.applyTaskFrame(inOrder, "task_running", { ...base, version: 9, message_index: 4, usage: usage(5), step: { kind: "ai", text: "late", truncated: false } }, null);
		if (inOrder.status !== "completed" || inOrder.total !== 250) problems.push("a late frame changed a finished card: " + visible(inOrder));
		// The ToolMessage is the final word, tolerant of legacy metadata.
		const legacy = m.newCard("r", "t");
		m.applyToolMessage(legacy, { content: "Task Succeeded. Result: ok", additional_kwargs: { subagent_status: "max_turns_reached", subagent_result_brief: "ok", subagent_token_usage: usage(7) }, html: "<p>ok</p>" });
		if (visible(legacy) !== JSON.stringify(["completed", 7, "", "turn_capped", "ok", "", 0]) || legacy.resultHTML !== "<p>ok</p>") problems.push("legacy metadata: " + visible(legacy));
		const bare = m.newCard("r", "t");
		m.applyToolMessage(bare, { content: "Task failed. Error: boom", additional_kwargs: { subagent_status: "weird" } });
		if (bare.status !== "failed" || bare.error !== "boom") problems.push("unknown status must fall back to the content: " + visible(bare));
		return problems;
	})()`)
	for _, p := range problems {
		t.Error(p)
	}
}

// TestBrowserCardsLive runs three subagents in parallel on three models,
// one of which reports no usage: each card shows its own model from the
// moment it starts; totals grow live, never go down and end at the
// ToolMessage's figure; the silent model's card says collecting…, then
// usage unavailable, never 0; the usage panel matches the ledger; a
// reload after the end shows the same cards.
func TestBrowserCardsLive(t *testing.T) {
	a := newApp(t,
		withModels(demoModel("demo-fast", 200, 2), demoModel("demo-deep", 250, 2), noUsage(demoModel("demo-quiet", 200, 2))),
		withSubagents(agent.SubagentsConfig{Agents: map[string]agent.AgentConfig{
			"researcher": {Description: "Investigates one question.", Model: "demo-deep", Tools: &[]string{"ls", "read_file", "write_file"}},
			"quiet":      {Description: "Reports no usage.", Model: "demo-quiet"},
		}}),
	)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("parallel")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")
	evalAs[chromedp.Void](b, recordCardsJS)

	b.sendMessage("Compare:\n- alpha\n- researcher: beta\n- quiet: gamma")
	b.waitFor("three running cards with figures", `(() => {
		const cs = [...document.querySelectorAll("#messages section.card")];
		return cs.length === 3 && cs.every((c) => c.dataset.status === "running") && cs.filter((c) => c.dataset.totalTokens !== "").length === 2;
	})()`, 20*time.Second)
	b.shot("cards-running")
	b.waitRunEnd(a, th)
	b.waitFor("every card finished", `[...document.querySelectorAll("#messages section.card")].every((c) => c.dataset.status === "completed")`, 10*time.Second)

	want := map[string]struct{ name, label string }{}
	for _, task := range u.thread(th).Tasks {
		m := map[string]string{"general-purpose": "demo-fast", "researcher": "demo-deep", "quiet": "demo-quiet"}[task.SubagentType]
		if task.ModelName != m {
			t.Errorf("task %s (%s) ran on %q, want %q", task.TaskID, task.SubagentType, task.ModelName, m)
		}
		want[task.TaskID] = struct{ name, label string }{m, strings.ToUpper(m[:1]) + m[1:]}
	}
	if len(want) != 3 {
		t.Fatalf("%d tasks, want 3", len(want))
	}

	final := u.finalUsage(th)
	samples := evalAs[[]cardSample](b, `window.__cardLog`)
	byTask := map[string][]cardSample{}
	for _, s := range samples {
		byTask[s.Task] = append(byTask[s.Task], s)
	}
	for task, w := range want {
		log := byTask[task]
		if len(log) == 0 {
			t.Errorf("card %s: never rendered", task)
			continue
		}
		var prev int64 = -1
		running := map[int64]bool{}
		wasTerminal := false
		for _, s := range log {
			if s.Status != "queued" && (s.Model != w.label || s.ModelTitle != w.name) {
				t.Errorf("card %s (%s): shows model %q (title %q), want %q (%q)", task, s.Status, s.Model, s.ModelTitle, w.label, w.name)
			}
			if wasTerminal && !isTerminal(s.Status) {
				t.Errorf("card %s: went back to %s after finishing", task, s.Status)
			}
			wasTerminal = wasTerminal || isTerminal(s.Status)
			tokens := ""
			if s.Tokens != nil {
				tokens = *s.Tokens
			}
			if w.name == "demo-quiet" {
				wantTokens := map[bool]string{false: "collecting…", true: "usage unavailable"}[isTerminal(s.Status)]
				if s.Total != "" || tokens != wantTokens {
					t.Errorf("quiet card (%s): total %q, label %q, want no total and %q", s.Status, s.Total, tokens, wantTokens)
				}
				continue
			}
			if s.Total == "" {
				if tokens != "collecting…" || isTerminal(s.Status) {
					t.Errorf("card %s (%s): no total, label %q", task, s.Status, tokens)
				}
				continue
			}
			n, err := strconv.ParseInt(s.Total, 10, 64)
			if err != nil || n <= 0 {
				t.Errorf("card %s: total %q", task, s.Total)
				continue
			}
			if n < prev {
				t.Errorf("card %s: total went down from %d to %d", task, prev, n)
			}
			prev = n
			if got := views.TokenLabel(&n, isTerminal(s.Status)); tokens != got {
				t.Errorf("card %s: label %q for %d tokens, want %q", task, tokens, n, got)
			}
			if s.Status == "running" {
				running[n] = true
			}
		}
		if w.name == "demo-quiet" {
			if _, ok := final[task]; ok {
				t.Errorf("the quiet model's ToolMessage has usage %d", final[task])
			}
			continue
		}
		if len(running) < 2 {
			t.Errorf("card %s: totals seen while running %v: want it to grow live", task, running)
		}
		if last := log[len(log)-1]; last.Total != strconv.FormatInt(final[task], 10) || last.Tokens == nil || *last.Tokens != label(final[task]) {
			t.Errorf("card %s ends at %q (%v), the ToolMessage says %d", task, last.Total, last.Tokens, final[task])
		}
	}

	// The usage panel shows the ledger's totals once the run has ended.
	var usage struct {
		Total, Lead, Subagents struct {
			TotalTokens     int64 `json:"total_tokens"`
			UnreportedCalls int64 `json:"unreported_calls"`
		}
		ByModel map[string]any `json:"by_model"`
	}
	u.mustJSON("GET", "/api/threads/"+th+"/usage", nil, http.StatusOK, &usage)
	if usage.Total.UnreportedCalls == 0 {
		t.Fatal("the silent model's calls are not in the ledger as not reported")
	}
	// The silent model's calls show as not reported beside the figures,
	// filled live by static/usage-panel.js.
	b.waitFor("the usage panel's totals", fmt.Sprintf(`(() => {
		const v = (k) => document.querySelector('#usage-panel [data-usage="' + k + '"]')?.textContent;
		const quiet = document.querySelector('#usage-panel [data-usage="unreported"]');
		return v("total") === %q && v("lead") === %q && v("subagents") === %q && !quiet.hidden && quiet.textContent === %q;
	})()`, views.TokenCount(usage.Total.TotalTokens), views.TokenCount(usage.Lead.TotalTokens), views.TokenCount(usage.Subagents.TotalTokens), notReportedText(usage.Total.UnreportedCalls)), 5*time.Second)
	if n := evalAs[int](b, `document.querySelectorAll('#usage-panel [data-usage="by-model"] tr').length`); n != len(usage.ByModel) {
		t.Errorf("the usage panel lists %d models, the ledger %d", n, len(usage.ByModel))
	}
	b.shot("cards-done")

	live := b.cards()
	b.reload()
	sameCards(t, "after a reload", b.cards(), live)

	b.do("phone viewport", chromedp.EmulateViewport(375, 740, chromedp.EmulateMobile))
	b.reload()
	if w := evalAs[int](b, `document.documentElement.scrollWidth`); w > 375 {
		t.Errorf("the page is %d px wide on a 375 px screen", w)
	}
	b.shot("cards-phone")
}

// TestBrowserCardsCancelOne cancels one running card with its Cancel
// button while another runs on: it ends cancelled with its usage, the
// other completes.
func TestBrowserCardsCancelOne(t *testing.T) {
	// The other card's model answers only once the test lets it: it is
	// still running after the cancel however slow the machine, and its
	// four turns of 400 ms no longer race the page.
	held := make(chan struct{})
	release := sync.OnceFunc(func() { close(held) })
	a := newApp(t, withHostBash(t),
		withModels(demoModel("demo-fast", 150, 2), demoModel("demo-deep", 400, 2)),
		withDemo("demo-deep", demo.WithSleep(heldBy(held))),
		withSubagents(agent.SubagentsConfig{CancelGraceSeconds: 5, Agents: map[string]agent.AgentConfig{
			"researcher": {Description: "Investigates one question.", Model: "demo-deep", Tools: &[]string{"ls", "read_file", "write_file"}},
		}}),
	)
	t.Cleanup(release) // before the app closes
	u := a.newUser("ann@example.com", false)
	th := u.newThread("cancel one")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	b.sendMessage("Two jobs:\n- `sleep 30`\n- researcher: alpha")
	b.waitFor("the sleeping card running its command beside the other", cardJS("sleep 30")+`?.querySelector(".card-status").textContent === "Running \u0060sleep 30\u0060" && `+cardJS("alpha")+`?.dataset.status === "running"`, 20*time.Second)
	sleeper := b.card("sleep 30")
	if !sleeper.Cancel || sleeper.Total == "" {
		t.Fatalf("the running card shows no Cancel button or no total: %+v", sleeper)
	}
	b.shot("before-cancel")
	b.activate("cancel the sleeping card", cardSel(sleeper.ID, ".card-cancel"))
	b.waitFor("the card cancelled", cardJS("sleep 30")+`.dataset.status === "cancelled"`, 10*time.Second)
	if s := b.card("alpha").Status; s != "running" {
		t.Errorf("the other card is %s once the first was cancelled, want still running", s)
	}
	release()
	b.waitRunEnd(a, th)
	final := u.finalUsage(th)
	got := b.card("sleep 30")
	if got.StatusText != "Cancelled" || got.Cancel || got.Error != nil || got.Tokens == nil || got.Total != strconv.FormatInt(final[got.TaskID], 10) || *got.Tokens != label(final[got.TaskID]) {
		t.Errorf("the cancelled card: %+v, want Cancelled with %d tokens", got, final[got.TaskID])
	}
	if o := b.card("alpha"); o.Status != "completed" || o.Total != strconv.FormatInt(final[o.TaskID], 10) {
		t.Errorf("the other card: %+v, want completed with %d tokens", o, final[o.TaskID])
	}
	b.shot("after-cancel")
}

// heldBy is a demo model's wait that first waits for held to close (or
// the call's context to end).
func heldBy(held <-chan struct{}) func(context.Context, time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		select {
		case <-held:
		case <-ctx.Done():
			return ctx.Err()
		}
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-tm.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// TestBrowserCardsReloadAndStop reloads mid-run and after the end: the
// cards read the same as they did live. Stop on the run cancels every
// running card, each keeping its usage.
func TestBrowserCardsReloadAndStop(t *testing.T) {
	a := newApp(t, withHostBash(t), withModels(demoModel("demo-fast", 150, 2)), withSubagents(agent.SubagentsConfig{CancelGraceSeconds: 5}))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("reload and stop")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	b.sendMessage("Three jobs:\n- `sleep 30`\n- `sleep 31`\n- alpha")
	b.waitFor("two cards running bash, one done", `(() => {
		const cs = [...document.querySelectorAll("#messages section.card")];
		const bash = cs.filter((c) => c.dataset.status === "running" && c.querySelector(".card-status").textContent.startsWith("Running \u0060sleep 3") && c.dataset.totalTokens !== "");
		return cs.length === 3 && bash.length === 2 && cs.some((c) => c.dataset.status === "completed");
	})()`, 20*time.Second)
	live := b.cards()
	b.shot("mid-run")
	b.reload()
	sameCards(t, "reloaded mid-run", b.cards(), live)

	b.activate("stop the run", `#stop-button`)
	b.waitRunEnd(a, th)
	b.waitFor("the running cards cancelled", `[...document.querySelectorAll("#messages section.card")].filter((c) => c.dataset.status === "cancelled").length === 2`, 10*time.Second)
	final := u.finalUsage(th)
	for _, c := range b.cards() {
		if c.Tokens == nil || c.Total != strconv.FormatInt(final[c.TaskID], 10) || *c.Tokens != label(final[c.TaskID]) {
			t.Errorf("card %q (%s) shows %q / %v, the ToolMessage says %d tokens", c.Title, c.Status, c.Total, c.Tokens, final[c.TaskID])
		}
		if want := map[bool]string{true: "cancelled", false: "completed"}[strings.Contains(c.Prompt, "sleep")]; c.Status != want {
			t.Errorf("card %q is %s, want %s", c.Title, c.Status, want)
		}
	}
	ended := b.cards()
	b.shot("stopped")
	b.reload()
	sameCards(t, "reloaded after the end", b.cards(), ended)
}

// TestBrowserCardsBackfill expands a card after a mid-run reload, by
// keyboard: its timeline holds every step of the task exactly once, in
// seq order, some from the events API (paged two at a time) and some that
// arrived live. The expanded state survives live updates and reloads.
func TestBrowserCardsBackfill(t *testing.T) {
	// A turn of a second leaves the reload, however slow on a loaded
	// machine, several steps before the task ends: one must arrive live.
	a := newApp(t, withModels(demoModel("demo-fast", 1000, 2)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("backfill")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "?steps_page=2")

	b.sendMessage("Two jobs:\n- alpha\n- beta")
	b.waitFor("a first step", cardJS("alpha")+`?.dataset.steps >= 1`, 20*time.Second)
	b.reload()
	card := b.card("alpha")
	if card.Status != "running" {
		t.Fatalf("after the reload the card is %s, want still running", card.Status)
	}
	rendered, _ := strconv.Atoi(evalAs[string](b, cardJS("alpha")+`.dataset.steps`))
	if rendered < 1 {
		t.Fatalf("the reloaded card has %d steps", rendered)
	}
	b.waitFor("a step that arrives live", fmt.Sprintf(`%s.dataset.steps > %d`, cardJS("alpha"), rendered), 10*time.Second)

	toggle := cardSel(card.ID, ".card-toggle")
	b.do("focus the toggle", chromedp.Focus(toggle))
	b.do("press Enter", chromedp.KeyEvent(kb.Enter))
	if got := b.card("alpha"); got.Expanded != "true" || !evalAs[bool](b, cardJS("alpha")+`.querySelector(".card-body").checkVisibility()`) {
		t.Fatalf("Enter did not expand the card: aria-expanded %q", got.Expanded)
	}
	if !evalAs[bool](b, fmt.Sprintf(`document.activeElement === document.querySelector(%q)`, toggle)) {
		t.Error("the toggle lost the focus")
	}
	if o := evalAs[string](b, fmt.Sprintf(`getComputedStyle(document.querySelector(%q)).outlineStyle`, toggle)); o == "none" {
		t.Error("the focused toggle shows no outline")
	}

	b.waitRunEnd(a, th)
	want := u.stepSeqs(th, card.RunID(), card.TaskID)
	b.waitFor("the whole timeline", fmt.Sprintf(`%s.querySelectorAll(".card-step").length === %d`, cardJS("alpha"), len(want)), 10*time.Second)
	got := b.card("alpha")
	if !slices.Equal(seqsOf(got.Steps), want) {
		t.Errorf("the timeline has steps %v, the events API %v", seqsOf(got.Steps), want)
	}
	if got.Expanded != "true" {
		t.Error("the card collapsed during live updates")
	}
	if n := evalAs[int](b, `performance.getEntriesByType("resource").filter((e) => e.name.includes("/events?")).length`); n < 2 {
		t.Errorf("the timeline was loaded in %d requests, want pages of 2", n)
	}
	if other := b.card("beta"); other.Expanded != "false" || len(other.Steps) != 0 {
		t.Errorf("the other card changed: expanded %q, %d steps shown", other.Expanded, len(other.Steps))
	}
	b.shot("expanded")

	// A reload restores the expanded card and loads its whole timeline.
	b.reload()
	b.waitFor("the restored timeline", fmt.Sprintf(`%s.querySelectorAll(".card-step").length === %d`, cardJS("alpha"), len(want)), 10*time.Second)
	if got := b.card("alpha"); got.Expanded != "true" || !slices.Equal(seqsOf(got.Steps), want) {
		t.Errorf("after a reload: expanded %q, steps %v, want %v", got.Expanded, seqsOf(got.Steps), want)
	}
	if b.card("beta").Expanded != "false" {
		t.Error("the other card is expanded after a reload")
	}

	// Space collapses it, and it stays collapsed after a reload.
	b.do("focus the toggle", chromedp.Focus(toggle))
	b.do("press Space", chromedp.KeyEvent(" "))
	if got := b.card("alpha"); got.Expanded != "false" || evalAs[bool](b, cardJS("alpha")+`.querySelector(".card-body").checkVisibility()`) {
		t.Errorf("Space did not collapse the card: aria-expanded %q", got.Expanded)
	}
	b.reload()
	if got := b.card("alpha"); got.Expanded != "false" {
		t.Error("the collapsed card is expanded after a reload")
	}
}

// RunID is the run of a card, from its DOM id (card-{run}-{task}).
func (c cardView) RunID() string {
	return strings.TrimSuffix(strings.TrimPrefix(c.ID, "card-"), "-"+c.TaskID)
}

// nextFrame reads the next persisted frame of a stream.
func nextFrame(t *testing.T, conn *websocket.Conn) (json.RawMessage, wsFrame) {
	t.Helper()
	for {
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, raw, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("read frame: %v", err)
		}
		var f wsFrame
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		if f.Seq != nil {
			return raw, f
		}
	}
}

// framesUntil reads persisted frames up to and including the first of
// type last.
func framesUntil(t *testing.T, conn *websocket.Conn, last string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for {
		raw, f := nextFrame(t, conn)
		out = append(out, raw)
		if f.Type == last {
			return out
		}
	}
}

// withoutSeq is a frame with its seq set to null, so the page's seq check
// lets it through to the cards' own merge.
func withoutSeq(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["seq"] = json.RawMessage("null")
	out, _ := json.Marshal(m)
	return out
}

func (b *browser) inject(frames []json.RawMessage) {
	b.t.Helper()
	list, _ := json.Marshal(frames)
	evalAs[chromedp.Void](b, fmt.Sprintf(`for (const f of %s) document.dispatchEvent(new CustomEvent("herd:frame", { detail: f }))`, list))
}

// TestBrowserCardsReplay injects replayed, duplicated and out-of-order
// frames through the page's herd:frame hook, while the run streams and
// after it ended: the cards end as a reload shows them, and nothing that
// comes after changes them.
func TestBrowserCardsReplay(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 150, 2)))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("replay")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")
	evalAs[chromedp.Void](b, recordCardsJS)
	conn, err := u.dial(th, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	b.sendMessage("Compare:\n- alpha\n- beta")
	// While the run streams, as each task frame reaches the page, send it
	// again (as is: the page's seq check drops it) and the frames before
	// it, newest first, without their seq: the cards' merge must drop them.
	var seen, taskFrames []json.RawMessage
	for {
		raw, f := nextFrame(t, conn)
		seen = append(seen, raw)
		if f.Type == "run.end" {
			break
		}
		if !strings.HasPrefix(f.Type, "task_") {
			continue
		}
		var d struct {
			TaskID  string `json:"task_id"`
			Version int    `json:"version"`
		}
		_ = json.Unmarshal(f.Data, &d)
		b.waitFor("the page has the frame", fmt.Sprintf(`+document.getElementById(%q)?.dataset.version >= %d`, "card-"+f.RunID+"-"+d.TaskID, d.Version), 10*time.Second)
		again := []json.RawMessage{raw}
		for i := len(taskFrames) - 1; i >= 0 && i >= len(taskFrames)-3; i-- {
			again = append(again, withoutSeq(t, taskFrames[i]))
		}
		b.inject(append(again, withoutSeq(t, raw)))
		taskFrames = append(taskFrames, raw)
	}
	b.waitRunEnd(a, th)
	b.waitFor("both cards done", `[...document.querySelectorAll("#messages section.card")].every((c) => c.dataset.status === "completed")`, 10*time.Second)
	b.activate("expand a card", cardSel(b.card("alpha").ID, ".card-toggle"))
	b.waitFor("its timeline", cardJS("alpha")+`.querySelectorAll(".card-step").length > 0`, 10*time.Second)
	live := b.cards()

	// Everything again: as is, without seq, backwards, twice; and an old
	// running frame with a lower usage after the terminal one.
	var stripped []json.RawMessage
	for i := len(seen) - 1; i >= 0; i-- {
		var f wsFrame
		_ = json.Unmarshal(seen[i], &f)
		if f.Type == "message" || strings.HasPrefix(f.Type, "task_") {
			stripped = append(stripped, withoutSeq(t, seen[i]))
		}
	}
	b.inject(seen)
	b.inject(append(stripped, stripped...))
	for _, raw := range taskFrames {
		var older map[string]any
		if err := json.Unmarshal(raw, &older); err != nil {
			t.Fatal(err)
		}
		if older["type"] != "task_running" {
			continue
		}
		older["seq"] = nil
		older["data"].(map[string]any)["usage"] = map[string]int{"input_tokens": 0, "output_tokens": 1, "total_tokens": 1}
		forged, _ := json.Marshal(older)
		b.inject([]json.RawMessage{forged})
		break
	}
	sameCards(t, "after replayed frames", b.cards(), live)

	last := map[string]cardSample{}
	for _, s := range evalAs[[]cardSample](b, `window.__cardLog`) {
		if s.Total == "1" {
			t.Errorf("card %s took the forged usage", s.Task)
		}
		if p, ok := last[s.Task]; ok {
			if isTerminal(p.Status) && !isTerminal(s.Status) {
				t.Errorf("card %s went from %s back to %s", s.Task, p.Status, s.Status)
			}
			pn, _ := strconv.Atoi(p.Total)
			sn, _ := strconv.Atoi(s.Total)
			if sn < pn {
				t.Errorf("card %s: total went down from %d to %d", s.Task, pn, sn)
			}
		}
		last[s.Task] = s
	}
	b.reload()
	sameCards(t, "after a reload", b.cards(), live)
}

// TestBrowserCardsTokenGate toggles the token gate as the admin while a
// page is open, a user's and the admin's own: the figures go within a
// second and come back within a second, with no reload; model labels
// stay; while off neither the page nor its frames carry a token figure,
// for the admin as for anyone (docs/DESIGN.md §9).
func TestBrowserCardsTokenGate(t *testing.T) {
	for _, role := range []string{"user", "admin"} {
		t.Run(role, func(t *testing.T) { testBrowserTokenGate(t, role == "admin") })
	}
}

func testBrowserTokenGate(t *testing.T, asAdmin bool) {
	a := newApp(t, withModels(demoModel("demo-fast", 150, 2), demoModel("demo-deep", 150, 2)))
	root := a.newUser("root@example.com", true)
	u := a.newUser("ann@example.com", false)
	if asAdmin {
		u = root
	}
	th := u.newThread("gate")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	b.sendMessage("Compare:\n- alpha\n- beta")
	b.waitRunEnd(a, th)
	b.waitFor("figures on the cards", `[...document.querySelectorAll("#messages section.card .card-tokens")].filter((t) => / tokens$/.test(t.textContent)).length === 2 && !!document.querySelector("#usage-panel")`, 10*time.Second)
	evalAs[chromedp.Void](b, `window.__samePage = true`)
	gate := func(on bool) {
		root.mustJSON("PUT", "/api/admin/settings", map[string]bool{"token_usage_enabled": on}, http.StatusOK, nil)
	}
	const hidden = `(() => {
		const html = document.documentElement.outerHTML;
		return document.querySelectorAll(".card-tokens").length === 0 && !document.querySelector("#usage-panel")
			&& !/data-total-tokens="\d/.test(html) && !/\d tokens</.test(html)
			&& [...document.querySelectorAll("#messages section.card .card-model")].every((m) => !m.hidden && m.textContent === "Demo-fast");
	})()`

	gate(false)
	b.waitFor("the figures gone within a second", hidden, time.Second)
	b.shot("gate-off")

	// While off, a new run's cards and frames carry no figure.
	lastSeq, err := a.store.LastSeq(context.Background(), th)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := u.dial(th, lastSeq)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	evalAs[chromedp.Void](b, `window.__leaks = []; new MutationObserver(() => {
		if (document.querySelector(".card-tokens") || /data-total-tokens="\d/.test(document.documentElement.outerHTML)) window.__leaks.push(document.documentElement.outerHTML.length);
	}).observe(document.getElementById("messages"), { subtree: true, childList: true, attributes: true, characterData: true })`)
	b.sendMessage("Again:\n- gamma\n- delta")
	frames := framesUntil(t, conn, "run.end")
	b.waitRunEnd(a, th)
	b.waitFor("four cards done", `[...document.querySelectorAll("#messages section.card")].filter((c) => c.dataset.status === "completed").length === 4`, 10*time.Second)
	for _, f := range frames {
		if strings.Contains(string(f), "_tokens") {
			t.Errorf("a frame carries a token figure under the gate: %s", f)
		}
	}
	if n := evalAs[int](b, `window.__leaks.length`); n > 0 {
		t.Errorf("token figures appeared %d times while the gate was off", n)
	}
	if !evalAs[bool](b, hidden) {
		t.Error("token figures on the page while the gate is off")
	}

	gate(true)
	b.waitFor("the figures back within a second", `(() => {
		const labels = [...document.querySelectorAll("#messages section.card .card-tokens")].map((t) => t.textContent);
		return labels.length === 4 && labels.every((l) => /^[\d,.]+[KM]? tokens$/.test(l)) && !!document.querySelector('#usage-panel [data-usage="total"]')?.textContent;
	})()`, time.Second)
	if !evalAs[bool](b, `window.__samePage === true`) {
		t.Error("the page reloaded")
	}
	final := u.finalUsage(th)
	for _, c := range b.cards() {
		if c.Total != strconv.FormatInt(final[c.TaskID], 10) || c.Model == nil || *c.Model != "Demo-fast" {
			t.Errorf("card %q: total %q, model %v; want %d tokens on Demo-fast", c.Title, c.Total, c.Model, final[c.TaskID])
		}
	}
	var usage struct {
		Total struct {
			TotalTokens int64 `json:"total_tokens"`
		} `json:"total"`
	}
	u.mustJSON("GET", "/api/threads/"+th+"/usage", nil, http.StatusOK, &usage)
	b.waitFor("the usage panel's total", fmt.Sprintf(`document.querySelector('#usage-panel [data-usage="total"]').textContent === %q`, views.TokenCount(usage.Total.TotalTokens)), 2*time.Second)
	b.shot("gate-on")
}

// TestBrowserCardsHostile runs subagents whose step text, result and
// error carry markup: the cards and their timelines show it as text, live
// and after a reload.
func TestBrowserCardsHostile(t *testing.T) {
	const evil = `<script>window.__pwned = "model"</script><img src=x onerror="window.__pwned = 'model'">`
	hostile := demoModel("demo-evil", 150, 2)
	hostile.Model = evil
	hostile.DisplayName = `<b>Evil</b>`
	hostile.FailAfter = 2
	a := newApp(t,
		withModels(demoModel("demo-fast", 150, 2), hostile),
		withSubagents(agent.SubagentsConfig{Agents: map[string]agent.AgentConfig{
			"evil": {Description: "Fails with markup in its error.", Model: "demo-evil"},
		}}),
	)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("hostile")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	b.sendMessage("Check:\n- <img src=x onerror=\"window.__pwned = 1\"> alpha <script>window.__pwned = 2</script>\n- evil: <img src=x onerror=\"window.__pwned = 3\"> beta")
	b.waitRunEnd(a, th)
	b.waitFor("both cards done", `[...document.querySelectorAll("#messages section.card")].every((c) => c.dataset.status === "completed" || c.dataset.status === "failed")`, 10*time.Second)
	for _, c := range b.cards() {
		b.activate("expand", cardSel(c.ID, ".card-toggle"))
	}
	for when := range 2 {
		if when == 1 {
			b.reload()
		}
		b.waitFor("the timelines", `[...document.querySelectorAll("#messages section.card")].every((c) => c.querySelectorAll(".card-step").length > 0 && c.querySelector(".card-steps-note").textContent === "")`, 10*time.Second)
		if n := evalAs[int](b, `document.querySelectorAll("#messages section.card :is(script, img, [onerror], b)").length`); n != 0 {
			t.Errorf("%d live elements from model output in the cards", n)
		}
		if v := evalAs[bool](b, `window.__pwned === undefined`); !v {
			t.Error("model output ran script")
		}
		ok := evalAs[map[string]bool](b, fmt.Sprintf(`(() => {
			const cs = [...document.querySelectorAll("#messages section.card")];
			const text = (sel) => cs.map((c) => [...c.querySelectorAll(sel)].map((n) => n.textContent).join("")).join("");
			return {
				// The answer is shown once, as the result; its step says so.
				timeline: text(".card-step .step-note") !== "" && text(".card-result").includes('<img src=x onerror="window.__pwned = 1">'),
				result: text(".card-result").includes("<script>window.__pwned = 2</script>"),
				error: text(".card-error").includes(%q),
				prompt: text(".card-prompt").includes('onerror="window.__pwned = 3"'),
				model: text(".card-model").includes("<b>Evil</b>"),
			};
		})()`, evil))
		for where, shown := range ok {
			if !shown {
				t.Errorf("reload %d: the hostile text is not shown as text in the %s", when, where)
			}
		}
	}
	b.shot("hostile")
}
