package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"herd/agent"
	"herd/models"
)

type searchAnswer struct {
	Results    []searchJSON `json:"results"`
	NextOffset *int64       `json:"next_offset"`
}

// TestSearchAPI: GET /api/search finds the user's own messages with the
// match marked and everything else escaped (a hostile message stays
// text), links to the message, pages, refuses a bad q with a clear 400,
// and never shows another user's messages, on the API or the page.
func TestSearchAPI(t *testing.T) {
	a := newApp(t)
	alice := a.newUser("alice@example.com", false)
	bob := a.newUser("bob@example.com", false)
	th := alice.newThread("Instruments")
	alice.startRun(th, `<script>alert("x")</script><img src=x onerror=alert(1)> which xylophone is best?`)
	a.waitIdle(th)
	bobs := bob.newThread("Bob's")
	bob.startRun(bobs, "my xylophone secret")
	a.waitIdle(bobs)

	var page searchAnswer
	alice.mustJSON("GET", "/api/search?q="+url.QueryEscape("XYLOPHONE"), nil, http.StatusOK, &page)
	// The demo's answer quotes her message: both are hers.
	if len(page.Results) != 2 || page.NextOffset != nil || page.Results[0].ThreadID != th || page.Results[1].ThreadID != th {
		t.Fatalf("alice's search = %+v, want her message and its answer", page)
	}
	r := page.Results[0]
	if r.Type != "human" {
		r = page.Results[1]
	}
	if r.ThreadID != th || r.ThreadTitle != "Instruments" || r.Type != "human" || r.URL != "/threads/"+th+"#msg-"+r.MessageID || r.CreatedAt.IsZero() {
		t.Errorf("result = %+v", r)
	}
	if !strings.Contains(r.Snippet, "<mark>xylophone</mark>") || strings.Contains(r.Snippet, "<script") || strings.Contains(r.Snippet, "<img") ||
		!strings.Contains(r.Snippet, "&lt;script&gt;") {
		t.Errorf("snippet %q: want the match in <mark> and the rest escaped", r.Snippet)
	}

	html := string(alice.do("GET", "/?q=xylophone", nil).body)
	if !strings.Contains(html, `<mark>xylophone</mark>`) || strings.Contains(html, `<script>alert`) || strings.Contains(html, "<img src=x") ||
		!strings.Contains(html, `href="/threads/`+th+`#msg-`+r.MessageID+`"`) || strings.Contains(html, "secret") {
		t.Errorf("the search page does not show alice's result alone, marked and escaped:\n%s", html)
	}
	bob.mustJSON("GET", "/api/search?q=xylophone&limit=1", nil, http.StatusOK, &page)
	if len(page.Results) != 1 || page.Results[0].ThreadID != bobs || page.NextOffset == nil || *page.NextOffset != 1 {
		t.Errorf("bob's first page = %+v, want his thread's and a next offset of 1", page)
	}
	bob.mustJSON("GET", "/api/search?q=xylophone&limit=1&offset=1", nil, http.StatusOK, &page)
	if len(page.Results) != 1 || page.Results[0].ThreadID != bobs || page.NextOffset != nil {
		t.Errorf("bob's second page = %+v, want his thread's and no next", page)
	}

	for _, c := range []struct{ name, query, want string }{
		{"no q", "", "q is required"},
		{"no word", "q=" + url.QueryEscape(` "-" `), "no word"},
		{"too long", "q=" + strings.Repeat("a", maxSearchQuery+1), "too long"},
		{"limit", "q=x&limit=0", "limit"},
		{"offset", "q=x&offset=-1", "offset"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := alice.do("GET", "/api/search?"+c.query, nil)
			var e struct {
				Error struct{ Code, Message string }
			}
			_ = json.Unmarshal(res.body, &e)
			if res.status != http.StatusBadRequest || !strings.Contains(e.Error.Message, c.want) {
				t.Errorf("%s: %d %s, want 400 saying %q", c.query, res.status, res.body, c.want)
			}
		})
	}
	if res := a.anonymous().do("GET", "/api/search?q=xylophone", nil); res.status != http.StatusUnauthorized {
		t.Errorf("anonymous search: %d, want 401", res.status)
	}
}

// TestSearchedTypesAreAgents: the index takes the message types and the
// tool agent writes (models cannot import agent), so a rename there
// cannot silently drop messages from search.
func TestSearchedTypesAreAgents(t *testing.T) {
	got := []string{models.SearchedHuman, models.SearchedAI, models.SearchedTool, models.SearchedTask}
	want := []string{agent.TypeHuman, agent.TypeAI, agent.TypeTool, agent.ToolTask}
	if !slices.Equal(got, want) {
		t.Errorf("models searches %v, agent writes %v", got, want)
	}
}
