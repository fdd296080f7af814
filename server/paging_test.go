package server

import (
	"context"
	"fmt"
	"herd/server/hub"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
)

type threadsPageJSON struct {
	Threads []threadJSON `json:"threads"`
	HasMore bool         `json:"has_more"`
	Next    *string      `json:"next"`
}

type messagesPageJSON struct {
	Messages []hub.MessageJSON `json:"messages"`
	Tasks    []cardJSON        `json:"tasks"`
	HasMore  bool              `json:"has_more"`
	Next     *int64            `json:"next"`
}

// TestThreadListPagination pages the thread list through the API and the
// page: newest first, each thread once, the cursor stable when threads
// are created while paging, and bad parameters refused.
func TestThreadListPagination(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	a.newUser("bob@example.com", false).newThread("not ann's")
	var want []string
	for i := range 7 {
		want = append([]string{u.newThread(fmt.Sprint("t", i))}, want...) // newest first
	}
	var got []string
	path := "/api/threads?limit=3"
	for page := 0; ; page++ {
		var p threadsPageJSON
		u.mustJSON("GET", path, nil, http.StatusOK, &p)
		for _, th := range p.Threads {
			got = append(got, th.ID)
		}
		if page == 0 {
			u.newThread("created while paging") // goes first; shifts nothing after
		}
		if wantMore := len(got) < 7; p.HasMore != wantMore || (p.Next != nil) != wantMore {
			t.Fatalf("page %d: has_more %v next %v after %d threads", page, p.HasMore, p.Next, len(got))
		}
		if !p.HasMore {
			break
		}
		path = "/api/threads?limit=3&before=" + url.QueryEscape(*p.Next)
	}
	if !slices.Equal(got, want) {
		t.Errorf("paged threads %v, want %v", got, want)
	}
	var all threadsPageJSON
	u.mustJSON("GET", "/api/threads", nil, http.StatusOK, &all)
	if len(all.Threads) != 8 || all.HasMore || all.Next != nil {
		t.Errorf("default page: %d threads, has_more %v, next %v; want 8, false, null", len(all.Threads), all.HasMore, all.Next)
	}

	for _, c := range []struct{ query, code string }{
		{"before=not-a-cursor!", "bad_cursor"},
		{"before=" + url.QueryEscape("bm90IGEgY3Vyc29y"), "bad_cursor"}, // base64 of "not a cursor"
		{"before=MTI6", "bad_cursor"},                                   // "12:" without an id
		{"limit=0", "bad_request"},
		{"limit=201", "bad_request"},
		{"limit=x", "bad_request"},
	} {
		r := u.do("GET", "/api/threads?"+c.query, nil)
		wantStatus := map[string]int{"bad_cursor": http.StatusUnprocessableEntity, "bad_request": http.StatusBadRequest}[c.code]
		if r.status != wantStatus || r.errorCode() != c.code {
			t.Errorf("?%s: %d %s, want %d %s", c.query, r.status, r.body, wantStatus, c.code)
		}
	}
	if r := u.do("GET", "/?before=garbage!", nil); r.status != http.StatusUnprocessableEntity {
		t.Errorf("page with a bad cursor: %d, want 422", r.status)
	}
}

// TestThreadListPageLinks walks the thread list page by its links.
func TestThreadListPageLinks(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	for i := range threadsPage + 5 {
		u.newThread(fmt.Sprint("thread ", i))
	}
	older := regexp.MustCompile(`class="pager-older" href="/\?before=([^"]+)"`)
	first := u.do("GET", "/", nil)
	m := older.FindStringSubmatch(string(first.body))
	if first.status != http.StatusOK || m == nil || strings.Count(string(first.body), `class="thread-item"`) != threadsPage {
		t.Fatalf("first page: %d, %d threads, older link %v", first.status, strings.Count(string(first.body), `class="thread-item"`), m)
	}
	if strings.Contains(string(first.body), "Most recent") {
		t.Error("the first page links to itself")
	}
	second := u.do("GET", "/?before="+m[1], nil)
	body := string(second.body)
	if second.status != http.StatusOK || strings.Count(body, `class="thread-item"`) != 5 || older.MatchString(body) || !strings.Contains(body, "Most recent") {
		t.Errorf("second page: %d, %d threads, older link %v", second.status, strings.Count(body, `class="thread-item"`), older.MatchString(body))
	}
	if !strings.Contains(body, ">thread 0<") || strings.Contains(body, fmt.Sprintf(">thread %d<", threadsPage+4)) {
		t.Error("the second page does not hold the oldest threads")
	}
}

