package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herd/agent/openai/openaitest"
)

// TestBrowserConsoleModel: an admin adds an OpenAI-compatible model on
// the admin page, tests its connection there and chats with it in a new
// thread, with no restart; the page never shows its key.
func TestBrowserConsoleModel(t *testing.T) {
	const key = "sk-browser-SECRET-7777abcd"
	fake := openaitest.NewServer(t)
	fake.SetFallback(func(req openaitest.ChatRequest) openaitest.Reply {
		switch {
		case len(req.Messages) > 0 && strings.HasPrefix(req.Messages[0].Text(), "You name chat threads."):
			return openaitest.Text("Console chat")
		case req.MaxTokens == 1 || req.MaxCompletionTokens == 1:
			return openaitest.Text("OK")
		}
		return openaitest.Text("Hello from the console model.")
	})
	a := newApp(t)
	admin := a.newUser("admin@example.com", true)
	b := newBrowser(t, a.http.URL)
	b.signIn(admin.email, "password123")

	b.navigate("/admin")
	b.do("fill the new model",
		chromedp.WaitVisible(chromedp.CSS(`#model-add`)),
		chromedp.SendKeys(chromedp.CSS(`#new-model-name`), "console-gpt"),
		chromedp.SendKeys(chromedp.CSS(`#new-model-display`), "Console GPT"),
		chromedp.SendKeys(chromedp.CSS(`#new-model-model`), "gpt-x"),
		chromedp.SendKeys(chromedp.CSS(`#new-model-base-url`), fake.URL()),
		chromedp.SendKeys(chromedp.CSS(`#new-model-api-key`), key),
	)
	// Test connection asks in place: the form keeps what was typed, the
	// key included, and the answer shows beside the button.
	b.activate("Test connection of the new model", `#test-new-model`)
	b.waitFor("the new model's answer", `document.querySelector("#model-add output.test-answer.test-ok")?.textContent === "Connected: Console GPT answered as gpt-x."`, 20*time.Second)
	if kept := evalAs[string](b, `[...document.querySelectorAll("#model-add input")].filter(i => i.type !== "hidden" && i.type !== "checkbox" && i.value !== "").map(i => i.value).join(" ")`); kept != "console-gpt Console GPT gpt-x "+fake.URL()+" "+key+" 0 0" {
		t.Errorf("the form after a test holds %q; want what was typed", kept)
	}
	b.markPage()
	b.activate("Save", `#model-add button.button-primary`)
	b.waitNewPage("the model added", `document.querySelector(".notice-ok")?.textContent.includes("Model console-gpt added")
		&& !!document.querySelector("#model-console-gpt")`, 10*time.Second)
	b.shot("console-model-added")
	if html := evalAs[string](b, `document.documentElement.outerHTML`); strings.Contains(html, "SECRET") {
		t.Fatal("the admin page shows the API key")
	}
	if note := evalAs[string](b, `document.querySelector("#model-demo-fast .model-note")?.textContent ?? ""`); note != "set in herd.yaml — edit there" {
		t.Errorf("a model of herd.yaml reads %q, want the note that it is edited there", note)
	}

	b.activate("open Edit", `#model-console-gpt details summary`)
	b.activate("Test connection", `#model-console-gpt form.model-form button[formaction="/admin/models/test"]`)
	b.waitFor("the connection's answer", `document.querySelector("#model-console-gpt output.test-answer")?.textContent === "Connected: Console GPT answered as gpt-x."`, 20*time.Second)

	// A subagent type added on the page may name the console's model.
	b.do("fill the new type",
		chromedp.SendKeys(chromedp.CSS(`#new-agent-name`), "writer"),
		chromedp.SendKeys(chromedp.CSS(`#new-agent-description`), "Writes release notes"),
		chromedp.SetValue(chromedp.CSS(`#new-agent-model`), "console-gpt"),
		chromedp.SendKeys(chromedp.CSS(`#new-agent-tools`), "read_file, ls"),
	)
	b.markPage()
	b.activate("Add type", `#agent-add button.button-primary`)
	b.waitNewPage("the type added", `document.querySelector(".notice-ok")?.textContent.includes("Subagent type writer added")
		&& !!document.querySelector("#agent-writer")`, 10*time.Second)
	var types struct {
		Agents []struct{ Name, Model string } `json:"agents"`
	}
	admin.mustJSON("GET", "/api/admin/agents", nil, http.StatusOK, &types)
	if len(types.Agents) != 1 || types.Agents[0].Model != "console-gpt" {
		t.Errorf("types after the form = %+v, want writer on console-gpt", types.Agents)
	}

	// A limit set on the page applies at once; herd.yaml's shows beside.
	if ph := evalAs[string](b, `document.querySelector("#limit-lead_max_turns").placeholder`); ph != "herd.yaml: 25" {
		t.Errorf("the turns field's placeholder is %q, want herd.yaml's value", ph)
	}
	b.do("set the lead's turns", chromedp.SendKeys(chromedp.CSS(`#limit-lead_max_turns`), "9"))
	b.markPage()
	b.activate("Save limits", `#limits button.button-primary`)
	b.waitNewPage("the limits saved", `document.querySelector(".notice-ok")?.textContent.includes("Limits saved")`, 10*time.Second)
	if got := a.rt.Limits().MaxTurns; got != 9 {
		t.Errorf("after Save limits the runtime's max turns are %d, want 9", got)
	}

	b.navigate("/threads/new")
	b.waitFor("the new-thread page", `document.documentElement.dataset.herdReady === "1" && !!document.querySelector('#composer-model option[value="console-gpt"]')`, 10*time.Second)
	evalAs[chromedp.Void](b, `document.querySelector("#composer-model").value = "console-gpt"`)
	b.sendMessage("Hello?")
	b.waitFor("the console model's answer", `[...document.querySelectorAll("article.msg-ai .msg-body")].some(e => e.textContent.includes("Hello from the console model."))`, 20*time.Second)
	b.shot("console-model-answered")
	var chat int
	for _, r := range fake.Requests() {
		if got := r.Header.Get("Authorization"); got != "Bearer "+key {
			t.Errorf("a request with %q, want the key typed in the console", got)
		}
		title := len(r.Chat.Messages) > 0 && strings.HasPrefix(r.Chat.Messages[0].Text(), "You name chat threads.")
		if r.Chat.Model == "gpt-x" && !title && lastUserText(r.Chat) == "Hello?" {
			chat++
		}
	}
	if chat != 1 {
		t.Errorf("%d chat requests reached the console's model, want 1", chat)
	}
}

func lastUserText(req openaitest.ChatRequest) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			return req.Messages[i].Text()
		}
	}
	return ""
}
