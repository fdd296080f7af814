package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func newHostBash(t *testing.T, cfg SandboxConfig) Tool {
	t.Helper()
	cfg.Mode = SandboxHost
	tool, err := NewBash(cfg)
	if err != nil {
		t.Fatalf("NewBash: %v", err)
	}
	return tool
}

// skipBwrapEnv opts a machine without a working bubblewrap out of the
// bwrap tests. Without it they fail rather than skip: CI (.ci/run)
// installs bubblewrap, and a sandbox test that silently skips proves
// nothing.
const skipBwrapEnv = "HERD_TEST_SKIP_BWRAP"

// newBwrapBash returns the bwrap bash tool. Where the sandbox cannot run
// it fails t with the probe's reason, unless skipBwrapEnv is set.
func newBwrapBash(t *testing.T, cfg SandboxConfig) Tool {
	t.Helper()
	cfg.Mode = SandboxBwrap
	tool, err := NewBash(cfg)
	if errors.Is(err, errBwrapUnavailable) && os.Getenv(skipBwrapEnv) != "" {
		t.Skipf("bwrap sandbox unavailable here (%s is set): %v", skipBwrapEnv, err)
	}
	if err != nil {
		t.Fatalf("NewBash(bwrap): %v (set %s=1 to skip the bwrap tests on a machine without bubblewrap)", err, skipBwrapEnv)
	}
	return tool
}

// newGroupOnlyBash returns host bash as it runs where the machine allows
// no PID namespace: only the process group is killed.
func newGroupOnlyBash(t *testing.T, cfg SandboxConfig) Tool {
	t.Helper()
	tool := newHostBash(t, cfg).(*bashTool)
	sb := *tool.sb
	sb.pidns, sb.userns, sb.pidnsErr = false, false, errors.New("disabled by the test")
	tool.sb = &sb
	return tool
}

func runBash(t *testing.T, tool Tool, ws string, args map[string]any) (string, error) {
	t.Helper()
	return tool.Run(context.Background(), Env{Workspace: ws}, argsJSON(t, args))
}

// sleepToken returns a sleep duration no other process uses, so the test
// can find exactly the processes its command started in /proc.
func sleepToken() string {
	return fmt.Sprintf("%d.%06d", 90+rand.IntN(10), rand.IntN(1_000_000))
}

// pidsWithArg lists the live processes with arg among their arguments.
// A zombie has an empty cmdline, so only processes still running count.
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
		if err != nil {
			continue
		}
		if slices.Contains(strings.Split(string(cmdline), "\x00"), arg) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitForProcess waits until a process with arg exists and returns its pid.
// The process runs in another namespace in bwrap mode, so /proc is the one
// view both modes share; the poll is bounded.
func waitForProcess(t *testing.T, arg string) int {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if pids := pidsWithArg(t, arg); len(pids) > 0 {
			return pids[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no process with argument %q appeared", arg)
	return 0
}

// processAlive reports whether pid is a running process (not gone, not a zombie).
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state letter follows the ")" that closes the command name.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// checkGone fails t unless no process with any of args, nor any of pids,
// is running within a second: SIGKILL is delivered asynchronously.
func checkGone(t *testing.T, pids []int, args ...string) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		var left []string
		for _, pid := range pids {
			if processAlive(pid) {
				left = append(left, fmt.Sprintf("pid %d", pid))
			}
		}
		for _, a := range args {
			for _, pid := range pidsWithArg(t, a) {
				left = append(left, fmt.Sprintf("pid %d (sleep %s)", pid, a))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("still running: %s", strings.Join(left, ", "))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBashOutput(t *testing.T) {
	checkToolLeaks(t)
	ws := t.TempDir()
	realWS, err := filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(ws, "hello.txt"), "hi from the workspace\n")
	tool := newHostBash(t, SandboxConfig{BashTimeoutSeconds: 5})
	cases := []struct {
		name, command, want string
	}{
		{"stdout", "echo hello", "hello\n"},
		{"stdout and stderr in order", "echo one; echo two >&2; echo three; echo four >&2", "one\ntwo\nthree\nfour\n"},
		{"no output", "true", "(no output)"},
		{"exit code", "echo oops; exit 2", "oops\nexit code 2"},
		{"exit code without a trailing newline", "printf oops; exit 1", "oops\nexit code 1"},
		{"exit code and no output", "exit 3", "(no output)\nexit code 3"},
		{"failing command with stderr", "echo failed >&2; false", "failed\nexit code 1"},
		{"working directory is the workspace", "pwd -P", realWS + "\n"},
		{"relative paths resolve in the workspace", "cat hello.txt", "hi from the workspace\n"},
		{"HOME is the workspace", `echo "$HOME"`, ws + "\n"},
		{"stdin is empty", "cat; echo done", "done\n"},
		{"multi-line script", "for i in 1 2 3; do\n  echo $i\ndone", "1\n2\n3\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runBash(t, tool, ws, map[string]any{"command": tc.command})
			if err != nil {
				t.Fatalf("bash(%q): %v", tc.command, err)
			}
			if got != tc.want {
				t.Errorf("bash(%q) = %q; want %q", tc.command, got, tc.want)
			}
		})
	}
}

// TestBashKilledBySignal: a command killed by a signal says which, in
// bwrap mode too, where bwrap reports it as exit code 128+N. (With a PID
// namespace of its own, host bash is its namespace's init, which a signal
// from inside cannot kill; the group-only host tool stands in for host.)
func TestBashKilledBySignal(t *testing.T) {
	checkToolLeaks(t)
	for name, tool := range map[string]Tool{
		"host":  newGroupOnlyBash(t, SandboxConfig{BashTimeoutSeconds: 5}),
		"bwrap": newBwrapBash(t, SandboxConfig{BashTimeoutSeconds: 5}),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := runBash(t, tool, t.TempDir(), map[string]any{"command": "kill -TERM $$"})
			if want := "(no output)\nkilled by signal 15 (terminated)"; err != nil || got != want {
				t.Errorf("got %q, %v; want %q", got, err, want)
			}
		})
	}
}

// wantCapped is what the output cap makes of data with limit bytes kept.
func wantCapped(data string, limit int) string {
	if len(data) <= limit {
		return data
	}
	head, tail := limit/2, limit-limit/2
	return data[:head] + fmt.Sprintf("\n[... %d bytes of output cut ...]\n", len(data)-limit) + data[len(data)-tail:]
}

func TestBashOutputCap(t *testing.T) {
	checkToolLeaks(t)
	const limit = 101 // odd, so head (50) and tail (51) differ
	ws := t.TempDir()
	tool := newHostBash(t, SandboxConfig{BashTimeoutSeconds: 5, OutputLimitBytes: limit})
	pattern := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[i%36]
		}
		return string(b)
	}
	cases := []struct {
		name string
		size int
		want string
	}{
		{"one under the limit", limit - 1, pattern(limit - 1)},
		{"exactly the limit", limit, pattern(limit)},
		{"one over the limit", limit + 1, pattern(limit + 1)[:50] + "\n[... 1 bytes of output cut ...]\n" + pattern(limit + 1)[51:]},
		{"far over the limit", 100_000, wantCapped(pattern(100_000), limit)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			writeTestFile(t, filepath.Join(ws, "data"), pattern(tc.size))
			got, err := runBash(t, tool, ws, map[string]any{"command": "cat data"})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
	t.Run("exit code after cut output", func(t *testing.T) {
		writeTestFile(t, filepath.Join(ws, "data"), pattern(500))
		got, err := runBash(t, tool, ws, map[string]any{"command": "cat data; exit 4"})
		if err != nil {
			t.Fatal(err)
		}
		if want := wantCapped(pattern(500), limit) + "\nexit code 4"; got != want {
			t.Errorf("got %q\nwant %q", got, want)
		}
	})
}

func TestBashHeadTailWrites(t *testing.T) {
	data := strings.Repeat("0123456789", 97) + "xyz"
	for _, limit := range []int{1, 2, 10, 333, len(data), len(data) + 1} {
		for _, chunk := range []int{1, 7, 64, len(data)} {
			t.Run(fmt.Sprintf("limit %d chunk %d", limit, chunk), func(t *testing.T) {
				w := newHeadTail(limit)
				for rest := data; rest != ""; {
					n := min(chunk, len(rest))
					if got, err := w.Write([]byte(rest[:n])); got != n || err != nil {
						t.Fatalf("Write = %d, %v; want %d, nil", got, err, n)
					}
					rest = rest[n:]
				}
				if got, want := w.String(), wantCapped(data, limit); got != want {
					t.Errorf("got %q\nwant %q", got, want)
				}
			})
		}
	}
}

func TestBashEnvironmentMinimal(t *testing.T) {
	checkToolLeaks(t)
	t.Setenv("HERD_TEST_SECRET", "hunter2-do-not-leak")
	t.Setenv("OPENAI_API_KEY", "sk-do-not-leak")
	ws := t.TempDir()
	tool := newHostBash(t, SandboxConfig{BashTimeoutSeconds: 5})
	got, err := runBash(t, tool, ws, map[string]any{"command": "env"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "do-not-leak") {
		t.Fatalf("env output leaks the server's secrets:\n%s", got)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	// bash itself adds PWD, SHLVL and _.
	allowed := []string{"PATH", "HOME", "LANG", "TERM", "TMPDIR", "PWD", "SHLVL", "_"}
	for k := range vars {
		if !slices.Contains(allowed, k) {
			t.Errorf("unexpected variable %s=%s", k, vars[k])
		}
	}
	want := map[string]string{"HOME": ws, "TERM": "dumb", "LANG": "C.UTF-8", "TMPDIR": "/tmp", "PATH": os.Getenv("PATH")}
	for k, v := range want {
		if vars[k] != v {
			t.Errorf("%s = %q; want %q", k, vars[k], v)
		}
	}
}

func TestBashTimeoutKillsGroup(t *testing.T) {
	checkToolLeaks(t)
	cases := []struct {
		name        string
		tool        func(*testing.T, SandboxConfig) Tool
		cfgSeconds  int
		argSeconds  int
		wantSeconds int
		wantKilled  string
	}{
		{"per-call timeout", newHostBash, 5, 1, 1, "it and every process it started were killed"},
		{"per-call timeout capped at the config", newHostBash, 1, 100, 1, "it and every process it started were killed"},
		{"without a pid namespace", newGroupOnlyBash, 5, 1, 1, "process group killed"},
		{"bwrap", newBwrapBash, 5, 1, 1, "it and every process it started were killed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			tool := tc.tool(t, SandboxConfig{BashTimeoutSeconds: tc.cfgSeconds})
			bg, fg := sleepToken(), sleepToken()
			start := time.Now()
			got, err := runBash(t, tool, ws, map[string]any{
				"command":         fmt.Sprintf("echo started; sleep %s & sleep %s", bg, fg),
				"timeout_seconds": tc.argSeconds,
			})
			elapsed := time.Since(start)
			if err != nil {
				t.Fatalf("bash: %v", err)
			}
			want := fmt.Sprintf("started\ncommand timed out after %d seconds; %s", tc.wantSeconds, tc.wantKilled)
			if got != want {
				t.Fatalf("got %q; want %q", got, want)
			}
			// Under the timeout plus bashWaitDelay: the kill reached the
			// whole group at once, not bash alone with its children reaped
			// only after the pipes were given up on.
			if lo, hi := time.Duration(tc.wantSeconds)*time.Second, time.Duration(tc.wantSeconds)*time.Second+bashWaitDelay*4/5; elapsed < lo || elapsed > hi {
				t.Errorf("returned after %v; want between %v and %v", elapsed, lo, hi)
			}
			checkGone(t, nil, bg, fg)
		})
	}
}

// cancelWhileRunning starts a command that runs sleep bg in the background
// and sleep fg in the foreground, cancels its context once both run, and
// checks the call returns the cancellation promptly with both killed.
func cancelWhileRunning(t *testing.T, tool Tool) {
	t.Helper()
	ws := t.TempDir()
	bg, fg := sleepToken(), sleepToken()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := tool.Run(ctx, Env{Workspace: ws}, argsJSON(t, map[string]any{
			"command": fmt.Sprintf("sleep %s & sleep %s", bg, fg),
		}))
		done <- result{out, err}
	}()
	pids := []int{waitForProcess(t, bg), waitForProcess(t, fg)}

	start := time.Now()
	cancel()
	select {
	case r := <-done:
		// Under bashWaitDelay: the whole group died at once, so the pipes
		// closed without waiting for the delay.
		if elapsed := time.Since(start); elapsed >= bashWaitDelay {
			t.Errorf("returned %v after cancel; want under %v", elapsed, bashWaitDelay)
		}
		if !errors.Is(r.err, context.Canceled) {
			t.Errorf("Run = %q, %v; want context.Canceled", r.out, r.err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not return within 3s of cancel")
	}
	checkGone(t, pids, bg, fg)
}

func TestBashCancelKillsGroup(t *testing.T) {
	checkToolLeaks(t)
	cancelWhileRunning(t, newHostBash(t, SandboxConfig{BashTimeoutSeconds: 30}))
}

func TestBashBackgroundKilledOnReturn(t *testing.T) {
	checkToolLeaks(t)
	tools := map[string]Tool{
		"host":                    newHostBash(t, SandboxConfig{BashTimeoutSeconds: 10}),
		"without a pid namespace": newGroupOnlyBash(t, SandboxConfig{BashTimeoutSeconds: 10}),
	}
	cases := []struct {
		name, redirect string
	}{
		{"detached from the output", " >/dev/null 2>&1"},
		{"holding the output pipe", ""},
	}
	for mode, tool := range tools {
		for _, tc := range cases {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				token := sleepToken()
				start := time.Now()
				got, err := runBash(t, tool, t.TempDir(), map[string]any{
					"command": fmt.Sprintf("sleep %s%s & echo started", token, tc.redirect),
				})
				if err != nil || got != "started\n" {
					t.Fatalf("got %q, %v", got, err)
				}
				if elapsed := time.Since(start); elapsed > 2*time.Second {
					t.Errorf("returned after %v; a background job must not hold the call", elapsed)
				}
				checkGone(t, nil, token)
			})
		}
	}
}

func TestBashBadArgs(t *testing.T) {
	checkToolLeaks(t)
	tool := newHostBash(t, SandboxConfig{BashTimeoutSeconds: 5})
	cases := []struct {
		name, args, want string
	}{
		{"invalid JSON", `{"command":`, "arguments must be a JSON object"},
		{"missing command", `{}`, `missing required field "command"`},
		{"command of the wrong type", `{"command":["ls"]}`, `field "command" must be a string, got an array`},
		{"blank command", `{"command":"  "}`, `field "command" must not be empty`},
		{"timeout of the wrong type", `{"command":"ls","timeout_seconds":"5"}`, `field "timeout_seconds" must be an integer`},
		{"zero timeout", `{"command":"ls","timeout_seconds":0}`, `field "timeout_seconds" must be at least 1, got 0`},
		{"unknown field", `{"command":"ls","cwd":"/"}`, `unknown field "cwd" (allowed: command, timeout_seconds)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tool.Run(context.Background(), Env{Workspace: t.TempDir()}, []byte(tc.args))
			if !errors.Is(err, ErrBadArgs) {
				t.Fatalf("bash(%s) = %q, %v; want ErrBadArgs", tc.args, got, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q; want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestNewBash(t *testing.T) {
	cases := []struct {
		name        string
		cfg         SandboxConfig
		wantTimeout time.Duration
		wantLimit   int
		wantErr     string
	}{
		{name: "defaults", cfg: SandboxConfig{}, wantTimeout: 120 * time.Second, wantLimit: 30000},
		{name: "configured", cfg: SandboxConfig{Mode: SandboxHost, BashTimeoutSeconds: 7, OutputLimitBytes: 500}, wantTimeout: 7 * time.Second, wantLimit: 500},
		{name: "unknown mode", cfg: SandboxConfig{Mode: "docker"}, wantErr: `sandbox.mode "docker" is not "auto", "host" or "bwrap"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tool, err := NewBash(tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("NewBash = %v; want error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b := tool.(*bashTool)
			if b.timeout != tc.wantTimeout || b.limit != tc.wantLimit {
				t.Errorf("timeout, limit = %v, %d; want %v, %d", b.timeout, b.limit, tc.wantTimeout, tc.wantLimit)
			}
			spec := tool.Spec()
			checkToolSpec(t, spec, []string{"command"})
			for _, want := range []string{strconv.Itoa(tc.wantLimit) + " bytes", fmt.Sprintf("maximum %d", int(tc.wantTimeout/time.Second))} {
				if !strings.Contains(spec.Description, want) {
					t.Errorf("description lacks %q: %s", want, spec.Description)
				}
			}
		})
	}
	t.Run("bwrap missing", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, err := NewBash(SandboxConfig{Mode: SandboxBwrap})
		if !errors.Is(err, errBwrapUnavailable) || !strings.Contains(err.Error(), "bwrap is not installed") {
			t.Errorf("err = %v; want bwrap is not installed", err)
		}
	})
}

func TestCheckBashAllowed(t *testing.T) {
	host := SandboxConfig{Mode: SandboxHost, AllowHostBash: true}
	public := SandboxConfig{Mode: SandboxHost, AllowHostBash: true, AllowHostBashPublic: true}
	bwrap := SandboxConfig{Mode: SandboxBwrap, AllowHostBash: true}
	off := SandboxConfig{Mode: SandboxHost}
	cases := []struct {
		name      string
		cfg       SandboxConfig
		addr, url string
		// refused names what the error must quote; "" = allowed.
		refused string
	}{
		{"host on 127.0.0.1", host, "127.0.0.1:8080", "", ""},
		{"host on another 127/8 address", host, "127.3.2.1:80", "", ""},
		{"host on ::1", host, "[::1]:8080", "", ""},
		{"host on IPv4-mapped loopback", host, "[::ffff:127.0.0.1]:8080", "", ""},
		{"host on localhost", host, "localhost:8080", "", ""},
		{"host on LOCALHOST", host, "LOCALHOST:8080", "", ""},
		{"host on loopback without a port", host, "127.0.0.1", "", ""},
		{"host with a loopback public_url", host, "127.0.0.1:8080", "http://localhost:8080", ""},
		{"host with a loopback IP public_url", host, "127.0.0.1:8080", "http://127.0.0.1:8080/", ""},
		{"host on all interfaces", host, "0.0.0.0:8080", "", `"0.0.0.0:8080"`},
		{"host on an empty host", host, ":8080", "", `":8080"`},
		{"host on IPv6 any", host, "[::]:8080", "", `"[::]:8080"`},
		{"host on a LAN address", host, "192.168.1.10:8080", "", `"192.168.1.10:8080"`},
		{"host on a hostname", host, "herd.example.com:443", "", `"herd.example.com:443"`},
		{"host on a name containing localhost", host, "localhost.example.com:80", "", `"localhost.example.com:80"`},
		{"host behind a TLS proxy", host, "127.0.0.1:8080", "https://herd.example.com", `server.public_url "https://herd.example.com"`},
		{"host behind a proxy on a LAN address", host, "127.0.0.1:8080", "http://10.0.0.5", `server.public_url "http://10.0.0.5"`},
		{"host public allowed", public, "0.0.0.0:8080", "https://herd.example.com", ""},
		{"bwrap anywhere", bwrap, "0.0.0.0:8080", "https://herd.example.com", ""},
		{"bash not offered", off, "0.0.0.0:8080", "https://herd.example.com", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBashAllowed(tc.cfg, tc.addr, tc.url)
			if tc.refused == "" {
				if err != nil {
					t.Errorf("CheckBashAllowed(%q, %q) = %v; want nil", tc.addr, tc.url, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckBashAllowed(%q, %q) = nil; want a refusal", tc.addr, tc.url)
			}
			for _, want := range []string{tc.refused, "sandbox.allow_host_bash_public", "sandbox.mode", "bubblewrap"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
		})
	}
}

// TestBashSpecPerMode: the description the model reads says what holds
// in the mode the tool runs in.
func TestBashSpecPerMode(t *testing.T) {
	limits := SandboxLimits{Processes: 77, MemoryMB: 333, CPUSeconds: 44, FileSizeMB: 55, TmpMB: 66, WorkspaceMB: 88}
	cases := []struct {
		name       string
		tool       Tool
		want, lack []string
	}{
		{"host", newHostBash(t, SandboxConfig{Limits: limits}),
			[]string{"runs directly on the host machine", "may use 88 MiB", "killed when it returns"},
			[]string{"sandbox", "no network", "77 processes"}},
		{"bwrap", newBwrapBash(t, SandboxConfig{Limits: limits}),
			[]string{"runs in a sandbox: there is no network", "77 processes", "333 MiB of memory", "44 s of CPU time",
				"files up to 55 MiB", "/tmp up to 66 MiB", "may use 88 MiB"},
			[]string{"host machine", "network is reachable"}},
		{"bwrap with the host network", newBwrapBash(t, SandboxConfig{Network: NetworkHost}),
			[]string{"runs in a sandbox: the network is reachable"},
			[]string{"no network"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.tool.Spec().Description
			for _, w := range tc.want {
				if !strings.Contains(d, w) {
					t.Errorf("description lacks %q: %s", w, d)
				}
			}
			for _, l := range tc.lack {
				if strings.Contains(d, l) {
					t.Errorf("description has %q: %s", l, d)
				}
			}
		})
	}
}

func TestBashBwrap(t *testing.T) {
	checkToolLeaks(t)
	sandboxed := newBwrapBash(t, SandboxConfig{BashTimeoutSeconds: 5})
	onHost := newHostBash(t, SandboxConfig{BashTimeoutSeconds: 5})

	secret := filepath.Join(t.TempDir(), "secret.txt")
	writeTestFile(t, secret, outsideSecret+"\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	connect := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo connected", ln.Addr().(*net.TCPAddr).Port)
	usrProbe := fmt.Sprintf("/usr/herd-bwrap-probe-%d", rand.Int())
	t.Cleanup(func() { os.Remove(usrProbe) })

	cases := []struct {
		name    string
		command string
		// wantHost is what the same command shows on the host, proving the
		// sandbox, not the command, makes the difference.
		wantHost    func(string) bool
		wantSandbox func(string) bool
	}{
		{
			name:     "cannot read a file outside the workspace",
			command:  "cat " + secret,
			wantHost: func(out string) bool { return out == outsideSecret+"\n" },
			wantSandbox: func(out string) bool {
				return !strings.Contains(out, outsideSecret) && strings.HasSuffix(out, "exit code 1")
			},
		},
		{
			name:     "cannot reach the network",
			command:  connect,
			wantHost: func(out string) bool { return out == "connected\n" },
			wantSandbox: func(out string) bool {
				return !strings.Contains(out, "connected\n") && strings.HasSuffix(out, "exit code 1")
			},
		},
		{
			name:        "sees no host processes",
			command:     fmt.Sprintf("test -d /proc/%d && echo visible || echo hidden", os.Getpid()),
			wantHost:    func(out string) bool { return out == "visible\n" },
			wantSandbox: func(out string) bool { return out == "hidden\n" },
		},
		{
			name:        "system directories are read-only",
			command:     "touch " + usrProbe + " 2>/dev/null && echo wrote || echo refused",
			wantSandbox: func(out string) bool { return out == "refused\n" },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			if tc.wantHost != nil {
				got, err := runBash(t, onHost, ws, map[string]any{"command": tc.command})
				if err != nil || !tc.wantHost(got) {
					t.Fatalf("on the host: %q, %v; the control case does not hold", got, err)
				}
			}
			got, err := runBash(t, sandboxed, ws, map[string]any{"command": tc.command})
			if err != nil || !tc.wantSandbox(got) {
				t.Errorf("in the sandbox: %q, %v", got, err)
			}
		})
	}
	if _, err := os.Stat(usrProbe); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sandbox created %s on the host: %v", usrProbe, err)
	}

	t.Run("works in the workspace", func(t *testing.T) {
		ws := t.TempDir()
		writeTestFile(t, filepath.Join(ws, "in.txt"), "input\n")
		got, err := runBash(t, sandboxed, ws, map[string]any{
			"command": `pwd; echo "$HOME"; cat in.txt; echo written > out.txt; mkdir -p d && echo x > d/y; echo tmp > /tmp/t && cat /tmp/t`,
		})
		if want := fmt.Sprintf("%s\n%s\ninput\ntmp\n", ws, ws); err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
		if out := readTestFile(t, filepath.Join(ws, "out.txt")); out != "written\n" {
			t.Errorf("out.txt = %q; want the sandbox's write on the host", out)
		}
		if out := readTestFile(t, filepath.Join(ws, "d", "y")); out != "x\n" {
			t.Errorf("d/y = %q", out)
		}
	})
	t.Run("environment is minimal", func(t *testing.T) {
		t.Setenv("HERD_TEST_SECRET", "hunter2-do-not-leak")
		got, err := runBash(t, sandboxed, t.TempDir(), map[string]any{"command": "env"})
		if err != nil || strings.Contains(got, "do-not-leak") || !strings.Contains(got, "PATH="+defaultPath+"\n") {
			t.Errorf("env = %q, %v", got, err)
		}
	})
	t.Run("exit code passes through", func(t *testing.T) {
		got, err := runBash(t, sandboxed, t.TempDir(), map[string]any{"command": "echo e >&2; exit 7"})
		if err != nil || got != "e\nexit code 7" {
			t.Errorf("got %q, %v", got, err)
		}
	})
	t.Run("timeout kills everything inside", func(t *testing.T) {
		bg, fg := sleepToken(), sleepToken()
		got, err := runBash(t, sandboxed, t.TempDir(), map[string]any{
			"command":         fmt.Sprintf("sleep %s & sleep %s", bg, fg),
			"timeout_seconds": 1,
		})
		if err != nil || got != "(no output)\ncommand timed out after 1 seconds; it and every process it started were killed" {
			t.Fatalf("got %q, %v", got, err)
		}
		checkGone(t, nil, bg, fg)
	})
	t.Run("cancel kills everything inside", func(t *testing.T) {
		cancelWhileRunning(t, sandboxed)
	})
	t.Run("description says it is sandboxed", func(t *testing.T) {
		if d := sandboxed.Spec().Description; !strings.Contains(d, "no network") {
			t.Errorf("description = %q", d)
		}
	})
}
