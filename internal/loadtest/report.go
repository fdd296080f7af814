package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"
)

// figures are what one load run measured.
type figures struct {
	o                                 options
	instances                         int
	clients, reconnects, replayed     int
	records, frames, lost, dups       int
	peakRunning                       float64
	elapsed                           time.Duration
	lats                              []time.Duration // live frame latencies, sorted
	local, remote                     []time.Duration // the same, split by where the client was (sorted)
	cpu                               cpuUse
	writer                            writerUse
	goroutinesBefore, goroutinesAfter float64
	rss                               int64
}

// tally compares each client with the database (want: the seqs of each
// thread) and gathers what the clients counted.
func (f *figures) tally(clients []*client, want map[string][]int64) {
	f.clients = len(clients)
	for _, c := range clients {
		w := want[c.thread]
		if !slices.Equal(c.seqs, w) {
			f.lost += max(len(w)-len(c.seqs), 1)
			fmt.Fprintf(os.Stderr, "client of %s: received %d records, the database holds %d\n", c.thread, len(c.seqs), len(w))
		}
		f.dups += c.dups
		f.frames += len(c.seqs)
		f.reconnects += c.reconnects
		f.replayed += c.replayed
		f.lats = append(append(f.lats, c.lats...), c.remote...)
		f.local = append(f.local, c.lats...)
		f.remote = append(f.remote, c.remote...)
	}
	slices.Sort(f.lats)
	slices.Sort(f.local)
	slices.Sort(f.remote)
	for _, w := range want {
		f.records += len(w)
	}
}

// p is the q quantile of the live frame latency.
func (f *figures) p(q float64) time.Duration { return quantile(f.lats, q) }

// quantile is the q quantile of sorted lats, 0 when there are none.
func quantile(lats []time.Duration, q float64) time.Duration {
	if len(lats) == 0 {
		return 0
	}
	return lats[min(len(lats)-1, int(float64(len(lats))*q))]
}

func (f *figures) print() {
	o := f.o
	where := "disk"
	if o.shmWS {
		where = "/dev/shm"
	}
	secs := f.elapsed.Seconds()
	if f.instances > 1 {
		fmt.Printf("%d instances on one PostgreSQL; clients spread over them, and those that reconnect go to the next one\n", f.instances)
		if n := coreShare(f.o); n > 0 {
			fmt.Printf("each instance runs with GOMAXPROCS=%d, its share of the %d cores (-share-cores=false: each takes them all)\n", n, runtime.NumCPU())
		}
	}
	fmt.Printf("threads %d, clients %d (%d reconnected mid-run), subagents %d, peak running %d; workspaces on %s\n",
		o.threads, f.clients, f.reconnects, o.threads*o.items, int(f.peakRunning), where)
	fmt.Printf("records persisted %d in %.2fs (%.0f/s); frames delivered %d (%.0f/s)\n",
		f.records, secs, float64(f.records)/secs, f.frames, float64(f.frames)/secs)
	fmt.Printf("live frame latency (commit → client): p50 %.1f ms, p99 %.1f ms, max %.1f ms over %d frames; %d more caught up after reconnects\n",
		ms(f.p(0.5)), ms(f.p(0.99)), ms(f.lats[len(f.lats)-1]), len(f.lats), f.replayed)
	if f.instances > 1 {
		fmt.Printf("  on the instance running the thread: p50 %.1f ms, p99 %.1f ms over %d frames; through another instance: p50 %.1f ms, p99 %.1f ms over %d\n",
			ms(quantile(f.local, 0.5)), ms(quantile(f.local, 0.99)), len(f.local), ms(quantile(f.remote, 0.5)), ms(quantile(f.remote, 0.99)), len(f.remote))
	}
	f.cpu.print()
	f.writer.print(f.cpu.wall, f.instances)
	fmt.Printf("lost %d, duplicated %d; peak RSS %.0f MB (the largest instance); goroutines before %d, after %d\n",
		f.lost, f.dups, float64(f.rss)/(1<<20), int(f.goroutinesBefore), int(f.goroutinesAfter))
}

// verdict is every bar the run missed, nil when it passed.
func (f *figures) verdict() error {
	o := f.o
	var errs []error
	if f.lost > 0 || f.dups > 0 {
		errs = append(errs, fmt.Errorf("%d lost, %d duplicated frames", f.lost, f.dups))
	}
	if o.p99Bar > 0 && f.p(0.99) > o.p99Bar {
		errs = append(errs, fmt.Errorf("p99 frame latency %.1f ms > %v", ms(f.p(0.99)), o.p99Bar))
	}
	if f.goroutinesAfter > f.goroutinesBefore+5 {
		errs = append(errs, fmt.Errorf("goroutines %d after, %d before", int(f.goroutinesAfter), int(f.goroutinesBefore)))
	}
	if int(f.peakRunning) < o.threads*o.items*9/10 {
		errs = append(errs, fmt.Errorf("only %d subagents ran at once, want about %d", int(f.peakRunning), o.threads*o.items))
	}
	return errors.Join(errs...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
