package server

import (
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// selectedModel is the model the page's composer preselects.
var selectedModel = regexp.MustCompile(`<option value="([^"]+)" selected>`)

// metaLines are the meta lines under the page's answers: the raw model
// name (the title) and what they show.
var metaLines = regexp.MustCompile(`<p class="msg-meta" title="([^" ]+)">([^<]*)</p>`)

// TestThreadModel: a thread remembers the model of its latest run — its
// page's composer preselects it, another thread keeps the first model —
// and the meta line under an answer shows the model's display name, its
// name in the title, as cards do (the message template's blank meta
// line is not an answer's).
func TestThreadModel(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th, other := u.newThread("deep"), u.newThread("other")
	page := func(th string) string {
		t.Helper()
		r := u.do("GET", "/threads/"+th, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET /threads/%s: %d", th, r.status)
		}
		return string(r.body)
	}
	preselected := func(th string) string {
		t.Helper()
		m := selectedModel.FindAllStringSubmatch(page(th), -1)
		if len(m) != 1 {
			t.Fatalf("thread %s: %d preselected models", th, len(m))
		}
		return m[0][1]
	}
	if got := preselected(th); got != "demo-fast" {
		t.Errorf("a new thread preselects %q, want the first model", got)
	}
	for _, model := range []string{"demo-deep", "demo-fast", "demo-deep"} {
		u.mustJSON("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "hello", "model": model}, http.StatusAccepted, nil)
		a.waitIdle(th)
		if got := preselected(th); got != model {
			t.Errorf("after a run on %s the thread preselects %q", model, got)
		}
	}
	if got := preselected(other); got != "demo-fast" {
		t.Errorf("an untouched thread preselects %q, want the first model", got)
	}
	want := [][2]string{{"demo-deep", "Demo-deep"}, {"demo-fast", "Demo-fast"}, {"demo-deep", "Demo-deep"}}
	got := metaLines.FindAllStringSubmatch(page(th), -1)
	if len(got) != len(want) {
		t.Fatalf("%d meta lines, want %d: %q", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i][1] != w[0] || got[i][2] != w[1] {
			t.Errorf("answer %d: meta line %q titled %q, want %q titled %q", i+1, got[i][2], got[i][1], w[1], w[0])
		}
	}
	var api struct {
		Messages []struct {
			Type      string `json:"type"`
			ModelName string `json:"model_name"`
		} `json:"messages"`
	}
	u.mustJSON("GET", "/api/threads/"+th, nil, http.StatusOK, &api)
	var names []string
	for _, m := range api.Messages {
		if m.Type == "ai" {
			names = append(names, m.ModelName)
		}
	}
	if len(names) != 3 || names[0] != "demo-deep" || names[1] != "demo-fast" || names[2] != "demo-deep" {
		t.Errorf("the answers' model_name: %q, want the herd models' names", names)
	}
}

// TestBrowserThreadModel: an answer streamed live shows the model's
// display name under it, and a reload preselects the model the thread
// last used.
func TestBrowserThreadModel(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("deep")
	b := newBrowser(t, a.http.URL)
	b.signIn(u.email, "password123")
	b.openThread(th, "")
	evalAs[chromedp.Void](b, `document.querySelector("#composer-model").value = "demo-deep"`)
	b.sendMessage("hello")
	b.waitRunEnd(a, th)
	b.waitFor("the live meta line", `document.querySelector("#messages .msg-ai .msg-meta")?.textContent === "Demo-deep"`, 10*time.Second)
	b.reload()
	b.waitFor("the thread's model preselected", `document.querySelector("#composer-model").value === "demo-deep" && document.querySelector("#messages .msg-ai .msg-meta")?.textContent === "Demo-deep"`, 5*time.Second)
}
