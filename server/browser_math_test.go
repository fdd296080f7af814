package server

import (
	"testing"
	"time"
)

// mathAnswer streams inline and display math, currency and TeX that tries
// to link or inject script, in two parts.
var mathAnswer = []string{
	"Inline $x^2$ and \\(a_1 + b_2\\); it costs $5 and $10.\n\n$$\n\\int_0^1 x\\,dx = \\frac{1}{2}\n$$\n\n" +
		"Hostile: $\\href{javascript:window.__pwned=3}{click}$ and $<img src=x onerror=\"window.__pwned=4\">$ and " +
		"\\(\\url{javascript:window.__pwned=5}\\) and $\\htmlId{x}{y}$ and $\\frac{1$\n\n",
	"Done: \\[e^{i\\pi} + 1 = 0\\]",
}

// TestBrowserMath: math in an answer is typeset (KaTeX's MathML) while it
// streams and after a reload alike, inline and display; currency stays
// text; TeX that links to javascript: or carries HTML stays inert, and a
// formula KaTeX cannot read stays its TeX; no CSP violation (the browser
// fails the test on any console error).
func TestBrowserMath(t *testing.T) {
	gate := make(chan struct{})
	a := newApp(t, func(c *appConfig) { c.provider = steppedProvider{parts: mathAnswer, gate: gate} })
	u := a.newUser("ann@example.com", false)
	th := u.newThread("math")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	typeset := func(scope string) string {
		return `(() => {
			const body = [...document.querySelectorAll("` + scope + `")].at(-1);
			if (!body) return false;
			const inline = [...body.querySelectorAll(".math-inline")];
			const display = body.querySelector("div.math-display");
			return inline.length === 7
				&& inline[0].dataset.tex === "x^2" && !!inline[0].querySelector("math msup")
				&& inline[1].dataset.tex === "a_1 + b_2" && !!inline[1].querySelector("math msub")
				&& !!display?.querySelector("math[display=block] mfrac") && display?.dataset.tex.startsWith("\\int_0^1")
				&& inline[6].classList.contains("math-error") && inline[6].textContent === "\\frac{1"
				&& body.querySelector("p").textContent.endsWith("; it costs $5 and $10.");
		})()`
	}
	inert := func(when string) {
		t.Helper()
		b.inert(when)
		if n := evalAs[int](b, `document.querySelectorAll("#messages [href], #messages [src]").length`); n != 0 {
			t.Errorf("%s: %d elements with href or src in the messages", when, n)
		}
	}

	b.sendMessage("Some math, please")
	b.waitFor("math typeset mid-stream", typeset(".msg-streaming .msg-body"), 15*time.Second)
	inert("mid-stream")
	b.shot("math-streaming")

	gate <- struct{}{}
	b.waitFor("the display math of the last part", `!!document.querySelector(".msg-streaming .msg-body span.math-display[data-tex] math[display=block]")`, 15*time.Second)
	gate <- struct{}{}
	b.waitRunEnd(a, th)
	b.waitFor("math typeset in the saved answer", typeset("article.msg-ai:not(.msg-streaming) .msg-body"), 15*time.Second)
	inert("saved")

	b.reload()
	b.waitFor("math typeset after a reload", typeset("article.msg-ai .msg-body")+
		` && !!document.querySelector("article.msg-ai .msg-body span.math-display[data-tex] math[display=block]")`, 15*time.Second)
	inert("after a reload")
	b.shot("math-reloaded")
}
