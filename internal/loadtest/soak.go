package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// sample is the server's state between two soak rounds, once the round's
// goroutines have returned.
type sample struct {
	at         time.Duration // since the soak began
	rounds     int
	rss        int64 // VmRSS
	goroutines int
	fds        int
	wal        int64 // herd.db-wal
}

// soak repeats load rounds (fresh threads each round, so the database
// grows as in real use) until o.soak has passed, and samples the server
// between rounds. It fails when a round loses or duplicates a frame, or
// when RSS, goroutines, file descriptors or the WAL keep growing after
// the warm-up (the first fifth of the soak).
func soak(ctx context.Context, o options, h *herd, dataDir string) error {
	begin := time.Now()
	var samples []sample
	lost, dups, rounds := 0, 0, 0
	idle := -1.0 // the goroutines of an idle server, from the first sample
	take := func() error {
		s, err := h.sample(dataDir, idle)
		if err != nil {
			return err
		}
		s.at, s.rounds = time.Since(begin), rounds
		if idle < 0 {
			idle = float64(s.goroutines)
		}
		samples = append(samples, s)
		fmt.Printf("%7s  round %3d  RSS %6.1f MB  goroutines %4d  fds %4d  WAL %6.1f MB\n",
			s.at.Round(time.Second), s.rounds, mb(s.rss), s.goroutines, s.fds, mb(s.wal))
		return nil
	}
	if err := take(); err != nil {
		return err
	}
	for time.Since(begin) < o.soak {
		f, err := load(ctx, o, herds{h})
		if err != nil {
			return fmt.Errorf("round %d: %w", rounds+1, err)
		}
		rounds++
		lost, dups = lost+f.lost, dups+f.dups
		if err := take(); err != nil {
			return err
		}
	}
	fmt.Printf("soak: %d rounds of %d threads × %d subagents in %s; lost %d, duplicated %d\n",
		rounds, o.threads, o.items, time.Since(begin).Round(time.Second), lost, dups)
	var errs []error
	if lost > 0 || dups > 0 {
		errs = append(errs, fmt.Errorf("%d lost, %d duplicated frames", lost, dups))
	}
	return errors.Join(append(errs, flat(samples, o.soak/5))...)
}

// flat checks that nothing grows after warmup: each figure's highest
// sample in the last half stays within a margin of its highest in the
// first half after the warm-up, so a leak shows as a rise between the two.
func flat(samples []sample, warmup time.Duration) error {
	var steady []sample
	for _, s := range samples {
		if s.at >= warmup {
			steady = append(steady, s)
		}
	}
	if len(steady) < 4 {
		return fmt.Errorf("only %d samples after the warm-up; soak longer", len(steady))
	}
	early, late := steady[:len(steady)/2], steady[len(steady)/2:]
	peak := func(ss []sample, f func(sample) int64) int64 {
		var top int64
		for _, s := range ss {
			top = max(top, f(s))
		}
		return top
	}
	var errs []error
	for _, c := range []struct {
		name   string
		f      func(sample) int64
		margin func(int64) int64
	}{
		{"RSS", func(s sample) int64 { return s.rss }, func(v int64) int64 { return v/5 + 16<<20 }},
		{"goroutines", func(s sample) int64 { return int64(s.goroutines) }, func(int64) int64 { return 5 }},
		{"file descriptors", func(s sample) int64 { return int64(s.fds) }, func(int64) int64 { return 5 }},
		{"WAL", func(s sample) int64 { return s.wal }, func(v int64) int64 { return v/2 + 8<<20 }},
	} {
		e, l := peak(early, c.f), peak(late, c.f)
		if l > e+c.margin(e) {
			errs = append(errs, fmt.Errorf("%s grew after the warm-up: peak %d early, %d late", c.name, e, l))
		}
	}
	return errors.Join(errs...)
}

// sample reads the server's RSS, open files and WAL size from /proc and
// the data directory, and its goroutines from /metrics once they have
// settled to idle (the first sample's count; < 0 for the first sample).
func (h *herd) sample(dataDir string, idle float64) (sample, error) {
	var s sample
	var err error
	if s.rss, err = h.memory("VmRSS"); err != nil {
		return s, err
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", h.cmd.Process.Pid))
	if err != nil {
		return s, err
	}
	s.fds = len(fds)
	if fi, err := os.Stat(filepath.Join(dataDir, "herd.db-wal")); err == nil {
		s.wal = fi.Size()
	}
	g, err := h.metric("go_goroutines")
	if err != nil {
		return s, err
	}
	if idle >= 0 {
		g = settledGoroutines(h, idle)
	}
	s.goroutines = int(g)
	return s, nil
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }
