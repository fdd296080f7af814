package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// herd is the server under test.
type herd struct {
	cmd     *exec.Cmd
	url     string
	metrics string // the metrics listener's /metrics
	tok     string
	http    *http.Client
	// postmaster is the pid of the PostgreSQL server the herd uses when
	// it runs on this machine, for its CPU figure; 0 otherwise.
	postmaster int
	done       chan error
}

var (
	listening        = regexp.MustCompile(`msg="herd is listening" url=(\S+)`)
	metricsListening = regexp.MustCompile(`msg="metrics are listening" url=(\S+)`)
)

// herdEnv is the environment of a herd under load: limits lifted where
// one account stands in for every user, the demo's latency set.
func herdEnv(o options) []string {
	n := o.threads * o.items
	return append(os.Environ(),
		"HERD_ADMIN_EMAIL=load@example.com", "HERD_ADMIN_PASSWORD=load test password",
		"HERD_LOG_LEVEL=info",
		"HERD_AUTH_RUNS_PER_MINUTE=100000",
		// One account stands in for every user here: lift its per-user
		// limits on threads, open sockets and connects.
		"HERD_AUTH_THREADS_PER_MINUTE=100000",
		"HERD_SERVER_MAX_SOCKETS_PER_USER=100000",
		"HERD_SERVER_WS_CONNECTS_PER_MINUTE=100000",
		fmt.Sprintf("HERD_SUBAGENTS_MAX_RUNNING=%d", n),
		// One account drives every thread: lift the per-user fair-use caps.
		fmt.Sprintf("HERD_LEAD_MAX_ACTIVE_RUNS_PER_USER=%d", o.threads),
		fmt.Sprintf("HERD_SUBAGENTS_MAX_RUNNING_PER_USER=%d", n),
		fmt.Sprintf("HERD_SUBAGENTS_MAX_CONCURRENT_PER_RESPONSE=%d", o.items),
		fmt.Sprintf("HERD_SUBAGENTS_MAX_TOTAL_PER_RUN=%d", o.items),
		fmt.Sprintf("HERD_MODELS_0_LATENCY_MS=%d", o.latencyMS),
		fmt.Sprintf("HERD_MODELS_1_LATENCY_MS=%d", o.latencyMS),
		"HERD_MODELS_0_CHUNK_MS=5", "HERD_MODELS_1_CHUNK_MS=5",
		"HERD_METRICS_ADDR=127.0.0.1:0",
		// Every client's socket and the API calls beside them, so the
		// load measures herd rather than the connection cap.
		fmt.Sprintf("HERD_SERVER_MAX_CONNECTIONS=%d", max(2*o.threads*o.clients, o.idle)+64),
	)
}

func start(ctx context.Context, o options, dataDir string, env ...string) (*herd, error) {
	cmd := exec.Command(o.bin, "--data-dir", dataDir, "--addr", "127.0.0.1:0")
	cmd.Env = append(herdEnv(o), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", o.bin, err)
	}
	// Uncompressed: gzip was a third of the CPU of each /metrics scrape
	// while the driver polls during the runs.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableCompression = true
	h := &herd{cmd: cmd, http: &http.Client{Timeout: 30 * time.Second, Transport: tr}, done: make(chan error, 1)}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			// herd logs its metrics address before it says it listens.
			if m := metricsListening.FindStringSubmatch(line); m != nil {
				h.metrics = m[1]
			} else if m := listening.FindStringSubmatch(line); m != nil {
				urls <- m[1]
			} else if strings.Contains(line, "level=ERROR") {
				fmt.Fprintln(os.Stderr, "herd:", line)
			}
		}
		h.done <- cmd.Wait()
	}()
	select {
	case h.url = <-urls:
	case err := <-h.done:
		return nil, fmt.Errorf("herd exited at start: %v", err)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return nil, errors.New("herd did not start")
	}
	if !strings.HasPrefix(h.url, "http://127.0.0.1:") {
		h.stop()
		return nil, fmt.Errorf("refusing to load %s: loopback only", h.url)
	}
	return h, nil
}

func (h *herd) stop() {
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.done:
	case <-time.After(30 * time.Second):
		_ = h.cmd.Process.Kill()
		<-h.done
	}
}

func (h *herd) call(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, h.url+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if h.tok != "" {
		req.Header.Set("Authorization", "Bearer "+h.tok)
	}
	resp, err := h.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// signIn gets a bearer token through a cookie session.
func (h *herd) signIn() error {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	login := func(path string, body any, hdr map[string]string, out any) error {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", h.url+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		rb, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			return fmt.Errorf("%s: %d %s", path, resp.StatusCode, rb)
		}
		return json.Unmarshal(rb, out)
	}
	var in struct {
		CSRF string `json:"csrf_token"`
	}
	if err := login("/api/auth/login", map[string]string{"email": "load@example.com", "password": "load test password"}, nil, &in); err != nil {
		return err
	}
	var tok struct {
		Token string `json:"token"`
	}
	if err := login("/api/tokens", map[string]string{"name": "load"}, map[string]string{"X-CSRF-Token": in.CSRF}, &tok); err != nil {
		return err
	}
	h.tok = tok.Token
	return nil
}

// metric reads one series from /metrics.
func (h *herd) metric(series string) (float64, error) {
	vs, err := h.scrape(series)
	if err != nil {
		return 0, err
	}
	return vs[0], nil
}

// scrape reads several series from one scrape of /metrics. Each scrape
// costs the server CPU, so the driver scrapes before and after the runs,
// never during them.
func (h *herd) scrape(series ...string) ([]float64, error) {
	// Only the connection of this request is open while the server counts
	// its goroutines, so counts taken at different times compare.
	h.http.CloseIdleConnections()
	resp, err := h.http.Get(h.metrics)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	vs := make([]float64, len(series))
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() && found < len(series) {
		for i, name := range series {
			if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
				if vs[i], err = strconv.ParseFloat(v, 64); err != nil {
					return nil, err
				}
				found++
			}
		}
	}
	if found < len(series) {
		return nil, fmt.Errorf("not every series of %v", series)
	}
	return vs, nil
}

// peakRSS is the server's high-water resident set, from /proc.
func (h *herd) peakRSS() (int64, error) { return h.memory("VmHWM") }

// memory reads one of the server's memory figures (VmHWM, VmRSS) from
// /proc, in bytes.
func (h *herd) memory(field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s", field)
}
