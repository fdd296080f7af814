// Command loadtest drives a real herd under load on loopback and checks
// that nothing is lost (issue 5): it starts the herd binary on a fresh
// data directory, opens many threads, starts runs that fan out to
// subagents on the demo models, attaches several WebSocket clients per
// thread — some of them reconnecting at random with their last seq — and
// checks that every client received exactly the records the database
// holds for its thread. It reports throughput, frame latency (commit to
// client), peak RSS and goroutines before and after, and exits non-zero
// when a bar is missed.
//
//	make load            # builds ./herd and runs this with the defaults
//	make soak            # 10 minutes of rounds; RSS, goroutines, fds, WAL must stay flat
//	go run ./internal/loadtest -bin ./herd -threads 50 -clients 4 -items 10
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type options struct {
	bin       string
	threads   int
	clients   int
	items     int
	reconnect float64
	latencyMS int
	timeout   time.Duration
	p99Bar    time.Duration
	shmWS     bool
	soak      time.Duration
	// shareCores gives each co-located instance its share of the cores
	// (coreShare).
	shareCores bool
	idle       int
	idleBar    int64 // bytes of RSS
	instances  int
	postgres   string
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "./herd", "the herd binary to drive")
	flag.IntVar(&o.threads, "threads", 50, "threads, each with one run")
	flag.IntVar(&o.clients, "clients", 4, "WebSocket clients per thread")
	flag.IntVar(&o.items, "items", 10, "list items per message: subagents per run (≤ 50)")
	flag.Float64Var(&o.reconnect, "reconnect", 0.25, "share of clients that drop and reconnect with their last seq mid-run")
	flag.IntVar(&o.latencyMS, "latency", 400, "demo model latency per LLM call, ms")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Minute, "give up after this long")
	flag.DurationVar(&o.p99Bar, "p99", 100*time.Millisecond, "bar for the p99 frame latency (0: report only)")
	flag.BoolVar(&o.shmWS, "shm-workspaces", false, "keep the thread workspaces on /dev/shm (the database stays on disk)")
	flag.DurationVar(&o.soak, "soak", 0, "repeat rounds for this long and check that RSS, goroutines, fds and the WAL stay flat (0: one round)")
	idleMB := flag.Int("idle-rss-mb", 256, "bar for herd's RSS with the idle sockets, MB (0: report only)")
	flag.IntVar(&o.instances, "instances", 1, "herd instances; more than one share a PostgreSQL database (make load-cluster)")
	flag.BoolVar(&o.shareCores, "share-cores", true, "with -instances > 1: give each instance GOMAXPROCS of its share of the cores, as a CPU limit would")
	flag.StringVar(&o.postgres, "postgres", "", "with -instances > 1: the PostgreSQL DSN to use (default: a throwaway cluster)")
	flag.IntVar(&o.idle, "idle", 0, "instead of runs: hold this many idle WebSocket clients and measure herd's memory per socket")
	flag.Parse()
	o.idleBar = int64(*idleMB) << 20
	if o.soak > 0 {
		o.timeout = max(o.timeout, o.soak+5*time.Minute)
	}
	if o.threads < 1 || o.threads > 500 || o.clients < 1 || o.clients > 20 || o.items < 1 || o.items > 50 || o.instances < 1 || o.instances > 8 {
		fmt.Fprintln(os.Stderr, "loadtest: threads 1..500, clients 1..20, items 1..50, instances 1..8")
		os.Exit(2)
	}
	if o.idle > 0 {
		if err := raiseFileLimit(o.idle + 256); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			os.Exit(2)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := drive(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest: FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("loadtest: PASS")
}

func drive(ctx context.Context, o options) error {
	dataDir, cleanup, err := makeDataDir(o.shmWS)
	if err != nil {
		return err
	}
	defer cleanup()
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}
	o.bin = bin
	if o.instances > 1 {
		hs, stop, err := startCluster(ctx, o, dataDir)
		if err != nil {
			return err
		}
		defer stop()
		return report(load(ctx, o, hs))
	}
	h, err := start(ctx, o, dataDir)
	if err != nil {
		return err
	}
	defer h.stop()
	if err := h.signIn(); err != nil {
		return fmt.Errorf("sign in: %w", err)
	}
	if o.soak > 0 {
		return soak(ctx, o, h, dataDir)
	}
	if o.idle > 0 {
		return idle(ctx, o, h)
	}
	return report(load(ctx, o, herds{h}))
}

