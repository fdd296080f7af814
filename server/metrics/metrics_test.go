package metrics

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"herd/agent"
	"herd/models"
)

// scrape is the registry's text as a scraper on host gets it.
func scrape(t *testing.T, m *Metrics, token, host, auth string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "http://"+host+"/metrics", nil)
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	m.Handler(token).ServeHTTP(rec, r)
	return rec.Code, rec.Body.String()
}

// TestLabelsShownFromZero: every label value its owner names is a series
// before anything is counted, and a count lands on it.
func TestLabelsShownFromZero(t *testing.T) {
	m := New(Labels{NoticeRefusals: []string{"forged", "stale"}, PasswordChecks: []string{"sign_in"}})
	m.PasswordChecked("sign_in")
	m.OnNoticeRefused("stale")
	_, body := scrape(t, m, "", "127.0.0.1:9180", "")
	for _, want := range []string{
		`herd_cluster_notices_refused_total{reason="forged"} 0`,
		`herd_cluster_notices_refused_total{reason="stale"} 1`,
		`herd_password_checks_total{kind="sign_in"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("no %s in the scrape", want)
		}
	}
	var none *Metrics
	none.PasswordChecked("sign_in") // a server without metrics counts nothing
}

// TestHandlerGuards: without a token only loopback host names are
// answered (a rebinding page's own name is not); with one, only its
// bearer is.
func TestHandlerGuards(t *testing.T) {
	m := New(Labels{})
	cases := []struct {
		name, token, host, auth string
		want                    int
	}{
		{"loopback address", "", "127.0.0.1:9180", "", 200},
		{"localhost with a final dot", "", "LOCALHOST.:9180", "", 200},
		{"IPv6 loopback", "", "[::1]:9180", "", 200},
		{"rebinding name", "", "evil.example:9180", "", 421},
		{"token missing", "s3cret", "herd.example", "", 401},
		{"wrong token", "s3cret", "herd.example", "Bearer nope", 401},
		{"bearer", "s3cret", "herd.example", "Bearer s3cret", 200},
	}
	for _, c := range cases {
		if got, _ := scrape(t, m, c.token, c.host, c.auth); got != c.want {
			t.Errorf("%s: status %d, want %d", c.name, got, c.want)
		}
	}
}

type fakeProvider struct{ resp agent.Response }

func (p fakeProvider) Complete(context.Context, agent.Request, func(string)) (agent.Response, error) {
	return p.resp, nil
}

// TestInstrument: an instrumented provider's calls and tokens are counted
// under its model's name.
func TestInstrument(t *testing.T) {
	m := New(Labels{})
	p := m.Instrument("demo-fast", fakeProvider{agent.Response{Usage: &agent.Usage{InputTokens: 7, OutputTokens: 3}}})
	if _, err := p.Complete(context.Background(), agent.Request{}, nil); err != nil {
		t.Fatal(err)
	}
	_, body := scrape(t, m, "", "127.0.0.1", "")
	for _, want := range []string{
		`herd_llm_call_seconds_count{model="demo-fast"} 1`,
		`herd_llm_tokens_total{kind="input",model="demo-fast"} 7`,
		`herd_llm_tokens_total{kind="output",model="demo-fast"} 3`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("no %s in the scrape", want)
		}
	}
}

// TestWriterRetriesCounted: each batch adds the attempts it retried
// (Attempts - 1) to herd_writer_retries_total, so a storage outage shows
// as retries; a batch that gave up adds its retries and one failure.
func TestWriterRetriesCounted(t *testing.T) {
	m := New(Labels{})
	for _, tc := range []struct {
		name                  string
		batch                 models.BatchStats
		wantRetries, wantFail string
	}{
		{"first attempt", models.BatchStats{Records: 4, Attempts: 1}, "0", "0"},
		{"two retries", models.BatchStats{Records: 4, Attempts: 3, Duration: 2 * time.Second}, "2", "0"},
		{"gave up after five", models.BatchStats{Records: 1, Attempts: 6, Err: errors.New("constraint")}, "7", "1"},
	} {
		m.OnBatch(tc.batch)
		_, body := scrape(t, m, "", "127.0.0.1:9180", "")
		for series, want := range map[string]string{"herd_writer_retries_total": tc.wantRetries, "herd_writer_failures_total": tc.wantFail} {
			if !strings.Contains(body, "\n"+series+" "+want+"\n") {
				t.Errorf("%s: want %s %s in the scrape", tc.name, series, want)
			}
		}
	}
}
