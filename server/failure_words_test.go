package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"herd/agent"
	"herd/agent/openai"
	"herd/agent/openai/openaitest"
)

// failingOpenAI is an OpenAI provider whose server answers every call
// with reply, without retries.
func failingOpenAI(t *testing.T, reply openaitest.Reply) agent.Provider {
	t.Helper()
	srv := openaitest.NewServer(t)
	srv.SetFallback(func(openaitest.ChatRequest) openaitest.Reply { return reply })
	t.Cleanup(srv.Close)
	p, err := openai.New(agent.ModelConfig{Name: "demo-fast", Provider: "openai", Model: "gpt-x", APIKey: "sk-wrong", BaseURL: srv.URL(), MaxRetries: new(0)},
		openai.WithHTTPClient(srv.Client()), openai.WithMaxRetryDelay(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFailureWordsOnThePage: a run the provider refused reads, on the
// thread's page and in its events, as its cause in plain words with its
// error_kind; a wrong key (401) offers no Retry, a rate limit (429) does
// and says when; the raw cause stays under Details.
func TestFailureWordsOnThePage(t *testing.T) {
	for _, c := range []struct {
		name      string
		reply     openaitest.Reply
		kind      string
		words     string
		wantRetry bool
	}{
		{"401", openaitest.Fail(http.StatusUnauthorized, "Incorrect API key provided"), agent.ErrorAuth,
			"The model provider rejected herd&#39;s API key (HTTP 401): it is wrong or expired. An admin can fix it in herd.yaml or in the provider&#39;s console.", false},
		{"429", openaitest.Reply{Status: http.StatusTooManyRequests, Error: "Rate limit reached", Header: http.Header{"Retry-After": {"30"}}}, agent.ErrorRateLimit,
			"The model provider&#39;s rate limit was reached (HTTP 429). Retry in 30 s", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newApp(t, func(cfg *appConfig) { cfg.provider = failingOpenAI(t, c.reply) })
			u := a.newUser("ann@example.com", false)
			th := u.newThread("t")
			run := u.startRun(th, "What is herd?")
			a.waitIdle(th)

			page := string(u.do("GET", "/threads/"+th, nil).body)
			if !strings.Contains(page, c.words) {
				t.Errorf("the page lacks %q", c.words)
			}
			if strings.Count(page, `data-error-kind=`) != 1 || !strings.Contains(page, `data-error-kind="`+c.kind+`"`) || !strings.Contains(page, "<summary>Details</summary>") {
				t.Errorf("the run's end lacks its kind %q or its Details", c.kind)
			}
			// One Retry is #run-end-template's, which the script clones.
			want := 1
			if c.wantRetry {
				want = 2
			}
			if n := strings.Count(page, ">Retry</button>"); n != want {
				t.Errorf("%d Retry buttons, want %d", n, want)
			}
			if !strings.Contains(page, `"no_retry_kinds":["auth","model","context_length","request"]`) {
				t.Error("the page's state lacks no_retry_kinds, which the script reads for a live run.end")
			}

			var events struct {
				Events []struct {
					Content json.RawMessage `json:"content"`
				} `json:"events"`
			}
			u.mustJSON("GET", "/api/threads/"+th+"/events?event_types=run.end&run_id="+run, nil, http.StatusOK, &events)
			var end agent.RunEnd
			if len(events.Events) != 1 || json.Unmarshal(events.Events[0].Content, &end) != nil {
				t.Fatalf("run.end events: %+v", events)
			}
			if end.ErrorKind != c.kind || !strings.Contains(end.Error, "HTTP "+c.name) {
				t.Errorf("run.end error_kind %q error %q, want %q and the raw cause", end.ErrorKind, end.Error, c.kind)
			}
		})
	}
}
