package server

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"herd/agent"
	"herd/agent/openai"
	"herd/agent/openai/openaitest"
)

// TestBrowserThinking runs a thread against an OpenAI-compatible fake whose
// lead reasons in reasoning_content and whose subagent thinks in a <think>
// block: the page streams the lead's reasoning live into a collapsed
// Thinking block above the answer, keeps it out of the answer, shows the
// subagent's reasoning collapsed in its card's step, and a reload shows
// the same. Markup in reasoning stays text.
func TestBrowserThinking(t *testing.T) {
	slow := 250 * time.Millisecond
	fake := openaitest.NewServer(t,
		openaitest.Reply{
			Reasoning:  []string{"The user wants ", "a file listed; ", "a subagent ", "can do it."},
			ToolCalls:  []openaitest.ToolCall{{ID: "call_look", Name: agent.ToolTask, Args: `{"description":"Look around","prompt":"List the files.","subagent_type":"general-purpose"}`}},
			ChunkDelay: slow,
		},
		openaitest.Text("<think>Sub ", "ponders the ", "listing.</think>\n", "Found notes.txt."),
		openaitest.Reply{Reasoning: []string{"Report ", "the <img src=x onerror=\"window.__pwned = 1\"><b>finding</b>."}, Chunks: []string{"There is ", "notes.txt."}, ChunkDelay: slow},
	)
	p, err := openai.New(agent.ModelConfig{Name: "demo-fast", Provider: "openai", Model: "reasoner", BaseURL: fake.URL(), APIKey: "sk-test"},
		openai.WithHTTPClient(fake.Client()), openai.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	a := newApp(t, func(c *appConfig) { c.provider = p })
	u := a.newUser("ann@example.com", false)
	th := u.newThread("thinking")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	b.sendMessage("List my files.")
	// Live: the reasoning streams into the bubble's Thinking block, shown
	// but collapsed, while the answer has no text.
	b.waitFor("reasoning streaming live", `(() => {
		const block = document.querySelector(".msg-streaming .msg-thinking");
		return block && !block.hidden && !block.open && block.querySelector(".thinking-text").textContent.includes("a file listed")
			&& block.nextElementSibling?.matches(".msg-body") && document.querySelector(".msg-streaming .msg-body").textContent === "";
	})()`, 10*time.Second)
	b.shot("thinking-live")
	b.waitRunEnd(a, th)

	check := func(when string) {
		t.Helper()
		b.waitFor("two answers with their thinking "+when, `document.querySelectorAll("article.msg-ai > .msg-thinking").length === 2
			&& document.querySelectorAll("article.msg-ai > .msg-body").length === 1`, 10*time.Second)
		problems := evalAs[[]string](b, `(() => {
			const problems = [];
			const ais = [...document.querySelectorAll("article.msg-ai")];
			const want = ["The user wants a file listed; a subagent can do it.", 'Report the <img src=x onerror="window.__pwned = 1"><b>finding</b>.'];
			ais.forEach((ai, i) => {
				const block = ai.querySelector(":scope > .msg-thinking");
				if (!block) { problems.push("answer " + i + " has no Thinking block"); return; }
				if (block.open) problems.push("answer " + i + ": the Thinking block is open");
				if (block !== ai.firstElementChild) problems.push("answer " + i + ": the Thinking block is not above the answer");
				if (block.querySelector("summary").textContent !== "Thinking") problems.push("answer " + i + ": summary " + block.querySelector("summary").textContent);
				if (block.querySelector(".thinking-text").textContent !== want[i]) problems.push("answer " + i + ": thinking " + JSON.stringify(block.querySelector(".thinking-text").textContent));
			});
			// Reasoning is text: markup in it stays inert.
			if (document.querySelector(".thinking-text *") || window.__pwned) problems.push("markup in the reasoning was rendered");
			const body = document.querySelector("article.msg-ai > .msg-body").textContent.trim();
			if (body !== "There is notes.txt.") problems.push("answer text " + JSON.stringify(body));
			return problems;
		})()`)
		for _, p := range problems {
			t.Errorf("%s: %s", when, p)
		}
		// The card's step: its reasoning collapsed above its text.
		// A card keeps its expanded state across a reload.
		if evalAs[string](b, `document.querySelector(".card .card-toggle").getAttribute("aria-expanded")`) != "true" {
			b.activate("expand the card", ".card .card-toggle")
		}
		b.waitFor("the step's thinking "+when, `(() => {
			const step = document.querySelector(".card-step-ai");
			const block = step?.querySelector(".msg-thinking");
			// An answer without calls is the card's result, shown once: the
			// step says so below its thinking.
			const next = block?.nextElementSibling;
			const text = next?.matches(".step-note") ? document.querySelector(".card-result")?.textContent.trim() : next?.textContent;
			return block && !block.open && block.querySelector(".thinking-text").textContent === "Sub ponders the listing."
				&& text === "Found notes.txt.";
		})()`, 10*time.Second)
		b.activate("open the step's thinking", ".card-step-ai .msg-thinking > summary")
		b.shot("thinking-" + when)
		if result := evalAs[string](b, `document.querySelector(".card-result")?.textContent ?? ""`); result == "" || strings.Contains(result, "ponders") {
			t.Errorf("%s: the task result reads %q", when, result)
		}
	}
	check("live")
	b.reload()
	check("after-reload")
}
