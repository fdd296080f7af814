package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/styles"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"herd/agent"
	"herd/server/render"
)

// steppedProvider streams each answer in parts: after each part it waits
// for the test on gate (before the next part, or before it returns), so a
// test sees the page between parts without timing guesses.
type steppedProvider struct {
	parts []string
	gate  chan struct{}
}

func (p steppedProvider) Complete(ctx context.Context, _ agent.Request, onDelta func(string)) (agent.Response, error) {
	for _, part := range p.parts {
		for _, c := range chunks(part, 7) {
			onDelta(c)
		}
		select {
		case <-p.gate:
		case <-ctx.Done():
			return agent.Response{}, ctx.Err()
		}
	}
	return agent.Response{CallID: uuid.NewString(), Text: strings.Join(p.parts, "")}, nil
}

// markdownAnswer streams a heading, a list, hostile markup and a Go code
// block in two parts: the first leaves the block open, the second closes
// it and ends the answer.
var markdownAnswer = []string{
	"# Plan\n\nSteps:\n\n- read the *notes*\n- run `go test`\n\n" +
		"Hostile: <img src=x onerror=\"window.__pwned = 1\"> [x](javascript:window.__pwned=2)\n\n" +
		"```go\nfunc main() {\n\tfmt.Println(\"a very long line that must scroll inside its block and never widen the page on a phone\")\n",
	"}\n```\n\nDone.",
}

// TestBrowserMarkdownStreams: an answer's Markdown is rendered while it
// streams — heading, list and an open code block, highlighted — before the
// run ends; hostile markup in it stays inert; the saved answer replaces
// the bubble with exactly the HTML it last showed (no jump); code is
// coloured for the light and the dark theme, with no serious axe-core
// violation; a phone's page does not widen. Screenshots: light, dark and a 390×844 phone, mid-stream and at
// the end.
func TestBrowserMarkdownStreams(t *testing.T) {
	axe := loadAxe(t)
	gate := make(chan struct{})
	a := newApp(t, func(c *appConfig) { c.provider = steppedProvider{parts: markdownAnswer, gate: gate} })
	u := a.newUser("ann@example.com", false)
	th := u.newThread("markdown")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	for i, look := range []struct {
		name, theme   string
		width, height int64
	}{
		{"light", "light", 0, 0},
		{"dark", "dark", 0, 0},
		{"phone", "light", 390, 844},
	} {
		if look.width > 0 {
			b.do("phone viewport", chromedp.EmulateViewport(look.width, look.height, chromedp.EmulateMobile))
			b.reload()
		}
		evalAs[chromedp.Void](b, fmt.Sprintf(`document.documentElement.dataset.theme = %q`, look.theme))
		b.sendMessage(fmt.Sprintf("Plan %d", i))

		// Mid-stream: rendered, the open block highlighted, the run on.
		b.waitFor("the rendered answer mid-stream", `(() => {
			const body = document.querySelector(".msg-streaming .msg-body");
			return body && body.querySelector("h1")?.textContent === "Plan" && body.querySelectorAll("ul > li").length === 2
				&& body.querySelector("li em")?.textContent === "notes" && body.querySelector("li code")?.textContent === "go test"
				&& body.querySelector('pre.chroma code.language-go .kd')?.textContent === "func";
		})()`, 15*time.Second)
		if state := evalAs[string](b, `document.querySelector("#composer").dataset.state`); state == "idle" {
			t.Errorf("%s: the composer is idle while the answer streams", look.name)
		}
		if raw := evalAs[bool](b, `document.querySelector(".msg-streaming .msg-body").textContent.includes("# Plan")`); raw {
			t.Errorf("%s: raw Markdown shown while streaming", look.name)
		}
		b.inert(look.name + " mid-stream")
		b.shot(look.name + "-streaming")

		// The last part: the bubble shows all of it before the message
		// is saved; the saved message shows the same HTML.
		gate <- struct{}{}
		b.waitFor("the whole answer in the bubble", `document.querySelector(".msg-streaming .msg-body")?.textContent.includes("Done.")`, 15*time.Second)
		last := evalAs[string](b, `document.querySelector(".msg-streaming .msg-body").innerHTML`)
		gate <- struct{}{}
		b.waitRunEnd(a, th)
		b.waitFor("the saved answer", fmt.Sprintf(`document.querySelectorAll("article.msg-ai:not(.msg-streaming) .msg-body").length === %d`, i+1), 15*time.Second)
		if final := evalAs[string](b, `[...document.querySelectorAll("article.msg-ai .msg-body")].at(-1).innerHTML`); final != last {
			t.Errorf("%s: the saved answer differs from its last streamed state:\nstreamed %q\nsaved    %q", look.name, last, final)
		}
		b.inert(look.name + " saved")
		if n := evalAs[int](b, `[...document.querySelectorAll("article.msg-ai .msg-body")].at(-1).querySelectorAll("pre.chroma > .code-copy").length`); n != 1 {
			t.Errorf("%s: %d Copy buttons on the code block, want 1", look.name, n)
		}
		style := map[string]string{"light": render.LightStyle, "dark": render.DarkStyle}[look.theme]
		want := styles.Get(style).Get(chroma.KeywordDeclaration).Colour
		if got := evalAs[string](b, `getComputedStyle([...document.querySelectorAll("pre.chroma .kd")].at(-1)).color`); got != rgb(want) {
			t.Errorf("%s: func is %s, want %s (%s)", look.name, got, rgb(want), style)
		}
		if look.width > 0 {
			if w := evalAs[int](b, `document.documentElement.scrollWidth`); w > int(look.width) {
				t.Errorf("the page is %d px wide on a %d px phone", w, look.width)
			}
		}
		// Highlighted code keeps its contrast in either theme.
		b.checkAxe(axe, look.name+" saved")
		evalAs[chromedp.Void](b, `[...document.querySelectorAll("pre.chroma")].at(-1).scrollIntoView({block: "center"})`)
		b.shot(look.name + "-saved")
	}
}

// inert fails the test when hostile markup in the messages became live.
func (b *browser) inert(when string) {
	b.t.Helper()
	if n := evalAs[int](b, `document.querySelectorAll("#messages script, #messages img, #messages [onerror], #messages a[href^='javascript' i]").length`); n != 0 {
		b.t.Errorf("%s: %d live hostile elements in the messages", when, n)
	}
	if !evalAs[bool](b, `window.__pwned === undefined`) {
		b.t.Errorf("%s: hostile markup ran script", when)
	}
}

func rgb(c chroma.Colour) string {
	return fmt.Sprintf("rgb(%d, %d, %d)", c.Red(), c.Green(), c.Blue())
}

// chunks cuts s into pieces of about n bytes, never inside a character.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		k := min(n, len(s))
		for k < len(s) && !utf8.RuneStart(s[k]) {
			k++
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}
