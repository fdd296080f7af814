package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run commands through the real binary, as a user would: the
// demo lead hands a backticked command to a bash subagent
// (docs/DESIGN.md §4, §11).

// sandboxModes are the modes every sandbox test runs in.
var sandboxModes = []string{"host", "bwrap"}

// skipBwrap skips a bwrap case only where the machine was declared to
// have no bubblewrap (HERD_TEST_SKIP_BWRAP, as in agent/tools); otherwise
// herd's refusal to start in bwrap mode fails the test.
func skipBwrap(t *testing.T, mode string) {
	if mode == "bwrap" && os.Getenv("HERD_TEST_SKIP_BWRAP") != "" {
		t.Skip("HERD_TEST_SKIP_BWRAP is set")
	}
}

// markedSleep returns a sleep duration no other process uses, so a test
// can find exactly its own processes in /proc.
func markedSleep() string {
	return fmt.Sprintf("%d.%06d", 300+rand.IntN(100), rand.IntN(1_000_000))
}

// pidsWithArg lists the running processes with arg among their arguments.
func pidsWithArg(t *testing.T, arg string) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && slices.Contains(strings.Split(string(cmdline), "\x00"), arg) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// runCommand starts a run whose demo lead delegates command to bash and
// returns the thread id.
func runCommand(c *client, command string) string {
	var th struct{ ID string }
	c.call("POST", "/api/threads", map[string]string{"title": "command"}, &th)
	c.call("POST", "/api/threads/"+th.ID+"/runs", map[string]string{"content": "Run `" + command + "`"}, nil)
	return th.ID
}

// TestKillLeavesNoCommand: after a SIGKILL of herd, no process of a
// command it was running survives, whatever the command did to escape
// (new session, nohup, double fork), in host and bwrap mode.
func TestKillLeavesNoCommand(t *testing.T) {
	for _, mode := range sandboxModes {
		t.Run(mode, func(t *testing.T) {
			skipBwrap(t, mode)
			p := startHerdWith(t, t.TempDir(), "HERD_SANDBOX_MODE="+mode)
			if !strings.Contains(p.log.String(), "msg=sandbox mode="+mode) {
				t.Fatalf("no start-up line for sandbox mode %s:\n%s", mode, p.log.String())
			}
			tokens := []string{markedSleep(), markedSleep(), markedSleep(), markedSleep()}
			runCommand(p.signIn(), fmt.Sprintf(
				"setsid sleep %s >/dev/null 2>&1 & nohup sleep %s >/dev/null 2>&1 & ( (sleep %s >/dev/null 2>&1 &) & ); sleep %s",
				tokens[0], tokens[1], tokens[2], tokens[3]))
			deadline := time.Now().Add(30 * time.Second)
			for _, tok := range tokens {
				for len(pidsWithArg(t, tok)) == 0 {
					if time.Now().After(deadline) {
						t.Fatalf("the command's sleep %s never started:\n%s", tok, p.log.String())
					}
					time.Sleep(20 * time.Millisecond)
				}
			}

			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = p.wait(10 * time.Second)
			// The kernel delivers the parent-death signal and tears the
			// namespaces down asynchronously: give it a moment.
			var left []int
			for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				left = left[:0]
				for _, tok := range tokens {
					left = append(left, pidsWithArg(t, tok)...)
				}
				if len(left) == 0 || time.Now().After(deadline) {
					break
				}
			}
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			if len(left) > 0 {
				t.Errorf("processes %v of the killed server's command are still running", left)
			}
		})
	}
}

// TestCommandCannotReachServer: a command in bwrap mode cannot read the
// server's environment (the admin password is there) or the database;
// the same command in host mode can, which is why host mode gives bash
// to admins only.
func TestCommandCannotReachServer(t *testing.T) {
	for _, mode := range sandboxModes {
		t.Run(mode, func(t *testing.T) {
			skipBwrap(t, mode)
			p := startHerdWith(t, t.TempDir(), "HERD_SANDBOX_MODE="+mode)
			c := p.signIn()
			th := runCommand(c, fmt.Sprintf(
				"echo ran; cat /proc/%d/environ /proc/$PPID/environ 2>/dev/null | tr '\\0' '\\n' | grep -a HERD_ADMIN; test -e ../../herd.db && echo db-visible || echo db-hidden",
				p.cmd.Process.Pid))
			result := taskResult(t, c, th)
			leaks := strings.Contains(result, "long enough pw") || strings.Contains(result, "\ndb-visible\n")
			switch {
			case !strings.Contains(result, "ran"):
				t.Fatalf("the command did not run: %q", result)
			case mode == "bwrap" && leaks:
				t.Errorf("a bwrap command reads the server's secrets: %q", result)
			case mode == "host" && !leaks:
				t.Errorf("the host-mode control does not see the server: %q", result)
			}
			stopHerd(t, p)
		})
	}
}

// taskResult waits for the thread's one card to end and returns its result.
func taskResult(t *testing.T, c *client, threadID string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var th struct {
			Tasks []struct {
				Status string `json:"status"`
				Result string `json:"result"`
				Error  string `json:"error"`
			} `json:"tasks"`
		}
		c.call("GET", "/api/threads/"+threadID, nil, &th)
		if len(th.Tasks) == 1 && th.Tasks[0].Status != "queued" && th.Tasks[0].Status != "running" {
			if th.Tasks[0].Status != "completed" {
				t.Fatalf("task %s: %s", th.Tasks[0].Status, th.Tasks[0].Error)
			}
			return th.Tasks[0].Result
		}
	}
	t.Fatal("the bash task did not end")
	return ""
}
