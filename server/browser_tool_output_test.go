//lint:file-ignore SA1019 the fixtures log as MCP servers still do (logging is deprecated as of MCP 2026-07-28, and still works)

package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd/agent"
)

// gatedFixture is an MCP server whose tools report progress and log,
// then wait for their gate before they return text and an image.
func gatedFixture(t *testing.T, crawlGate, snapGate <-chan struct{}) *sdk.Server {
	pic := tinyPNG(t)
	s := sdk.NewServer(&sdk.Implementation{Name: "fixture", Version: "1"}, nil)
	tool := func(name string, steps int, gate <-chan struct{}) {
		s.AddTool(&sdk.Tool{Name: name, Description: "Works in steps.", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			token := req.Params.GetProgressToken()
			for i := 1; i <= steps; i++ {
				_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: float64(steps + 1), Message: fmt.Sprintf("page %d", i)})
				_ = req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "info", Data: fmt.Sprintf("read <b>page</b> %d", i)})
			}
			_ = req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "warning", Logger: name, Data: "one page was slow"})
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			_ = req.Session.Log(ctx, &sdk.LoggingMessageParams{Level: "error", Data: "a link was broken"})
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: name + " finished <i>ok</i>"},
				&sdk.ImageContent{MIMEType: "image/png", Data: pic},
				&sdk.ImageContent{MIMEType: "image/svg+xml", Data: []byte("<svg onload=alert(1)/>")},
			}}, nil
		})
	}
	tool("crawl", 2, crawlGate)
	tool("snap", 1, snapGate)
	return s
}

// setDark switches the page between light and dark (prefers-color-scheme).
func (b *browser) setDark(dark bool) {
	b.t.Helper()
	v := "light"
	if dark {
		v = "dark"
	}
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}}}); err != nil {
		b.t.Fatalf("color scheme %s: %v", v, err)
	}
}

// scrollTo brings the element sel picks to the middle of the viewport.
func (b *browser) scrollTo(sel string) {
	b.t.Helper()
	evalAs[chromedp.Void](b, fmt.Sprintf(`document.querySelector(%q).scrollIntoView({ block: "center" })`, sel))
}

// imagesLoadedJS is whether every tool image under the element sel picks
// has loaded as a picture.
func imagesLoadedJS(sel string) string {
	return fmt.Sprintf(`(() => {
		const imgs = [...document.querySelectorAll(%q + " img.tool-image")];
		return imgs.length === 1 && imgs.every((i) => i.complete && i.naturalWidth === 48);
	})()`, sel)
}

// logTextJS is the log lines under sel, as "level text|…".
func logTextJS(sel string) string {
	return fmt.Sprintf(`[...document.querySelectorAll(%q + " .log-line")].map((l) => l.dataset.level + " " + l.querySelector(".log-text").textContent).join("|")`, sel)
}