// seedPagedThread writes a thread of conversation pairs around one run
// with three subagent cards (seedCards): a human message, an AI message
// with three task calls, their events and three task ToolMessages.
func (a *testApp) seedPagedThread(threadID, userID string) {
	a.seedConversation(threadID, userID, 3)
	a.seedCards(threadID, userID, 3, 2)
	a.seedConversation(threadID, userID, 4)
}

// TestThreadMessagesPagination pages a thread's messages through the API:
// the pages, newest first, hold every message once; none starts with a
// tool result; each page carries the whole cards of its task calls.
func TestThreadMessagesPagination(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	other := a.newUser("bob@example.com", false)
	th := u.newThread("paged")
	a.seedPagedThread(th, u.id)
	stored, err := a.store.Messages(context.Background(), th)
	if err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{1, 2, 3, 50} {
		var got []int64
		cards := 0
		path := fmt.Sprintf("/api/threads/%s/messages?limit=%d", th, limit)
		for {
			var p messagesPageJSON
			u.mustJSON("GET", path, nil, http.StatusOK, &p)
			if len(p.Messages) == 0 || p.Messages[0].Type == "tool" {
				t.Fatalf("limit %d: a page starts with %v", limit, p.Messages)
			}
			var seqs []int64
			humanAI := 0
			for _, m := range p.Messages {
				seqs = append(seqs, m.Seq)
				if m.Type != "tool" {
					humanAI++
				}
			}
			if humanAI > limit {
				t.Errorf("limit %d: a page holds %d human and AI messages", limit, humanAI)
			}
			for _, c := range p.Tasks {
				if c.Status != "completed" || c.Result != "done" || c.Usage == nil {
					t.Errorf("limit %d: card %s is %s with result %q, usage %v; want completed, done, usage", limit, c.TaskID, c.Status, c.Result, c.Usage)
				}
			}
			cards += len(p.Tasks)
			got = append(seqs, got...)
			if p.HasMore != (p.Next != nil) || (p.HasMore && *p.Next != p.Messages[0].Seq) {
				t.Fatalf("limit %d: has_more %v, next %v, first seq %d", limit, p.HasMore, p.Next, p.Messages[0].Seq)
			}
			if !p.HasMore {
				break
			}
			path = fmt.Sprintf("/api/threads/%s/messages?limit=%d&before=%d", th, limit, *p.Next)
		}
		want := make([]int64, len(stored))
		for i, m := range stored {
			want[i] = m.Seq
		}
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: paged seqs %v, want %v", limit, got, want)
		}
		if cards != 3 {
			t.Errorf("limit %d: %d cards over all pages, want 3", limit, cards)
		}
	}

	var thread struct {
		messagesPageJSON
		Thread  threadJSON `json:"thread"`
		LastSeq int64      `json:"last_seq"`
	}
	u.mustJSON("GET", "/api/threads/"+th+"?limit=2", nil, http.StatusOK, &thread)
	if thread.Thread.ID != th || len(thread.Messages) != 2 || !thread.HasMore || thread.LastSeq == 0 {
		t.Errorf("thread JSON: thread %q, %d messages, has_more %v, last_seq %d", thread.Thread.ID, len(thread.Messages), thread.HasMore, thread.LastSeq)
	}

	for _, c := range []struct {
		query  string
		status int
	}{
		{"before=abc", http.StatusUnprocessableEntity},
		{"before=0", http.StatusUnprocessableEntity},
		{"before=-3", http.StatusUnprocessableEntity},
		{"limit=0", http.StatusBadRequest},
		{"limit=201", http.StatusBadRequest},
	} {
		for _, p := range []string{"/api/threads/" + th + "/messages?", "/api/threads/" + th + "?"} {
			if r := u.do("GET", p+c.query, nil); r.status != c.status {
				t.Errorf("%s%s: %d %s, want %d", p, c.query, r.status, r.body, c.status)
			}
		}
	}
	if r := other.do("GET", "/api/threads/"+th+"/messages", nil); r.status != http.StatusNotFound {
		t.Errorf("another user's messages: %d, want 404", r.status)
	}
	if r := other.do("GET", "/threads/"+th+"/messages", nil); r.status != http.StatusNotFound {
		t.Errorf("another user's older messages: %d, want 404", r.status)
	}
	var empty messagesPageJSON
	u.mustJSON("GET", "/api/threads/"+u.newThread("empty")+"/messages", nil, http.StatusOK, &empty)
	if len(empty.Messages) != 0 || empty.HasMore || empty.Next != nil {
		t.Errorf("empty thread: %+v", empty)
	}
}

// TestThreadPageRendersNewestPage: the thread page renders the newest
// page and a link to the earlier messages; the fragment the script loads
// renders the page before it with whole cards; the read-only page
// ?before= has neither composer nor live state.
func TestThreadPageRendersNewestPage(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("paged")
	a.seedPagedThread(th, u.id)
	a.seedConversation(th, u.id, messagesPage/2) // the newest page
	stored, _ := a.store.Messages(context.Background(), th)
	older := regexp.MustCompile(`href="/threads/[^"?]+\?before=(\d+)" data-before="(\d+)"`)
	page := string(u.do("GET", "/threads/"+th, nil).body)
	m := older.FindStringSubmatch(page)
	// Two more articles are the page's <template>s for live messages.
	if m == nil || m[1] != m[2] || strings.Count(page, `<article class="msg`) != messagesPage+2 {
		t.Fatalf("thread page: %d messages, older link %v", strings.Count(page, `<article class="msg`), m)
	}
	if !strings.Contains(page, `id="herd-state"`) || !strings.Contains(page, `id="composer"`) {
		t.Error("the newest page lost its live state or composer")
	}
	frag := u.do("GET", "/threads/"+th+"/messages?before="+m[1], nil)
	body := string(frag.body)
	if frag.status != http.StatusOK || strings.Contains(body, "<html") || older.MatchString(body) {
		t.Fatalf("fragment: %d, a whole page %v, an older link %v", frag.status, strings.Contains(body, "<html"), older.MatchString(body))
	}
	if got, want := strings.Count(body, `<article class="msg`), 7*2+2; got != want {
		t.Errorf("fragment holds %d messages, want %d", got, want)
	}
	if strings.Count(body, `class="card card-completed"`) != 3 {
		t.Errorf("fragment holds %d completed cards, want 3", strings.Count(body, `class="card card-completed"`))
	}
	if !strings.Contains(body, fmt.Sprintf(`id="msg-%s"`, stored[0].ID)) {
		t.Error("the fragment does not reach the thread's first message")
	}
	archive := string(u.do("GET", "/threads/"+th+"?before="+m[1], nil).body)
	if strings.Contains(archive, `id="herd-state"`) || strings.Contains(archive, `id="composer"`) || !strings.Contains(archive, "Latest messages") {
		t.Error("the read-only page ?before= has live state or a composer, or no way back")
	}
	if strings.Count(archive, `class="card card-completed"`) != 3 {
		t.Error("the read-only page lost its cards")
	}
}