func report(f *figures, err error) error {
	if err != nil {
		return err
	}
	f.print()
	return f.verdict()
}

// makeDataDir makes a fresh data directory; cleanup removes it.
func makeDataDir(shmWorkspaces bool) (dir string, cleanup func(), err error) {
	dir, err = os.MkdirTemp("", "herd-load-")
	if err != nil {
		return "", nil, err
	}
	if !shmWorkspaces {
		return dir, func() { os.RemoveAll(dir) }, nil
	}
	// The demo subagents create thousands of small files at once; on a
	// slow virtual disk their writeback stalls every writer, the
	// database included. On tmpfs the figures are herd's own.
	shm, err := os.MkdirTemp("/dev/shm", "herd-load-ws-")
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	cleanup = func() {
		os.RemoveAll(shm)
		os.RemoveAll(dir)
	}
	if err := os.Symlink(shm, filepath.Join(dir, "workspaces")); err != nil {
		cleanup()
		return "", nil, err
	}
	return dir, cleanup, nil
}

// load runs one message with o.items subagents in each of o.threads
// threads, watched by o.clients clients each, against a signed-in herd,
// and measures it.
func load(ctx context.Context, o options, h herds) (*figures, error) {
	f := &figures{o: o, instances: len(h)}
	var err error
	if f.goroutinesBefore, err = h.metric("go_goroutines"); err != nil {
		return nil, err
	}
	threads, err := openThreads(h, o.threads)
	if err != nil {
		return nil, err
	}
	fl := attach(h, threads, o.clients, o.reconnect)
	if err := waitFor(ctx, func() bool { v, _ := h.metric("herd_ws_clients"); return int(v) == len(fl.clients) }); err != nil {
		return nil, fmt.Errorf("clients did not connect: %w", err)
	}
	msg := prompt(o.items)
	cpu0, w0 := markCPU(h), markWriter(h)
	started := time.Now()
	if err := startRuns(h, threads, msg); err != nil {
		return nil, err
	}
	if err := awaitClients(ctx, h, fl.clients); err != nil {
		return nil, err
	}
	peak, lastRunEnd := fl.peakRunning()
	f.peakRunning, f.elapsed = float64(peak), lastRunEnd.Sub(started)
	f.cpu, f.writer = markCPU(h).since(cpu0), markWriter(h).since(w0)
	fl.stop()
	want, err := persistedAll(h, threads)
	if err != nil {
		return nil, err
	}
	f.tally(fl.clients, want)
	if err := waitFor(ctx, func() bool { v, _ := h.metric("herd_ws_clients"); return v == 0 }); err != nil {
		return nil, errors.New("clients still connected after the load")
	}
	f.goroutinesAfter = settledGoroutines(h, f.goroutinesBefore)
	f.rss, _ = h.peakRSS()
	return f, nil
}

// openThreads creates n threads and returns their ids.
func openThreads(h server, n int) ([]string, error) {
	threads := make([]string, n)
	for i := range threads {
		var th struct{ ID string }
		if err := h.call("POST", "/api/threads", map[string]string{"title": fmt.Sprint("load ", i)}, &th); err != nil {
			return nil, err
		}
		threads[i] = th.ID
	}
	return threads, nil
}

