package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"herd/internal/pgtest"
	"herd/models"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop() // the cluster the PostgreSQL tests started, if any
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// syncBuffer is a bytes.Buffer safe for the logger and the test.
type syncBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	grew chan struct{} // closed by the next Write, for waitFor
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grew != nil {
		close(s.grew)
		s.grew = nil
	}
	return s.b.Write(p)
}

// waitFor waits until the buffer holds substr, woken by each write, and
// reports whether it did within timeout.
func (s *syncBuffer) waitFor(substr string, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		if strings.Contains(s.b.String(), substr) {
			s.mu.Unlock()
			return true
		}
		if s.grew == nil {
			s.grew = make(chan struct{})
		}
		grew := s.grew
		s.mu.Unlock()
		select {
		case <-grew:
		case <-deadline:
			return false
		}
	}
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

func mustParse(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
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
