package e2e

import (
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd/internal/pgtest"
)

// TestPostgresStartWaitsForTheDatabase: herd started while its PostgreSQL
// is down (both started at boot, the database a little later) says it is
// waiting, retries, and once the database comes up 5 s later starts
// normally: ready, and a run goes to its end (docs/OPERATIONS.md
// "PostgreSQL"). The same database under a name it does not have fails
// at once, without the wait.
func TestPostgresStartWaitsForTheDatabase(t *testing.T) {
	t.Parallel() // it mostly waits: beside the others
	c := pgtest.Private(t)
	if err := c.Halt(); err != nil {
		t.Fatal(err)
	}
	herdBinary(t) // built before the clock starts
	resumed := make(chan error, 1)
	time.AfterFunc(5*time.Second, func() { resumed <- c.Resume() })
	start := time.Now()
	p := startHerdWith(t, t.TempDir(), append(pgEnv(c.DSN), "HERD_MODELS_0_LATENCY_MS=20", "HERD_MODELS_1_LATENCY_MS=20")...)
	if err := <-resumed; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 5*time.Second {
		t.Errorf("herd was listening %v after its start, before the database was up", took)
	}
	log := p.log.String()
	if strings.Count(log, "waiting for the database") != 1 || !strings.Contains(log, ": the database cannot be reached; retrying for up to 60 s") ||
		!strings.Contains(log, "msg=database driver=postgres") || !strings.Contains(log, " waited=") {
		t.Errorf("want one line saying herd waits for the database, then the database and how long it waited:\n%s", log)
	}
	resp, err := http.Get(p.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("readyz after the wait: %d", resp.StatusCode)
	}
	cl := p.signIn()
	var th struct{ ID string }
	cl.call("POST", "/api/threads", map[string]string{"title": "a late database"}, &th)
	if _, cards := streamRun(t, p, cl, th.ID, "Check:\n- alpha\n- beta"); len(cards) != 2 {
		t.Errorf("cards ended live: %v, want 2", cards)
	}
	stopHerd(t, p)

	// A refusal is no outage: a database that does not exist fails at once.
	start = time.Now()
	code, out := startToExit(t, 10*time.Second, pgEnv(c.DSN+" dbname=herd_no_such_db")...)
	if code != 1 || !strings.Contains(out, `database \"herd_no_such_db\" does not exist`) || strings.Contains(out, "waiting for the database") {
		t.Errorf("a missing database: exit %d after %v; want 1 at once, naming it:\n%s", code, time.Since(start), out)
	}
}

// TestPostgresNeverUp: with no database to reach, herd retries for
// database.connect_timeout_seconds, then exits 1 saying for how long and
// why; a stop (SIGTERM) during the wait ends it at once, as a stop.
func TestPostgresNeverUp(t *testing.T) {
	t.Parallel()
	// A socket directory with no server in it: PostgreSQL not running.
	nowhere := "host=" + t.TempDir() + " user=herd dbname=herd sslmode=disable"
	start := time.Now()
	code, out := startToExit(t, 15*time.Second, append(pgEnv(nowhere), "HERD_DATABASE_CONNECT_TIMEOUT_SECONDS=2")...)
	took := time.Since(start)
	if code != 1 || !strings.Contains(out, "could not be reached for 2 s: store: open PostgreSQL database herd@") || !strings.Contains(out, "retrying for up to 2 s") {
		t.Errorf("exit %d; want 1 saying the database could not be reached for 2 s:\n%s", code, out)
	}
	if took < 2*time.Second || took > 6*time.Second {
		t.Errorf("exited after %v; want the 2 s wait and a little", took)
	}

	cmd, log, done := launch(t, pgEnv(nowhere)...)
	if !log.waitFor("waiting for the database", 15*time.Second) {
		t.Fatalf("herd never said it waits for the database:\n%s", log.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || !strings.Contains(log.String(), "herd stopped before it started") {
			t.Errorf("SIGTERM during the wait: %v; want exit 0 as a stop:\n%s", err, log.String())
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("herd did not stop within 3 s of SIGTERM while waiting for the database:\n%s", log.String())
	}
}

// launch starts herd with env added and returns it, its log and its
// exit, without waiting for it to listen.
func launch(t *testing.T, env ...string) (*exec.Cmd, *syncBuffer, chan error) {
	t.Helper()
	cmd := exec.Command(herdBinary(t), "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0")
	cmd.Env = append(append(os.Environ(), "HERD_METRICS_ADDR=127.0.0.1:0"), env...)
	log := &syncBuffer{}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return cmd, log, done
}

// startToExit runs herd with env added until it exits, within timeout,
// and returns its exit code and log.
func startToExit(t *testing.T, timeout time.Duration, env ...string) (int, string) {
	t.Helper()
	_, log, done := launch(t, env...)
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), log.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, log.String()
	case <-time.After(timeout):
		t.Fatalf("herd did not exit within %v:\n%s", timeout, log.String())
		return 0, ""
	}
}
