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
//	go run ./server/loadtest -bin ./herd -threads 50 -clients 4 -items 10
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
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
	flag.Parse()
	if o.threads < 1 || o.threads > 500 || o.clients < 1 || o.clients > 20 || o.items < 1 || o.items > 50 {
		fmt.Fprintln(os.Stderr, "loadtest: threads 1..500, clients 1..20, items 1..50")
		os.Exit(2)
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
	dataDir, err := os.MkdirTemp("", "herd-load-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dataDir)
	if o.shmWS {
		// The demo subagents create thousands of small files at once; on a
		// slow virtual disk their writeback stalls every writer, the
		// database included. On tmpfs the figures are herd's own.
		shm, err := os.MkdirTemp("/dev/shm", "herd-load-ws-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(shm)
		if err := os.Symlink(shm, filepath.Join(dataDir, "workspaces")); err != nil {
			return err
		}
	}
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}
	o.bin = bin
	h, err := start(ctx, o, dataDir)
	if err != nil {
		return err
	}
	defer h.stop()
	if err := h.signIn(); err != nil {
		return fmt.Errorf("sign in: %w", err)
	}
	goroutinesBefore, err := h.metric("go_goroutines")
	if err != nil {
		return err
	}

	threads := make([]string, o.threads)
	for i := range threads {
		var th struct{ ID string }
		if err := h.call("POST", "/api/threads", map[string]string{"title": fmt.Sprint("load ", i)}, &th); err != nil {
			return err
		}
		threads[i] = th.ID
	}
	var (
		clients []*client
		wg      sync.WaitGroup
		stop    = make(chan struct{})
	)
	for _, th := range threads {
		for range o.clients {
			c := &client{thread: th, reconnect: rand.Float64() < o.reconnect, ended: make(chan struct{})}
			clients = append(clients, c)
			wg.Add(1)
			go c.run(h, stop, &wg)
		}
	}
	if err := waitFor(ctx, func() bool { v, _ := h.metric("herd_ws_clients"); return int(v) == len(clients) }); err != nil {
		return fmt.Errorf("clients did not connect: %w", err)
	}

	var b strings.Builder
	b.WriteString("Compare these, one subagent each:\n")
	for i := range o.items {
		if i%3 == 2 {
			fmt.Fprintf(&b, "- researcher: topic %d\n", i)
		} else {
			fmt.Fprintf(&b, "- topic %d\n", i)
		}
	}
	started := time.Now()
	var startErrs atomic.Int32
	var sw sync.WaitGroup
	for _, th := range threads {
		sw.Go(func() {
			if err := h.call("POST", "/api/threads/"+th+"/runs", map[string]string{"content": b.String()}, nil); err != nil {
				fmt.Fprintln(os.Stderr, err)
				startErrs.Add(1)
			}
		})
	}
	sw.Wait()
	if n := startErrs.Load(); n > 0 {
		return fmt.Errorf("%d runs failed to start", n)
	}
	peakRunning := 0.0
	for {
		v, _ := h.metric(`herd_subagents{status="running"}`)
		peakRunning = max(peakRunning, v)
		active, _ := h.metric("herd_active_runs")
		if active == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return errors.New("runs did not finish in time")
		case <-time.After(50 * time.Millisecond):
		}
	}
	elapsed := time.Since(started)
	// Every client sees run.end; then it has everything up to it.
	for _, c := range clients {
		select {
		case <-c.ended:
		case <-ctx.Done():
			return fmt.Errorf("a client of %s never saw run.end", c.thread)
		}
	}
	if err := settle(ctx, h, clients); err != nil {
		return err
	}
	close(stop)
	wg.Wait()

	// Compare each client with the database.
	want := map[string][]int64{}
	for _, th := range threads {
		seqs, err := persisted(h, th)
		if err != nil {
			return err
		}
		want[th] = seqs
	}
	var (
		lost, dups, frames, reconnects, replayed int
		lats                                     []time.Duration
	)
	for _, c := range clients {
		w := want[c.thread]
		if !slices.Equal(c.seqs, w) {
			lost += max(len(w)-len(c.seqs), 1)
			fmt.Fprintf(os.Stderr, "client of %s: received %d records, the database holds %d\n", c.thread, len(c.seqs), len(w))
		}
		dups += c.dups
		frames += len(c.seqs)
		reconnects += c.reconnects
		replayed += c.replayed
		lats = append(lats, c.lats...)
	}
	slices.Sort(lats)
	if err := waitFor(ctx, func() bool { v, _ := h.metric("herd_ws_clients"); return v == 0 }); err != nil {
		return errors.New("clients still connected after the load")
	}
	// Finished runs' goroutines return within moments; wait for that, then
	// count.
	var goroutinesAfter float64
	settleBy := time.Now().Add(5 * time.Second)
	for {
		goroutinesAfter, _ = h.metric("go_goroutines")
		if goroutinesAfter <= goroutinesBefore || time.Now().After(settleBy) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	rss, _ := h.peakRSS()
	var records int
	for _, w := range want {
		records += len(w)
	}
	p := func(q float64) time.Duration { return lats[min(len(lats)-1, int(float64(len(lats))*q))] }
	where := "disk"
	if o.shmWS {
		where = "/dev/shm"
	}
	fmt.Printf("threads %d, clients %d (%d reconnected mid-run), subagents %d, peak running %d; workspaces on %s\n",
		o.threads, len(clients), reconnects, o.threads*o.items, int(peakRunning), where)
	fmt.Printf("records persisted %d in %.2fs (%.0f/s); frames delivered %d (%.0f/s)\n",
		records, elapsed.Seconds(), float64(records)/elapsed.Seconds(), frames, float64(frames)/elapsed.Seconds())
	fmt.Printf("live frame latency (commit → client): p50 %.1f ms, p99 %.1f ms, max %.1f ms over %d frames; %d more caught up after reconnects\n",
		ms(p(0.5)), ms(p(0.99)), ms(lats[len(lats)-1]), len(lats), replayed)
	fmt.Printf("lost %d, duplicated %d; peak RSS %.0f MB; goroutines before %d, after %d\n",
		lost, dups, float64(rss)/(1<<20), int(goroutinesBefore), int(goroutinesAfter))

	var errs []error
	if lost > 0 || dups > 0 {
		errs = append(errs, fmt.Errorf("%d lost, %d duplicated frames", lost, dups))
	}
	if o.p99Bar > 0 && p(0.99) > o.p99Bar {
		errs = append(errs, fmt.Errorf("p99 frame latency %.1f ms > %v", ms(p(0.99)), o.p99Bar))
	}
	if goroutinesAfter > goroutinesBefore+5 {
		errs = append(errs, fmt.Errorf("goroutines %d after, %d before", int(goroutinesAfter), int(goroutinesBefore)))
	}
	if int(peakRunning) < o.threads*o.items*9/10 {
		errs = append(errs, fmt.Errorf("only %d subagents ran at once, want about %d", int(peakRunning), o.threads*o.items))
	}
	return errors.Join(errs...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// settle waits until every client has the last seq of its thread.
func settle(ctx context.Context, h *herd, clients []*client) error {
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
func persisted(h *herd, thread string) ([]int64, error) {
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
