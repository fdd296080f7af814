package server

import (
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
)

func TestMetrics(t *testing.T) {
	a := newApp(t)
	u := a.newUser("ann@example.com", false)
	th := u.newThread("t")
	u.watch(th)
	u.startRun(th, "Compare:\n- alpha\n- beta")
	a.waitIdle(th)
	rec := httptest.NewRecorder()
	a.metrics.Handler("").ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9180/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d", rec.Code)
	}
	body := rec.Body.String()
	value := func(series string) float64 {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			t.Errorf("no series %s", series)
			return -1
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	checks := []struct {
		series string
		ok     func(float64) bool
		want   string
	}{
		{"herd_active_runs", func(v float64) bool { return v == 0 }, "0 after the run"},
		{"herd_ws_clients", func(v float64) bool { return v == 1 }, "1"},
		{"herd_registry_size", func(v float64) bool { return v == 0 }, "0"},
		{"herd_subagents_queued", func(v float64) bool { return v == 0 }, "0"},
		{"herd_calls_abandoned", func(v float64) bool { return v == 0 }, "0"},
		{`herd_subagents{status="running"}`, func(v float64) bool { return v == 0 }, "0"},
		{"herd_writer_queue_depth", func(v float64) bool { return v >= 0 }, "≥ 0"},
		{"herd_writer_batch_records_count", func(v float64) bool { return v > 0 }, "> 0"},
		{"herd_writer_failures_total", func(v float64) bool { return v == 0 }, "0"},
		{"herd_ws_dropped_clients_total", func(v float64) bool { return v == 0 }, "0"},
		{`herd_llm_call_seconds_count{model="demo-fast"}`, func(v float64) bool { return v >= 2+2*4 }, "every lead and subagent call"},
		{`herd_llm_tokens_total{kind="output",model="demo-fast"}`, func(v float64) bool { return v > 0 }, "> 0"},
	}
	for _, c := range checks {
		if v := value(c.series); !c.ok(v) {
			t.Errorf("%s = %v, want %s", c.series, v, c.want)
		}
	}
}
