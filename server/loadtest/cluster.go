package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"herd/internal/pgtest"
)

// server is what the load asks of herd: its API and its metrics.
type server interface {
	call(method, path string, body, out any) error
	metric(series string) (float64, error)
}

// herds are the instances of one load: one herd on SQLite, or several on
// one PostgreSQL database (make load-cluster). Metrics add up over them;
// API calls go to the first, which sees what every instance wrote.
type herds []*herd

func (hs herds) call(method, path string, body, out any) error {
	return hs[0].call(method, path, body, out)
}

func (hs herds) metric(series string) (float64, error) {
	sum := 0.0
	for _, h := range hs {
		v, err := h.metric(series)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
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
	for _, h := range hs[1:] {
		h.tok = hs[0].tok
	}
	return hs, stop, nil
}
