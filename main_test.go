package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"herd/models"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// syncBuffer is a bytes.Buffer safe for run's logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestBadConfigNamesTheKeyAndExits(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "herd.yaml")
	cases := []struct {
		name string
		file string
		env  []string
		args []string
		want string
	}{
		{"unknown key", "subagents:\n  max_runing: 3\n", nil, nil, "subagents.max_runing"},
		{"bad value", "subagents:\n  max_running: 0\n", nil, nil, "subagents.max_running"},
		{"bad env", "", []string{"HERD_SUBAGENTS_MAX_RUNNING=lots"}, nil, "HERD_SUBAGENTS_MAX_RUNNING"},
		{"bad flag", "", nil, []string{"--addr", "nowhere"}, "--addr: must be host:port"},
		{"unknown flag", "", nil, []string{"--adrr", "x"}, "adrr"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"--data-dir", dir}, c.args...)
			if c.file != "" {
				if err := os.WriteFile(cfg, []byte(c.file), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", cfg)
			}
			var out syncBuffer
			code := run(context.Background(), args, c.env, &out, &out)
			if code == 0 {
				t.Fatalf("exit code 0 with a bad config")
			}
			if !strings.Contains(out.String(), c.want) {
				t.Errorf("output %q does not name %q", out.String(), c.want)
			}
		})
	}
}

// TestMetricsAddressInUseStopsHerd: a metrics address that cannot be
// bound is a start-up error naming the key, not a silent gap.
func TestMetricsAddressInUseStopsHerd(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var out syncBuffer
	code := run(t.Context(), []string{"--data-dir", t.TempDir(), "--addr", "127.0.0.1:0"}, []string{"HERD_METRICS_ADDR=" + ln.Addr().String()}, &out, &out)
	if code == 0 || !strings.Contains(out.String(), "metrics.addr") {
		t.Errorf("exit %d, output %q: want a failure naming metrics.addr", code, out.String())
	}
}

// TestHostBashRefusedWhenPublic: host bash on a public deployment — a
// non-loopback listen address, or a TLS proxy named by server.public_url —
// stops herd at start with an error naming the way out.
func TestHostBashRefusedWhenPublic(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"behind a TLS proxy", []string{"HERD_SANDBOX_MODE=host", "HERD_SERVER_PUBLIC_URL=https://herd.example.com"}, []string{"--addr", "127.0.0.1:0"},
			`refusing host bash on server.public_url \"https://herd.example.com\"`},
		{"on every interface", []string{"HERD_SANDBOX_MODE=host"}, []string{"--addr", "0.0.0.0:0"},
			`refusing host bash on the non-loopback address \"0.0.0.0:0\"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out syncBuffer
			code := run(context.Background(), append([]string{"--data-dir", t.TempDir()}, c.args...), c.env, &out, &out)
			if code != 1 || !strings.Contains(out.String(), c.want) || !strings.Contains(out.String(), "sandbox.allow_host_bash_public") {
				t.Errorf("exit %d, output %q; want 1 and %q", code, out.String(), c.want)
			}
		})
	}
}

func TestRunStartsAndStops(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--data-dir", dir, "--addr", "127.0.0.1:0"}, []string{"HERD_ADMIN_EMAIL=ops@example.com", "HERD_ADMIN_PASSWORD=long enough pw", "HERD_METRICS_ADDR=127.0.0.1:0"}, &out, &out)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "herd is listening") {
		if time.Now().After(deadline) {
			t.Fatalf("herd did not start: %s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit code %d: %s", code, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("herd did not stop")
	}
	if _, err := os.Stat(filepath.Join(dir, "herd.db")); err != nil {
		t.Errorf("no database in the data dir: %v", err)
	}
	if !strings.Contains(out.String(), "admin created from the environment") {
		t.Errorf("headless admin not created: %s", out.String())
	}
}

func TestBackupCommand(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--data-dir", dir, "--addr", "127.0.0.1:0"}, []string{"HERD_ADMIN_EMAIL=ops@example.com", "HERD_ADMIN_PASSWORD=long enough pw", "HERD_METRICS_ADDR=127.0.0.1:0"}, &out, &out)
	}()
	for !strings.Contains(out.String(), "herd is listening") {
		time.Sleep(20 * time.Millisecond)
	}
	// While herd serves.
	file := filepath.Join(t.TempDir(), "copy.db")
	var bout syncBuffer
	if code := run(context.Background(), []string{"backup", "--data-dir", dir, file}, nil, &bout, &bout); code != 0 {
		t.Fatalf("backup exit %d: %s", code, bout.String())
	}
	cancel()
	<-done
	if code := run(context.Background(), []string{"backup", "--data-dir", dir}, nil, &bout, &bout); code != 2 {
		t.Errorf("backup without a file: exit %d, want 2", code)
	}
	// The copy is a working database with the admin in it.
	st, err := models.Open(file, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := st.CountUsers(context.Background()); err != nil || n != 1 {
		t.Errorf("users in the backup: %d, %v", n, err)
	}
	_ = st.Close()
	var sout syncBuffer
	ctx2, cancel2 := context.WithCancel(context.Background())
	copyDir := t.TempDir()
	if err := os.Rename(file, filepath.Join(copyDir, "herd.db")); err != nil {
		t.Fatal(err)
	}
	go func() {
		done <- run(ctx2, []string{"--data-dir", copyDir, "--addr", "127.0.0.1:0"}, []string{"HERD_METRICS_ADDR="}, &sout, &sout)
	}()
	for !strings.Contains(sout.String(), "herd is listening") {
		time.Sleep(20 * time.Millisecond)
	}
	cancel2()
	if code := <-done; code != 0 {
		t.Fatalf("herd on the backup: exit %d: %s", code, sout.String())
	}
}
