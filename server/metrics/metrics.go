// Package metrics is herd's Prometheus registry, served at /metrics:
// counters and histograms fed by hooks (the writer's batches, dropped
// sockets, refused notices, password checks, instrumented providers) and
// gauges read at scrape time through the small interfaces declared here.
package metrics

import (
	"context"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"herd/agent"
	"herd/agent/mcp"
	"herd/internal/loopback"
	"herd/models"
)

// Metrics is herd's Prometheus registry (served at /metrics). Counters and
// histograms are fed by hooks (the writer's OnBatch, the hub's OnDrop, the
// instrumented providers); gauges are read at scrape time from their
// owners, so nothing is sampled in the background.
type Metrics struct {
	reg           *prometheus.Registry
	wsDropped     prometheus.Counter
	batchRecords  prometheus.Histogram
	writeLatency  prometheus.Histogram
	writeFailures prometheus.Counter
	writeRetries  prometheus.Counter
	llmLatency    *prometheus.HistogramVec
	llmErrors     *prometheus.CounterVec
	llmTokens     *prometheus.CounterVec
	refused       *prometheus.CounterVec
	passChecks    *prometheus.CounterVec
	auditFailures prometheus.Counter
}

// Labels are the label values two counters show from 0, before their
// first count; their owners name them.
type Labels struct {
	// NoticeRefusals are the reasons the instances' channel refuses a
	// notice for (herd_cluster_notices_refused_total).
	NoticeRefusals []string
	// PasswordChecks are the kinds of password check
	// (herd_password_checks_total).
	PasswordChecks []string
}

// New returns a registry with the process and Go collectors.
func New(l Labels) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.wsDropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_ws_dropped_clients_total", Help: "WebSocket clients cut because they stopped reading."})
	m.batchRecords = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "herd_writer_batch_records", Help: "Records committed per group commit.", Buckets: prometheus.ExponentialBuckets(1, 4, 8)})
	m.writeLatency = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "herd_writer_batch_seconds", Help: "Time to commit one batch, retries included.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)})
	m.writeFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_writer_failures_total", Help: "Batches that failed after every retry."})
	m.writeRetries = prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_writer_retries_total", Help: "Batch attempts that failed and were retried."})
	m.llmLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "herd_llm_call_seconds", Help: "LLM call latency by model.", Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 10)}, []string{"model"})
	m.llmErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "herd_llm_errors_total", Help: "Failed LLM calls by model (cancellations excluded)."}, []string{"model"})
	m.llmTokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "herd_llm_tokens_total", Help: "Tokens reported by providers, by model and kind."}, []string{"model", "kind"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "herd_cluster_notices_refused_total", Help: "Notices on the instances' channel refused, by reason: not sealed with the channel key, replayed, too old, or of a kind this herd does not take."}, []string{"reason"})
	for _, r := range l.NoticeRefusals {
		m.refused.WithLabelValues(r)
	}
	m.passChecks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "herd_password_checks_total", Help: "Password checks (bcrypt) started, by kind: sign_in (unknown emails included) and password_change."}, []string{"kind"})
	for _, k := range l.PasswordChecks {
		m.passChecks.WithLabelValues(k) // shown from 0
	}
	m.auditFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "herd_audit_failures_total", Help: "Admin actions whose audit log entry could not be written (each logged at ERROR)."})
	for _, c := range []prometheus.Collector{m.auditFailures, m.wsDropped, m.batchRecords, m.writeLatency, m.writeFailures, m.writeRetries, m.llmLatency, m.llmErrors, m.llmTokens, m.refused, m.passChecks} {
		f(c)
	}
	return m
}

