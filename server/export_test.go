package server

import (
	"encoding/json"
	"herd/server/hub"
	"net/http"
	"strings"
	"testing"
)

// TestThreadExport: a thread downloads whole as Markdown (who wrote what,
// task results quoted under the answer, a fence that the content cannot
// close) and as JSON (every message, tokens only when the gate is on);
// other users get 404, a bad format 422.
func TestThreadExport(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	bob := a.newUser("bob@example.com", false)
	th := u.newThread("Export me")
	u.startRun(th, "Two jobs:\n- alpha\n- beta")
	a.waitIdle(th)

	r := u.do("GET", "/api/threads/"+th+"/export", nil)
	md := string(r.body)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/markdown") ||
		r.header.Get("Content-Disposition") != `attachment; filename="Export-me.md"` {
		t.Fatalf("markdown export: %d %v", r.status, r.header)
	}
	for _, want := range []string{"# Export me\n", "## You · ", "Two jobs:\n- alpha\n- beta", "## Assistant (Demo-fast) · ",
		"> **Subagent: alpha** (general-purpose)", "> Task Succeeded. Result: Finished: alpha", "Everything I delegated is done."} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md)
		}
	}

	var doc struct {
		Thread   threadJSON        `json:"thread"`
		Messages []hub.MessageJSON `json:"messages"`
	}
	r = u.do("GET", "/api/threads/"+th+"/export?format=json", nil)
	if r.status != http.StatusOK || json.Unmarshal(r.body, &doc) != nil {
		t.Fatalf("json export: %d %s", r.status, r.body)
	}
	var all struct {
		Messages []hub.MessageJSON `json:"messages"`
	}
	u.mustJSON("GET", "/api/threads/"+th+"?limit=200", nil, http.StatusOK, &all)
	if doc.Thread.ID != th || len(doc.Messages) != len(all.Messages) || len(doc.Messages) != 5 {
		t.Errorf("json export: thread %q with %d messages, the thread has %d", doc.Thread.ID, len(doc.Messages), len(all.Messages))
	}
	tokens := func() bool {
		return strings.Contains(string(u.do("GET", "/api/threads/"+th+"/export?format=json", nil).body), "total_tokens")
	}
	if !tokens() {
		t.Error("with the token gate on, the JSON export has no token figures")
	}
	a.newUser("root@example.com", true).mustJSON("PUT", "/api/admin/settings", map[string]bool{"token_usage_enabled": false}, http.StatusOK, nil)
	if tokens() {
		t.Error("with the token gate off, the JSON export shows token figures")
	}

	if r := bob.do("GET", "/api/threads/"+th+"/export", nil); r.status != http.StatusNotFound {
		t.Errorf("another user's export: %d, want 404", r.status)
	}
	if r := u.do("GET", "/api/threads/"+th+"/export?format=pdf", nil); r.status != http.StatusUnprocessableEntity {
		t.Errorf("format=pdf: %d, want 422", r.status)
	}
}

func TestFenced(t *testing.T) {
	if got := fenced("a\n```\nb"); got != "````\na\n```\nb\n````" {
		t.Errorf("fenced = %q", got)
	}
}
