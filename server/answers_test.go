package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"herd/agent"
	"herd/models"
	"herd/server/hub"
)

// shownMessages is the thread's messages as its JSON page shows them.
func (u *user) shownMessages(threadID string) []hub.MessageJSON {
	u.a.t.Helper()
	var page struct {
		Messages []hub.MessageJSON `json:"messages"`
	}
	u.mustJSON("GET", "/api/threads/"+threadID+"/messages", nil, http.StatusOK, &page)
	return page.Messages
}

func humans(ms []hub.MessageJSON) []string {
	var out []string
	for _, m := range ms {
		if m.Type == agent.TypeHuman {
			out = append(out, m.Content)
		}
	}
	return out
}

// TestRetryRegenerateEditRoutes drives Retry, Regenerate and Edit through
// the real handler: a failure leaves a notice with Retry on the page;
// Retry answers the same message without a second copy of it; the routes
// are the owner's alone, need the CSRF token, and answer 409 while a run
// is active or for what cannot be answered again; the ledger keeps every
// run's calls.
func TestRetryRegenerateEditRoutes(t *testing.T) {
	failing := demoModel("demo-fast", 5, 1)
	failing.FailAfter = 1
	a := newApp(t, withModels(failing, demoModel("demo-slow", 5000, 1)))
	u := a.newUser("ann@example.com", false)
	other := a.newUser("bob@example.com", false)
	th := u.newThread("t")
	first := u.startRun(th, "What is herd?")
	a.waitIdle(th)

	page := string(u.do("GET", "/threads/"+th, nil).body)
	for _, want := range []string{`run-end run-end-failed`, "The model server answered with an error.", "fail_after"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page after a failure lacks %q", want)
		}
	}
	// One Retry is #run-end-template's, which the script clones.
	if n := strings.Count(page, ">Retry</button>"); n != 2 {
		t.Errorf("the page after a failure has %d Retry buttons, want its own and the template's", n)
	}

	retryPath := "/api/threads/" + th + "/runs/" + first + "/retry"
	if r := other.do("POST", retryPath, nil); r.status != http.StatusNotFound {
		t.Errorf("another user's retry: %d, want 404", r.status)
	}
	tok := u.csrf
	u.csrf = ""
	if r := u.do("POST", retryPath, nil); r.status != http.StatusForbidden || r.errorCode() != "csrf" {
		t.Errorf("retry without the CSRF token: %d %s, want 403 csrf", r.status, r.body)
	}
	u.csrf = tok
	if r := u.do("POST", "/api/threads/"+th+"/runs/00000000-0000-0000-0000-000000000000/retry", nil); r.status != http.StatusNotFound {
		t.Errorf("retry of an unknown run: %d, want 404", r.status)
	}

	var retried struct {
		RunID     string `json:"run_id"`
		MessageID string `json:"message_id"`
	}
	u.mustJSON("POST", retryPath, nil, http.StatusAccepted, &retried)
	a.waitIdle(th)
	if got := humans(u.shownMessages(th)); len(got) != 1 || got[0] != "What is herd?" {
		t.Errorf("human messages after a retry = %q, want the one question", got)
	}
	page = string(u.do("GET", "/threads/"+th, nil).body)
	if !strings.Contains(page, "The model server answered with an error.") || strings.Count(page, ">Retry</button>") != 1 || strings.Count(page, ">Regenerate</button>") != 1 {
		t.Errorf("after the retry the page should keep the failure as history and offer Regenerate alone")
	}
	if r := u.do("POST", retryPath, nil); r.status != http.StatusConflict {
		t.Errorf("retry of a run that is not the latest: %d %s, want 409", r.status, r.body)
	}

	// While a run is active, nothing can be answered again.
	var slow struct {
		RunID string `json:"run_id"`
	}
	u.mustJSON("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "take your time", "model": "demo-slow"}, http.StatusAccepted, &slow)
	firstHuman := ""
	for _, m := range u.shownMessages(th) {
		if m.Type == agent.TypeHuman && firstHuman == "" {
			firstHuman = m.ID
		}
	}
	editPath := "/api/threads/" + th + "/messages/" + firstHuman + "/edit"
	if r := u.do("POST", "/api/threads/"+th+"/runs/"+retried.RunID+"/retry", nil); r.status != http.StatusConflict {
		t.Errorf("regenerate during a run: %d, want 409", r.status)
	}
	if r := u.do("POST", editPath, map[string]string{"content": "x"}); r.status != http.StatusConflict || !strings.Contains(string(r.body), "already active") {
		t.Errorf("edit during a run: %d %s, want 409", r.status, r.body)
	}
	u.mustJSON("POST", "/api/threads/"+th+"/runs/"+slow.RunID+"/cancel", nil, http.StatusAccepted, nil)
	a.waitIdle(th)
	if page = string(u.do("GET", "/threads/"+th, nil).body); !strings.Contains(page, "Stopped by you.") {
		t.Error("a stopped run leaves no notice")
	}

	if r := other.do("POST", editPath, map[string]string{"content": "x"}); r.status != http.StatusNotFound {
		t.Errorf("another user's edit: %d, want 404", r.status)
	}
	u.csrf = ""
	if r := u.do("POST", editPath, map[string]string{"content": "x"}); r.status != http.StatusForbidden {
		t.Errorf("edit without the CSRF token: %d, want 403", r.status)
	}
	u.csrf = tok
	for _, c := range []struct {
		name string
		path string
		body any
		want int
	}{
		{"blank", editPath, map[string]string{"content": "  "}, http.StatusUnprocessableEntity},
		{"unknown message", "/api/threads/" + th + "/messages/00000000-0000-0000-0000-000000000000/edit", map[string]string{"content": "x"}, http.StatusNotFound},
	} {
		if r := u.do("POST", c.path, c.body); r.status != c.want {
			t.Errorf("edit, %s: %d %s, want %d", c.name, r.status, r.body, c.want)
		}
	}
	for _, m := range u.shownMessages(th) {
		if m.Type == agent.TypeAI {
			if r := u.do("POST", "/api/threads/"+th+"/messages/"+m.ID+"/edit", map[string]string{"content": "x"}); r.status != http.StatusUnprocessableEntity {
				t.Errorf("edit of an answer: %d, want 422", r.status)
			}
			break
		}
	}

	u.mustJSON("POST", editPath, map[string]string{"content": "What is herd, in one line?"}, http.StatusAccepted, nil)
	a.waitIdle(th)
	shown := u.shownMessages(th)
	if got := humans(shown); len(got) != 1 || got[0] != "What is herd, in one line?" {
		t.Errorf("human messages after the edit = %q, want the edited one alone", got)
	}
	if r := u.do("POST", editPath, map[string]string{"content": "again"}); r.status != http.StatusConflict {
		t.Errorf("edit of a replaced message: %d, want 409", r.status)
	}
	page = string(u.do("GET", "/threads/"+th, nil).body)
	if strings.Contains(page, "take your time") || strings.Contains(page, "Stopped by you.") {
		t.Error("the page still shows what the edit replaced")
	}
	if md := string(u.do("GET", "/api/threads/"+th+"/export?format=markdown", nil).body); strings.Contains(md, "What is herd?") || !strings.Contains(md, "What is herd, in one line?") {
		t.Errorf("the export shows what the edit replaced, or not the edit:\n%s", md)
	}

	// The ledger is history: the thread's total counts the calls of what
	// it shows, and the replaced answers' calls are counted apart, so
	// both together are every run's calls (the failed and the stopped
	// call reported none).
	runs, err := a.store.Runs(context.Background(), th)
	if err != nil {
		t.Fatal(err)
	}
	var calls int64
	for _, r := range runs {
		rep, err := a.store.Usage(context.Background(), th, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		calls += rep.Total.Calls
	}
	var usage struct {
		Total    models.UsageTotals `json:"total"`
		Replaced models.UsageTotals `json:"replaced"`
	}
	u.mustJSON("GET", "/api/threads/"+th+"/usage", nil, http.StatusOK, &usage)
	if len(runs) != 4 || usage.Total.Calls+usage.Replaced.Calls != calls || calls != 2 || usage.Replaced.Calls == 0 {
		t.Errorf("%d runs, thread total %d calls and %d replaced, runs' sum %d: want 4 runs, 2 calls in both sums, some replaced", len(runs), usage.Total.Calls, usage.Replaced.Calls, calls)
	}
}

// TestRetryFrames: over the real socket, a failed run's run.end carries
// its notice and the error as detail; the Retry's run.start
// says which run it replaces, then the retry's message frames follow with
// no second human message.
func TestRetryFrames(t *testing.T) {
	failing := demoModel("demo-fast", 5, 1)
	failing.FailAfter = 1
	a := newApp(t, withModels(failing))
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	conn := u.watch(th)
	first := u.startRun(th, "hello")
	next := func(typ string) wsFrame {
		t.Helper()
		for {
			f, err := readFrame(conn, 15*time.Second)
			if err != nil {
				t.Fatalf("waiting for %s: %v", typ, err)
			}
			if f.Type == "message" && typ != "message" {
				var m hub.MessageJSON
				_ = json.Unmarshal(f.Data, &m)
				if m.Type == agent.TypeHuman && m.RunID != first {
					t.Errorf("a retry sent a human message: %s", f.Data)
				}
			}
			if f.Type == typ {
				return f
			}
		}
	}
	var end agent.RunEnd
	if err := json.Unmarshal(next("run.end").Data, &end); err != nil || !strings.HasPrefix(end.Notice, "The model server answered with an error.") || end.Status != "failed" || !strings.Contains(end.Error, "fail_after") {
		t.Fatalf("run.end = %+v, %v", end, err)
	}
	var retry struct {
		RunID string `json:"run_id"`
	}
	u.mustJSON("POST", "/api/threads/"+th+"/runs/"+first+"/retry", nil, http.StatusAccepted, &retry)
	var start agent.RunStart
	if err := json.Unmarshal(next("run.start").Data, &start); err != nil || start.RunID != retry.RunID || start.RetryOf != first || start.EditOf != "" {
		t.Fatalf("run.start = %+v, %v; want the retry of %s", start, err, first)
	}
	var done agent.RunEnd
	if err := json.Unmarshal(next("run.end").Data, &done); err != nil || done.Status != "completed" || done.Notice != "" || done.RunID != retry.RunID {
		t.Fatalf("the retry's run.end = %+v, %v", done, err)
	}
}

// TestPickRoute: only the thread's owner picks a version (or continues
// an answer, only a stopped one), with the CSRF
// token, of a run that is one, while no run is active; the messages
// route then shows the picked version's answer.
func TestPickRoute(t *testing.T) {
	a := newApp(t, withModels(demoModel("demo-fast", 5, 1), demoModel("demo-slow", 5000, 1)))
	u := a.newUser("ann@example.com", false)
	other := a.newUser("bob@example.com", false)
	th := u.newThread("t")
	first := u.startRun(th, "Plan:\n- apples")
	a.waitIdle(th)
	pick := func(run string) string { return "/api/threads/" + th + "/runs/" + run + "/pick" }
	if r := u.do("POST", pick(first), nil); r.status != http.StatusUnprocessableEntity || r.errorCode() != "not_a_version" {
		t.Errorf("pick of an answer with one version: %d %s, want 422 not_a_version", r.status, r.body)
	}
	var regen struct {
		RunID string `json:"run_id"`
	}
	u.mustJSON("POST", "/api/threads/"+th+"/runs/"+first+"/retry", nil, http.StatusAccepted, &regen)
	a.waitIdle(th)
	answers := func() []string {
		var out struct {
			Messages []struct {
				RunID string `json:"run_id"`
				Type  string `json:"type"`
			} `json:"messages"`
		}
		u.mustJSON("GET", "/api/threads/"+th+"/messages", nil, http.StatusOK, &out)
		var runs []string
		for _, m := range out.Messages {
			if m.Type == "ai" && !slices.Contains(runs, m.RunID) {
				runs = append(runs, m.RunID)
			}
		}
		return runs
	}
	if got := answers(); !slices.Equal(got, []string{regen.RunID}) {
		t.Fatalf("answers shown after a Regenerate: %v, want the new one's", got)
	}
	if r := other.do("POST", pick(first), nil); r.status != http.StatusNotFound {
		t.Errorf("another user's pick: %d, want 404", r.status)
	}
	cont := "/api/threads/" + th + "/runs/" + regen.RunID + "/continue"
	if r := other.do("POST", cont, nil); r.status != http.StatusNotFound {
		t.Errorf("another user's continue: %d, want 404", r.status)
	}
	if r := u.do("POST", cont, nil); r.status != http.StatusConflict {
		t.Errorf("continue of a completed answer: %d %s, want 409", r.status, r.body)
	}
	tok := u.csrf
	u.csrf = ""
	if r := u.do("POST", pick(first), nil); r.status != http.StatusForbidden {
		t.Errorf("pick without the CSRF token: %d, want 403", r.status)
	}
	u.csrf = tok
	if r := u.do("POST", pick("00000000-0000-0000-0000-000000000000"), nil); r.status != http.StatusNotFound {
		t.Errorf("pick of an unknown run: %d, want 404", r.status)
	}
	if r := u.do("POST", pick(first), nil); r.status != http.StatusNoContent {
		t.Fatalf("pick: %d %s, want 204", r.status, r.body)
	}
	if got := answers(); !slices.Equal(got, []string{first}) {
		t.Errorf("answers shown after picking the first version: %v, want %s's", got, first)
	}
	// While a run is active nothing is picked.
	u.mustJSON("POST", "/api/threads/"+th+"/runs", map[string]string{"content": "more", "model": "demo-slow"}, http.StatusAccepted, nil)
	if r := u.do("POST", pick(regen.RunID), nil); r.status != http.StatusConflict {
		t.Errorf("pick while a run is active: %d, want 409", r.status)
	}
}

// TestSearchFollowsVersions: search finds what the thread shows, not the
// versions it hides, and follows a pick.
func TestSearchFollowsVersions(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	first := u.startRun(th, "Plan:\n- quinces")
	a.waitIdle(th)
	var msgs struct {
		Messages []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"messages"`
	}
	u.mustJSON("GET", "/api/threads/"+th+"/messages", nil, http.StatusOK, &msgs)
	human := ""
	for _, m := range msgs.Messages {
		if m.Type == "human" {
			human = m.ID
		}
	}
	u.mustJSON("POST", "/api/threads/"+th+"/messages/"+human+"/edit", map[string]string{"content": "Plan:\n- medlars"}, http.StatusAccepted, nil)
	a.waitIdle(th)
	found := func(q string) int {
		var out struct {
			Results []json.RawMessage `json:"results"`
		}
		u.mustJSON("GET", "/api/search?q="+q, nil, http.StatusOK, &out)
		return len(out.Results)
	}
	if found("quinces") != 0 || found("medlars") == 0 {
		t.Errorf("after the Edit: quinces %d, medlars %d hits; want only the shown version's", found("quinces"), found("medlars"))
	}
	u.mustJSON("POST", "/api/threads/"+th+"/runs/"+first+"/pick", nil, http.StatusNoContent, nil)
	if found("quinces") == 0 || found("medlars") != 0 {
		t.Errorf("after picking the first version: quinces %d, medlars %d hits", found("quinces"), found("medlars"))
	}
}