// Handler serves the registry in the Prometheus text format. With a
// token, a request must carry it as "Authorization: Bearer <token>" or is
// answered 401: the figures include token usage and runtime details.
func (m *Metrics) Handler(token string) http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	if token == "" {
		return loopbackHostOnly(h)
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="herd metrics"`)
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackHostOnly answers only requests addressed to a loopback name.
// Without a token the metrics address is loopback only (the config
// refuses anything else), but a DNS-rebinding page in a browser on this
// machine reaches loopback under its own domain name; this keeps it from
// reading the figures.
func loopbackHostOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopback.Host(hostName(r.Host)) {
			http.Error(w, "metrics answer to a loopback host name only, such as 127.0.0.1", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// hostName is a Host header's name without port, brackets, case or a
// final dot, as the server's Host allow-list reads it.
func hostName(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

// Conns is what the connection gauges read: limits.ConnLimit.
type Conns interface {
	Open() int
	Evicted() int64
}

// WatchConns registers the connection gauges of the listener l limits.
func (m *Metrics) WatchConns(l Conns) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "herd_http_connections", Help: "HTTP connections held, WebSockets included."}, func() float64 { return float64(l.Open()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "herd_http_connections_evicted_total", Help: "Connections outside a request closed to make room at server.max_connections."}, func() float64 { return float64(l.Evicted()) }),
	)
}

// PasswordChecked counts a password check as it starts; nil counts
// nothing (a server without metrics).
func (m *Metrics) PasswordChecked(kind string) {
	if m != nil {
		m.passChecks.WithLabelValues(kind).Inc()
	}
}

// AuditFailed counts an audit entry that could not be written; nil
// counts nothing (a server without metrics).
func (m *Metrics) AuditFailed() {
	if m != nil {
		m.auditFailures.Inc()
	}
}

// OnDrop counts a WebSocket client cut for not reading (hub.Options.OnDrop).
func (m *Metrics) OnDrop() { m.wsDropped.Inc() }

// OnNoticeRefused counts a notice refused on the instances' channel
// (the cluster's ClusterOptions.OnRefused).
func (m *Metrics) OnNoticeRefused(reason string) { m.refused.WithLabelValues(reason).Inc() }

// OnBatch records one writer batch (models.WriterOptions.OnBatch).
func (m *Metrics) OnBatch(st models.BatchStats) {
	m.batchRecords.Observe(float64(st.Records))
	m.writeLatency.Observe(st.Duration.Seconds())
	if st.Attempts > 1 {
		m.writeRetries.Add(float64(st.Attempts - 1))
	}
	if st.Err != nil {
		m.writeFailures.Inc()
	}
}

// Sources are the owners of the live gauges, read at scrape time.
type Sources struct {
	Runtime Runtime
	Hub     Clients
	Writer  Queue
	// MCP, when set, gives the MCP servers' figures.
	MCP MCP
}

// Runtime is what the run and executor gauges read: agent.Runtime.
type Runtime interface {
	ActiveRuns() int
	Stats() agent.Stats
}

// Clients is what the WebSocket gauge reads: the hub.
type Clients interface{ Clients() int64 }

// Queue is what the writer's queue gauge reads: models.Writer.
type Queue interface{ QueueLen() int }

// MCP is what the MCP servers' counters read: mcp.Servers.
type MCP interface{ Status() []mcp.ServerStatus }

// Watch registers the gauges read from src.
func (m *Metrics) Watch(src Sources) {
	gauge := func(name, help string, v func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, v))
	}
	gauge("herd_active_runs", "Runs in progress.", func() float64 { return float64(src.Runtime.ActiveRuns()) })
	gauge("herd_ws_clients", "Connected WebSocket clients.", func() float64 { return float64(src.Hub.Clients()) })
	gauge("herd_writer_queue_depth", "Submissions waiting for the writer.", func() float64 { return float64(src.Writer.QueueLen()) })
	m.reg.MustRegister(&executorCollector{rt: src.Runtime})
	if src.MCP != nil {
		m.reg.MustRegister(&mcpCollector{src: src.MCP})
	}
}

// mcpCollector reads the MCP servers' figures at scrape time. Its only
// label is a server's configured name (mcp.ServerName): never its URL or
// an error's text, which may hold secrets (docs/DESIGN.md §4).
type mcpCollector struct{ src MCP }

var descMCPDropped = prometheus.NewDesc("herd_mcp_log_lines_dropped_total", "MCP servers' log lines without an owner that reached no call, since calls of several users or runs were in flight.", []string{"server"}, nil)

func (c *mcpCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descMCPDropped }

func (c *mcpCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.src.Status() {
		ch <- prometheus.MustNewConstMetric(descMCPDropped, prometheus.CounterValue, float64(st.LogLinesDropped), st.Name)
	}
}

// executorCollector reads the executor's registry at scrape time.
type executorCollector struct{ rt Runtime }

var (
	descSubagents = prometheus.NewDesc("herd_subagents", "Live subagent executions by status.", []string{"status"}, nil)
	descRegistry  = prometheus.NewDesc("herd_registry_size", "Executions held in the registry.", nil, nil)
	descQueued    = prometheus.NewDesc("herd_subagents_queued", "Subagents waiting for a running slot.", nil, nil)
	descAbandoned = prometheus.NewDesc("herd_calls_abandoned", "Tool and model calls that ignored a cancellation, were abandoned after the cancel grace and have not returned yet.", nil, nil)
)

func (c *executorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSubagents
	ch <- descRegistry
	ch <- descQueued
	ch <- descAbandoned
}

func (c *executorCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.rt.Stats()
	for _, s := range append([]string{agent.StatusQueued, agent.StatusRunning}, agent.TerminalStatuses()...) {
		ch <- prometheus.MustNewConstMetric(descSubagents, prometheus.GaugeValue, float64(st.ByStatus[s]), s)
	}
	ch <- prometheus.MustNewConstMetric(descRegistry, prometheus.GaugeValue, float64(st.Registry))
	ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, float64(st.Queued))
	ch <- prometheus.MustNewConstMetric(descAbandoned, prometheus.GaugeValue, float64(st.Abandoned))
}

// Instrument wraps a model's provider to record call latency, errors and
// tokens under the model's name.
func (m *Metrics) Instrument(model string, p agent.Provider) agent.Provider {
	return &instrumented{m: m, model: model, p: p}
}

type instrumented struct {
	m     *Metrics
	model string
	p     agent.Provider
}

func (i *instrumented) Complete(ctx context.Context, req agent.Request, onDelta func(string)) (agent.Response, error) {
	start := time.Now()
	resp, err := i.p.Complete(ctx, req, onDelta)
	i.m.llmLatency.WithLabelValues(i.model).Observe(time.Since(start).Seconds())
	switch {
	case err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		i.m.llmErrors.WithLabelValues(i.model).Inc()
	case err == nil && resp.Usage != nil:
		i.m.llmTokens.WithLabelValues(i.model, "input").Add(float64(max(resp.Usage.InputTokens, 0)))
		i.m.llmTokens.WithLabelValues(i.model, "output").Add(float64(max(resp.Usage.OutputTokens, 0)))
		i.m.llmTokens.WithLabelValues(i.model, "cache_read").Add(float64(max(resp.Usage.CacheReadTokens, 0)))
	}
	return resp, err
}
