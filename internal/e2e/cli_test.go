package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// herdCmd runs the binary to completion in dir and returns its exit code
// and combined output.
func herdCmd(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(herdBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HERD_ADMIN_EMAIL=ops@example.com", "HERD_ADMIN_PASSWORD=long enough pw")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), out.String()
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("herd %v did not exit (did it start a server?):\n%s", args, out.String())
		return 0, ""
	}
}

// A second herd on a live data directory exits at once, names the holder
// and changes nothing: the first server's run ends exactly once.
func TestSecondServerOnLiveDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startHerd(t, dir)
	c := p.signIn()
	threadID := runningSubagents(c)

	start := time.Now()
	code, out := herdCmd(t, t.TempDir(), "--data-dir", dir, "--addr", "127.0.0.1:0")
	if code != 1 {
		t.Errorf("second server: exit %d, want 1:\n%s", code, out)
	}
	want := "is in use by another herd (PID " + strconv.Itoa(p.cmd.Process.Pid) + ", listening on " + p.url + ")"
	if !strings.Contains(out, want) {
		t.Errorf("second server's message lacks %q:\n%s", want, out)
	}
	if strings.Contains(out, "crash recovery") || strings.Contains(out, "herd is listening") || strings.Contains(out, "msg=sandbox") {
		t.Errorf("second server touched the database, listened or set up the sandbox (and its cgroups):\n%s", out)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("second server took %v to give up", d)
	}

	// The live run finishes on the first server with one terminal per task.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var th threadState
		c.call("GET", "/api/threads/"+threadID, nil, &th)
		if th.Active == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run never ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var page eventPage
	c.call("GET", "/api/threads/"+threadID+"/events?limit=1000", nil, &page)
	ends := map[string]int{}
	runEnds := 0
	for _, e := range page.Events {
		switch e.EventType {
		case "subagent.end":
			ends[e.TaskID]++
		case "run.end":
			runEnds++
		}
	}
	if runEnds != 1 || len(ends) != 3 {
		t.Errorf("run.end ×%d, subagent.end for %d tasks; want 1 and 3", runEnds, len(ends))
	}
	for task, n := range ends {
		if n != 1 {
			t.Errorf("task %s has %d subagent.end rows", task, n)
		}
	}
	var th threadState
	c.call("GET", "/api/threads/"+threadID, nil, &th)
	for _, task := range th.Tasks {
		if strings.Contains(task.Error, "interrupted") {
			t.Errorf("task %s was marked interrupted by the second server: %s", task.TaskID, task.Error)
		}
	}
}

// Sub-commands parse strictly: none of these starts a server or creates a
// data directory.
func TestStrictCommands(t *testing.T) {
	cwd := t.TempDir()
	for _, tt := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"version"}, 0, []string{"herd dev (go1."}},
		{[]string{"version", "extra"}, 2, []string{`version takes no arguments, got "extra"`}},
		{[]string{"verison"}, 2, []string{`unknown command "verison"`, "herd --help"}},
		{[]string{"--data-dir", "x", "stray"}, 2, []string{`unexpected argument "stray"`}},
		{[]string{"--nope"}, 2, []string{"flag provided but not defined: -nope"}},
		{[]string{"--help"}, 0, []string{"herd backup [flags] BACKUP_FILE", "herd version", "-data-dir DIR", "HERD_ADMIN_PASSWORD", "HERD_SERVER_ADDR", "HERD_SUBAGENTS_MAX_RUNNING"}},
		{[]string{"help"}, 0, []string{"Commands:", "Environment:"}},
		{[]string{"backup", "-h"}, 0, []string{"Commands:"}},
	} {
		code, out := herdCmd(t, cwd, tt.args...)
		if code != tt.code {
			t.Errorf("herd %v: exit %d, want %d:\n%s", tt.args, code, tt.code, out)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("herd %v: output lacks %q:\n%s", tt.args, w, out)
			}
		}
	}
	if entries, _ := os.ReadDir(cwd); len(entries) != 0 {
		t.Errorf("a sub-command created %v in the working directory", entries)
	}
}

// herd backup on a mistyped directory fails, writes no backup and creates
// no database.
func TestBackupOfAMissingDataDir(t *testing.T) {
	cwd := t.TempDir()
	code, out := herdCmd(t, cwd, "backup", "--data-dir", "dta", "out.db")
	if code != 1 || !strings.Contains(out, "no database at dta/herd.db") {
		t.Errorf("exit %d, want 1 naming the missing database:\n%s", code, out)
	}
	for _, p := range []string{"out.db", "dta"} {
		if _, err := os.Stat(filepath.Join(cwd, p)); err == nil {
			t.Errorf("a failed backup created %s", p)
		}
	}
}
