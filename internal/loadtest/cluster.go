package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/jackc/pgx/v5"

	"herd/internal/pgtest"
)

// server is what the load asks of herd: its API and its metrics.
type server interface {
	call(method, path string, body, out any) error
	metric(series string) (float64, error)
	scrape(series ...string) ([]float64, error)
}

// herds are the instances of one load: one herd on SQLite, or several on
// one PostgreSQL database (make load-cluster). Metrics add up over them;
// API calls go to the first, which sees what every instance wrote.
type herds []*herd

func (hs herds) call(method, path string, body, out any) error {
	return hs[0].call(method, path, body, out)
}

func (hs herds) metric(series string) (float64, error) {
	vs, err := hs.scrape(series)
	if err != nil {
		return 0, err
	}
	return vs[0], nil
}

func (hs herds) scrape(series ...string) ([]float64, error) {
	sums := make([]float64, len(series))
	for _, h := range hs {
		vs, err := h.scrape(series...)
		if err != nil {
			return nil, err
		}
		for i, v := range vs {
			sums[i] += v
		}
	}
	return sums, nil
}

// peakRSS is the highest high-water resident set of the instances.
func (hs herds) peakRSS() (int64, error) {
	var peak int64
	for _, h := range hs {
		v, err := h.peakRSS()
		if err != nil {
			return 0, err
		}
		peak = max(peak, v)
	}
	return peak, nil
}

func (hs herds) stop() {
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Go(h.stop)
	}
	wg.Wait()
}

// startCluster starts o.instances herds at once on one PostgreSQL
// database — o.postgres, or a throwaway cluster — each with its
// own data directory and all with one workspaces directory, as
// docs/OPERATIONS.md asks of several instances. They share the bearer
// token the first one signs in with.
func startCluster(ctx context.Context, o options, dataDir string) (herds, func(), error) {
	stopPG := func() {}
	dsn := o.postgres
	if dsn == "" {
		pg, err := pgtest.Start(os.TempDir()) // not dataDir: as root, PostgreSQL runs as nobody, who cannot enter it
		if err != nil {
			return nil, nil, fmt.Errorf("PostgreSQL: %w (or pass -postgres DSN)", err)
		}
		dsn, stopPG = pg.DSN, pg.Stop
	}
	shared := filepath.Join(dataDir, "workspaces")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		stopPG()
		return nil, nil, err
	}
	env := []string{"HERD_DATABASE_DRIVER=postgres", "HERD_DATABASE_DSN=" + dsn, "HERD_WORKSPACES_DIR=" + shared}
	if n := coreShare(o); n > 0 {
		env = append(env, fmt.Sprint("GOMAXPROCS=", n))
	}
	hs := make(herds, o.instances)
	errs := make([]error, o.instances)
	var wg sync.WaitGroup
	for i := range hs {
		wg.Go(func() {
			dir := filepath.Join(dataDir, fmt.Sprint("instance-", i))
			if errs[i] = os.MkdirAll(dir, 0o755); errs[i] == nil {
				hs[i], errs[i] = start(ctx, o, dir, env...)
			}
		})
	}
	wg.Wait()
	var up herds
	for _, h := range hs {
		if h != nil {
			up = append(up, h)
		}
	}
	stop := func() {
		up.stop()
		stopPG()
	}
	if err := errors.Join(errs...); err != nil {
		stop()
		return nil, nil, err
	}
	if err := hs[0].signIn(); err != nil {
		stop()
		return nil, nil, fmt.Errorf("sign in: %w", err)
	}
	pm := postmaster(ctx, dsn)
	for _, h := range hs {
		h.tok, h.postmaster = hs[0].tok, pm
	}
	return hs, stop, nil
}

// postmaster is the pid of the PostgreSQL server at dsn when it runs on
// this machine (the parent of a backend), 0 when it cannot tell.
func postmaster(ctx context.Context, dsn string) int {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0
	}
	defer conn.Close(context.Background())
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return 0
	}
	st, ok := procStat(backend)
	if !ok {
		return 0
	}
	return st.ppid
}

// coreShare is the GOMAXPROCS each co-located instance gets with
// -share-cores: its share of this machine's cores, at least one, as a
// container's CPU limit would give it (Go sets GOMAXPROCS from a cgroup's
// quota). Deployed, each instance has its own machine or limit; here all
// of them and PostgreSQL share the cores, and each Go runtime believing
// it owns them all oversubscribes the machine (docs/PERFORMANCE.md
// §Several instances). 0: leave GOMAXPROCS alone.
func coreShare(o options) int {
	if !o.shareCores || os.Getenv("GOMAXPROCS") != "" {
		return 0
	}
	return max(1, runtime.NumCPU()/o.instances)
}
