package server

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserConsoleMCP: an admin tests and adds an HTTP MCP server with
// its header on the admin page, tests it again from its edit form (the
// header kept by its name alone) and deletes it, with no restart; the
// page never shows the header's value.
func TestBrowserConsoleMCP(t *testing.T) {
	servers, mcpURL := consoleMCPFixture(t)
	a := newApp(t, func(c *appConfig) { c.mcp = servers })
	admin := a.newUser("admin@example.com", true)
	b := newBrowser(t, a.http.URL)
	b.signIn(admin.email, "password123")

	fill := func() {
		b.do("fill the new MCP server",
			chromedp.WaitVisible(chromedp.CSS(`#mcp-add`)),
			chromedp.SendKeys(chromedp.CSS(`#new-mcp-name`), "search"),
			chromedp.SendKeys(chromedp.CSS(`#new-mcp-url`), mcpURL),
			chromedp.SendKeys(chromedp.CSS(`#new-mcp-headers`), "Authorization: "+mcpToken),
		)
	}
	b.navigate("/admin")
	fill()
	// Tested in place: the form keeps what was typed, the header included.
	b.activate("Test connection", `#mcp-add button[formaction="/admin/mcp/test"]`)
	b.waitFor("the connection's answer", `document.querySelector("#mcp-add output.test-answer.test-ok")?.textContent === "Connected: 1 tool: lookup."`, 20*time.Second)
	if kept := evalAs[string](b, `document.querySelector("#new-mcp-headers").value`); kept != "Authorization: "+mcpToken {
		t.Errorf("the headers after a test read %q, want what was typed", kept)
	}
	b.markPage()
	b.activate("Save", `#mcp-add button.button-primary`)
	b.waitNewPage("the server added", `document.querySelector(".notice-ok")?.textContent.includes("MCP server search added")
		&& !!document.querySelector("#mcp-search")`, 10*time.Second)
	b.shot("console-mcp-added")
	if html := evalAs[string](b, `document.documentElement.outerHTML`); strings.Contains(html, "SECRET") {
		t.Fatal("the admin page shows the header's value")
	}
	if lines := evalAs[string](b, `document.querySelector("#mcp-search textarea[name=headers]").value`); lines != "Authorization" {
		t.Errorf("the edit form's headers read %q, want the name alone", lines)
	}

	b.activate("open Edit", `#mcp-search details summary`)
	b.activate("Test connection", `#mcp-search form.model-form button[formaction="/admin/mcp/test"]`)
	b.waitFor("the edit form's answer", `document.querySelector("#mcp-search output.test-answer")?.textContent === "Connected: 1 tool: lookup."`, 20*time.Second)

	b.activate("open Delete", `#mcp-search details:nth-of-type(2) summary`)
	b.markPage()
	b.activate("Delete", `#mcp-search form.confirm button.button-danger`)
	b.waitNewPage("the server deleted", `document.querySelector(".notice-ok")?.textContent.includes("MCP server search deleted")
		&& !document.querySelector("#mcp-search")`, 10*time.Second)
	if st := servers.Status(); len(st) != 0 {
		t.Errorf("after the delete the servers are %+v", st)
	}
}