// prompt is a message the demo lead fans out to one subagent per item,
// every third of them a researcher.
func prompt(items int) string {
	var b strings.Builder
	b.WriteString("Compare these, one subagent each:\n")
	for i := range items {
		if i%3 == 2 {
			fmt.Fprintf(&b, "- researcher: topic %d\n", i)
		} else {
			fmt.Fprintf(&b, "- topic %d\n", i)
		}
	}
	return b.String()
}

// startRuns sends msg to every thread at once, spread over the instances.
func startRuns(hs herds, threads []string, msg string) error {
	var startErrs atomic.Int32
	var sw sync.WaitGroup
	for i, th := range threads {
		sw.Go(func() {
			// Each instance runs the runs it was asked for.
			if err := hs[i%len(hs)].call("POST", "/api/threads/"+th+"/runs", map[string]string{"content": msg}, nil); err != nil {
				fmt.Fprintln(os.Stderr, err)
				startErrs.Add(1)
			}
		})
	}
	sw.Wait()
	if n := startErrs.Load(); n > 0 {
		return fmt.Errorf("%d runs failed to start", n)
	}
	return nil
}

// awaitClients waits until every client has seen run.end, and then
// everything up to it.
func awaitClients(ctx context.Context, h server, clients []*client) error {
	for _, c := range clients {
		select {
		case <-c.ended:
		case <-ctx.Done():
			return fmt.Errorf("a client of %s never saw run.end", c.thread)
		}
	}
	return settle(ctx, h, clients)
}

// persistedAll lists the seqs the database holds for each thread.
func persistedAll(h server, threads []string) (map[string][]int64, error) {
	want := map[string][]int64{}
	for _, th := range threads {
		seqs, err := persisted(h, th)
		if err != nil {
			return nil, err
		}
		want[th] = seqs
	}
	return want, nil
}

// settledGoroutines counts the server's goroutines once those of the
// finished runs have returned, which takes moments; it gives up waiting
// after five seconds.
func settledGoroutines(h server, before float64) float64 {
	settleBy := time.Now().Add(5 * time.Second)
	for {
		n, _ := h.metric("go_goroutines")
		if n <= before || time.Now().After(settleBy) {
			return n
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// settle waits until every client has the last seq of its thread.
func settle(ctx context.Context, h server, clients []*client) error {
	last := map[string]int64{}
	for _, c := range clients {
		if _, ok := last[c.thread]; !ok {
			var th struct {
				LastSeq int64 `json:"last_seq"`
			}
			if err := h.call("GET", "/api/threads/"+c.thread, nil, &th); err != nil {
				return err
			}
			last[c.thread] = th.LastSeq
		}
	}
	return waitFor(ctx, func() bool {
		for _, c := range clients {
			c.mu.Lock()
			got := c.last
			c.mu.Unlock()
			if got < last[c.thread] {
				return false
			}
		}
		return true
	})
}

// persisted lists every seq the database holds for a thread: its
// messages and its events.
func persisted(h server, thread string) ([]int64, error) {
	var th struct {
		Messages []struct {
			Seq int64 `json:"seq"`
		} `json:"messages"`
	}
	if err := h.call("GET", "/api/threads/"+thread, nil, &th); err != nil {
		return nil, err
	}
	var seqs []int64
	for _, m := range th.Messages {
		seqs = append(seqs, m.Seq)
	}
	after := int64(0)
	for {
		var page struct {
			Events []struct {
				Seq int64 `json:"seq"`
			} `json:"events"`
			Next int64 `json:"next_after_seq"`
			More bool  `json:"has_more"`
		}
		if err := h.call("GET", fmt.Sprintf("/api/threads/%s/events?after_seq=%d&limit=1000", thread, after), nil, &page); err != nil {
			return nil, err
		}
		for _, e := range page.Events {
			seqs = append(seqs, e.Seq)
		}
		if !page.More {
			break
		}
		after = page.Next
	}
	slices.Sort(seqs)
	return seqs, nil
}

func waitFor(ctx context.Context, ok func() bool) error {
	for !ok() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}