// TestBrowserToolOutput: a subagent's MCP call shows its progress live on
// the card's status line and its log lines live in the expanded card;
// once it returns, its tool step shows the image (served by herd as a
// PNG) and the kept log, with a note for the SVG it refused — after a
// reload too. The lead's own MCP call shows its progress next to the call
// while it runs, and its image and log below its result, live and after
// a reload. Tool text is escaped everywhere. Screenshots in light and
// dark.
func TestBrowserToolOutput(t *testing.T) {
	crawlGate, snapGate := make(chan struct{}), make(chan struct{})
	a := newApp(t, func(c *appConfig) {
		c.mcp = serveFixture(t, gatedFixture(t, crawlGate, snapGate))
		c.lead = agent.LeadConfig{Tools: &[]string{"mcp:fixture/snap"}}
		c.subagents = agent.SubagentsConfig{Agents: map[string]agent.AgentConfig{
			"crawler": {Description: "Crawls.", Tools: &[]string{"mcp:fixture/crawl"}},
		}}
	})
	u := a.newUser("ann@example.com", false)
	th := u.newThread("tools")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")

	// A subagent's call: progress on the status line, log lines live.
	b.sendMessage("- crawler: use fixture/crawl")
	card := `#messages section.card`
	b.waitFor("the card", `document.querySelector("#messages section.card") !== null`, 20*time.Second)
	b.activate("expand the card", card+" .card-toggle")
	b.waitFor("the crawl's progress on the card", `document.querySelector("#messages section.card .card-status").textContent === "crawl: 2 of 3 · page 2"`, 20*time.Second)
	b.waitFor("the crawl's log lines live in the card", fmt.Sprintf(`%s === "info read <b>page</b> 1|info read <b>page</b> 2|warning crawl: one page was slow"`, logTextJS(card+" .tool-live")), 20*time.Second)
	if n := evalAs[int](b, `document.querySelectorAll("#messages section.card .log-text b").length`); n != 0 {
		t.Errorf("a log line's markup was rendered: %d <b> elements", n)
	}
	b.setDark(false)
	b.shot("card-live-light")
	b.setDark(true)
	b.shot("card-live-dark")
	b.setDark(false)

	close(crawlGate)
	step := card + " .card-step-tool"
	b.waitFor("the crawl's image in its step", imagesLoadedJS(step), 20*time.Second)
	wantLog := "info read <b>page</b> 1|info read <b>page</b> 2|warning crawl: one page was slow|error a link was broken"
	b.waitFor("the crawl's kept log in its step", fmt.Sprintf(`%s === %q`, logTextJS(step), wantLog), 20*time.Second)
	b.waitFor("the live lines gone", `document.querySelector("#messages section.card .tool-live") === null`, 10*time.Second)
	if got := evalAs[string](b, `document.querySelector("#messages section.card .tool-image-omitted")?.textContent ?? ""`); got == "" {
		t.Error("the refused SVG has no note in the step")
	}
	b.waitRunEnd(a, th)
	if n := evalAs[int](b, `document.querySelectorAll("#messages .step-output i, #messages .tool-extra i").length`); n != 0 {
		t.Errorf("a tool result's markup was rendered: %d <i> elements", n)
	}
	b.activate("open the step's log", step+" .tool-log > summary")
	b.scrollTo(step + " .tool-extra")
	b.shot("card-done-light")
	b.setDark(true)
	b.shot("card-done-dark")
	b.setDark(false)

	// The lead's own call: progress next to it, output below its result.
	b.sendMessage("use fixture/snap")
	call := `#messages .tool-call[data-tool-call-id]`
	b.waitFor("the snap's progress next to the call", `document.querySelector("#messages .tool-call .tool-progress")?.textContent === "snap: 1 of 2 · page 1"`, 20*time.Second)
	b.activate("open the call", call+" > summary")
	b.waitFor("the snap's log lines live", fmt.Sprintf(`%s === "info read <b>page</b> 1|warning snap: one page was slow"`, logTextJS(call+" .tool-live")), 20*time.Second)
	b.shot("lead-live-light")
	close(snapGate)
	result := call + " .tool-result"
	b.waitFor("the snap's image below its result", imagesLoadedJS(result), 20*time.Second)
	b.waitFor("the progress and live lines gone", `document.querySelector("#messages .tool-call .tool-progress, #messages .tool-call .tool-live") === null`, 10*time.Second)
	b.waitRunEnd(a, th)
	b.activate("open the call's log", result+" .tool-log > summary")
	b.scrollTo(result + " .tool-extra")
	b.shot("lead-done-light")
	b.setDark(true)
	b.shot("lead-done-dark")
	b.setDark(false)

	if n := evalAs[int](b, `document.querySelectorAll("#messages .tool-output i, #messages .tool-extra i").length`); n != 0 {
		t.Errorf("the lead's tool result's markup was rendered: %d <i> elements", n)
	}

	// After a reload: the same, from what was kept.
	b.reload()
	if got := evalAs[string](b, logTextJS(result)); got != "info read <b>page</b> 1|warning snap: one page was slow|error a link was broken" {
		t.Errorf("after a reload the lead's call's log = %q", got)
	}
	b.waitFor("the snap's image after a reload", imagesLoadedJS(result), 10*time.Second)
	// The card comes back as the reader left it: expanded.
	evalAs[chromedp.Void](b, `(() => { const t = document.querySelector("#messages section.card .card-toggle"); if (t.getAttribute("aria-expanded") !== "true") t.click(); })()`)
	b.waitFor("the crawl's image after a reload", imagesLoadedJS(step), 20*time.Second)
	if got := evalAs[string](b, logTextJS(step)); got != wantLog {
		t.Errorf("after a reload the step's log = %q", got)
	}
	evalAs[chromedp.Void](b, `document.querySelector("#messages .tool-call").open = true`)
	evalAs[chromedp.Void](b, `document.querySelector("#messages section.card .card-step-tool .tool-log").open = true`)
	b.fullShot("reloaded-light")
}
